"""One measured run of a system: by the release's Java tools, the C++ client or the SDK.

A producer run sends for the run's length to a fresh topic; its messages are what the
broker stored there (the queues' max offsets). A consumer run first has the release's
BatchProducer write a backlog (batches of 32, not measured), then starts the Consumer
in a new group, which reads the backlog from its start (the broker answers a new
group's offset query with 0 while the queue's first message is in memory). The
Consumer commits its offsets every 5 s, so its messages and the broker's CPU are both
taken between the first and the last commit seen by polling the group's progress
(GET_CONSUME_STATS). A C++ client case (:mod:`.cppclient`) creates its topic, writes
the same backlog when it reads one, warms the client up, then measures one time-capped
run of the client's driver process. The SDK case (:mod:`.sdkcase`) runs Rocklet's own
client end to end at a fixed rate in a worker process and takes its figures, latency
percentiles included, over the worker's measured window.

Broker CPU is user + system time of every thread of the broker process
(``/proc/<pid>/stat``); peak RSS is its VmHWM (``/proc/<pid>/status``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple

from rocklet.benchsuite.vsrmq.cppclient import cpp_job, create_topic, run_cpp
from rocklet.benchsuite.vsrmq.release import RocketMqRelease
from rocklet.benchsuite.vsrmq.results import Case, Run
from rocklet.benchsuite.vsrmq.sdkcase import run_sdk_e2e, sdk_e2e_job
from rocklet.benchsuite.vsrmq.servers import RunningSystem
from rocklet.benchsuite.vsrmq.toolout import (
    busy_consumer_rate,
    consumer_lines,
    producer_tps,
    steady_rate,
)
from rocklet.client.admin import Admin
from rocklet.client.errors import ClientError

__all__ = [
    "BODY_BYTES",
    "BacklogError",
    "RunSpec",
    "broker_cpu_s",
    "load_1min",
    "measure_run",
    "peak_rss_mib",
]

BODY_BYTES: Final = 1024
_TOOL_HEAP: Final = "1g"
_CLK_TCK: Final = os.sysconf("SC_CLK_TCK")
#: The tools print their first rate ~11 s after the JVM starts, then every 10 s; a run
#: of S seconds lasts S + this, so the line due at S is printed.
_TAIL_S: Final = 3.0
_POLL_S: Final = 0.25
_REASON_CHARS: Final = 80
_BACKLOG_TIMEOUT_S: Final = 900.0
_PRODUCER: Final = "org.apache.rocketmq.example.benchmark.Producer"
_CONSUMER: Final = "org.apache.rocketmq.example.benchmark.Consumer"
_BATCH_PRODUCER: Final = "org.apache.rocketmq.example.benchmark.BatchProducer"


def broker_cpu_s(pid: int) -> float:
    """User + system CPU seconds of the process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def load_1min() -> float:
    """The 1-minute load average."""
    return float(Path("/proc/loadavg").read_text().split()[0])


@dataclass(frozen=True)
class RunSpec:
    """What to run.

    Attributes:
        case: The workload.
        pair: 1-based pair number.
        seconds: How long the measured tool runs (plus a few seconds' tail).
        backlog: Messages written before a consumer case.
        work: A directory for the tool's logs.
        warmup_s: Length of the unmeasured run of the C++ client before a C++ case's
            measured one (0: none).
    """

    case: Case
    pair: int
    seconds: float
    backlog: int
    work: Path
    warmup_s: float = 0.0


class _Measured(NamedTuple):
    tps: list[int]  # every rate line the tool printed
    rate: float | None  # its steady msg/s
    messages: int
    cpu_s: float
    notes: list[str]
    client_cpu_s: float | None = None  # the C++ and SDK cases: the client process's CPU
    wall_s: float | None = None  # and the span both CPU figures cover
    latency_ms: dict[str, float] | None = None  # the SDK case: send -> listener percentiles
    hiccups: dict[str, float] | None = None  # and the machine's stalls in its window


class _Tool:
    """The release's benchmark class as a child process writing to a log file."""

    def __init__(self, release: RocketMqRelease, work: Path, name: str) -> None:
        self.release = release
        self.work = work
        self.log = work / f"{name}.log"

    async def run(
        self, main_class: str, args: list[str], seconds: float, stop: asyncio.Event | None = None
    ) -> str:
        """Run until it exits, ``seconds`` pass or ``stop`` is set (then SIGTERM).

        Returns:
            Its output so far (stdout and stderr).
        """
        argv = self.release.java_argv(
            _TOOL_HEAP,
            main_class,
            *args,
            props=(
                f"-Duser.home={self.work / 'toolhome'}",
                f"-Drocketmq.client.logRoot={self.work / 'clientlogs'}",
                "-Dlogback.statusListenerClass=ch.qos.logback.core.status.NopStatusListener",
            ),
        )
        with self.log.open("ab") as log:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log
            )
            ends = [asyncio.ensure_future(proc.wait())]
            if stop is not None:
                ends.append(asyncio.ensure_future(stop.wait()))
            try:
                await asyncio.wait(ends, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for end in ends:
                    end.cancel()
                if proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(signal.SIGTERM)
                    try:
                        await asyncio.wait_for(proc.wait(), 30)
                    except TimeoutError:
                        proc.kill()
                        await proc.wait()
        return self.log.read_text(errors="replace")


async def _stored(admin: Admin, topic: str) -> int:
    """Messages in the topic: the sum of its queues' max offsets (0 if it has no route)."""
    try:
        stats = await admin.topic_stats(topic)
    except ClientError:
        return 0
    return sum(o.max_offset for o in stats.values())


async def _committed(admin: Admin, group: str, topic: str) -> int | None:
    """The group's committed offsets on the topic, summed (None before its first commit)."""
    try:
        stats = await admin.consume_stats(group, topic)
    except (ClientError, OSError, TimeoutError):
        return None
    offsets = [w.consumer_offset for w in stats.offset_table.values() if w.consumer_offset >= 0]
    return sum(offsets) if offsets else None


async def _producer_run(
    release: RocketMqRelease, system: RunningSystem, spec: RunSpec, admin: Admin, topic: str
) -> _Measured:
    pid = system.broker.pid
    before = broker_cpu_s(pid)
    text = await _Tool(release, spec.work, f"{system.name}-{spec.case.name}").run(
        _PRODUCER,
        ["-n", system.namesrv, "-t", topic, "-w", str(spec.case.threads), "-s", str(BODY_BYTES)],
        spec.seconds + _TAIL_S,
    )
    cpu = broker_cpu_s(pid) - before
    tps = producer_tps(text)
    return _Measured(tps, steady_rate(tps), await _stored(admin, topic), cpu, [])


class BacklogError(RuntimeError):
    """The backlog of a consumer case could not be written in time."""


async def _write_backlog(
    release: RocketMqRelease, system: RunningSystem, spec: RunSpec, admin: Admin, topic: str
) -> int:
    """Fill ``topic`` with at least ``spec.backlog`` messages, fast, with batches.

    Raises:
        BacklogError: Fewer were stored within the time allowed.
    """
    stop = asyncio.Event()
    tool = _Tool(release, spec.work, f"{system.name}-{spec.case.name}-backlog")
    args = ["-n", system.namesrv, "-t", topic, "-w", "16", "-s", str(BODY_BYTES), "-b", "32"]
    task = asyncio.create_task(tool.run(_BATCH_PRODUCER, args, _BACKLOG_TIMEOUT_S, stop))
    while not task.done():
        if await _stored(admin, topic) >= spec.backlog:
            stop.set()
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), _POLL_S)
    text = await task
    stored = await _stored(admin, topic)
    if stored < spec.backlog:
        raise BacklogError(
            f"{system.name}: only {stored:,} of the {spec.backlog:,} backlog messages stored; "
            f"the batch producer said:\n{text[-1500:]}"
        )
    return stored


async def _consumer_run(
    release: RocketMqRelease, system: RunningSystem, spec: RunSpec, admin: Admin, topic: str
) -> _Measured:
    backlog = await _write_backlog(release, system, spec, admin, topic)
    group = f"VsRmqC{spec.case.threads}_{uuid.uuid4().hex[:8]}"
    pid = system.broker.pid
    tool = _Tool(release, spec.work, f"{system.name}-{spec.case.name}")
    start_cpu = broker_cpu_s(pid)
    task = asyncio.create_task(
        tool.run(
            _CONSUMER,
            ["-n", system.namesrv, "-t", topic, "-g", group, "-w", str(spec.case.threads)],
            spec.seconds + _TAIL_S,
        )
    )
    # (cpu, committed) at each commit seen: the window runs from the first to the last.
    commits: list[tuple[float, int]] = []
    reading_at_ms = 0.0  # when a commit last showed the group short of the backlog
    while not task.done():
        committed = await _committed(admin, group, topic)
        if committed is not None and (not commits or committed != commits[-1][1]):
            commits.append((broker_cpu_s(pid), committed))
            if committed < backlog:  # seen up to a poll late: count from the poll before
                reading_at_ms = (time.time() - _POLL_S) * 1000
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), _POLL_S)
    text = task.result()
    messages, cpu, notes = commit_window(commits, broker_cpu_s(pid) - start_cpu, backlog)
    drained = bool(commits) and commits[-1][1] >= backlog
    lines = consumer_lines(text)
    rate, note = busy_consumer_rate(lines, reading_at_ms if drained else None)
    notes += [note] if note else []
    return _Measured([tps for _, tps in lines], rate, messages, cpu, notes)


async def _cpp_run(
    release: RocketMqRelease, system: RunningSystem, spec: RunSpec, admin: Admin, topic: str
) -> _Measured:
    """A C++ client case: the topic made first, then the driver for the run's length.

    An unmeasured warm-up run of the driver comes first (a fresh JVM would otherwise be
    measured while its JIT compiles; the Java cases drop the tool's first rate line for
    the same reason). The broker's and the client's CPU both cover the measured
    driver's whole life (its start and the client's too); the rate is the driver's,
    over its timed loop.
    """
    await create_topic(admin, topic)
    notes = []
    backlog = None
    if spec.case.backlog_first:
        backlog = await _write_backlog(release, system, spec, admin, topic)
    if spec.warmup_s > 0:
        # Its own group: a warm-up pull leaves the measured group's offsets at 0.
        await run_cpp(cpp_job(spec.case, topic, spec.warmup_s), system.namesrv, spec.work / "cpp")
    pid = system.broker.pid
    before = broker_cpu_s(pid)
    got = await run_cpp(cpp_job(spec.case, topic, spec.seconds), system.namesrv, spec.work / "cpp")
    cpu = broker_cpu_s(pid) - before
    result = got.result
    if backlog is not None:
        drained = int(result["messages"]) >= backlog
        notes.append(f"backlog of {backlog:,}" + (" drained" if drained else ""))
    if result.get("errors"):
        # Failed sends are not counted; the first reason says which kind (a timeout?).
        first = (result.get("error_samples") or ["?"])[0]
        notes.append(f"{result['errors']} send errors, first: {first[:_REASON_CHARS]}")
    return _Measured(
        [], result["rate"], int(result["messages"]), cpu, notes, got.client_cpu_s, got.wall_s
    )


async def _sdk_run(
    release: RocketMqRelease, system: RunningSystem, spec: RunSpec, admin: Admin, topic: str
) -> _Measured:
    """The SDK case (:mod:`.sdkcase`): figures of the worker's measured window."""
    job = sdk_e2e_job(system.namesrv, topic, spec.seconds, system.broker.pid)
    result = await run_sdk_e2e(job, spec.work / "sdk")
    window = result["window_cpu"]
    notes = []
    if result["received"] < result["messages"]:
        notes.append(f"{result['messages'] - result['received']:,} messages never arrived")
    return _Measured(
        [],
        result["rate"],
        int(result["messages"]),
        window["server_cpu_s"],
        notes,
        window["client_cpu_s"],
        window["wall_s"],
        result["latency_ms"],
        result.get("hiccups"),
    )


def commit_window(
    commits: list[tuple[float, int]], whole_run_cpu_s: float, backlog: int
) -> tuple[int, float, list[str]]:
    """Messages and broker CPU of a consumer run, from the offset commits seen.

    Args:
        commits: (broker CPU seconds, committed offsets summed) at each change seen,
            oldest first.
        whole_run_cpu_s: Broker CPU over the whole run (used with fewer than 2 commits).
        backlog: Messages there were to read.

    Returns:
        Messages, CPU seconds, and notes qualifying them.
    """
    notes = []
    if len(commits) >= 2:
        cpu, messages = commits[-1][0] - commits[0][0], commits[-1][1] - commits[0][1]
    else:  # runs shorter than two commit intervals: the whole run
        cpu, messages = whole_run_cpu_s, commits[-1][1] if commits else 0
        notes.append("CPU over the whole run")
    if commits and commits[-1][1] >= backlog:
        notes.append(f"backlog of {backlog:,} drained")
    return messages, cpu, notes


async def measure_run(release: RocketMqRelease, system: RunningSystem, spec: RunSpec) -> Run:
    """Run ``spec`` against ``system`` and measure it.

    Args:
        release: Whose Java tools to run.
        system: The system under test, up.
        spec: The case and its parameters.

    Returns:
        The run's figures.
    """
    topic = f"VsRmq_{spec.case.name}_{uuid.uuid4().hex[:8]}"
    load_before = load_1min()
    async with Admin(system.namesrv, instance_name=f"vsrmq-{uuid.uuid4().hex[:8]}") as admin:
        runs = {"producer": _producer_run, "consumer": _consumer_run, "sdk-e2e": _sdk_run}
        body = runs.get(spec.case.tool, _cpp_run)
        got = await body(release, system, spec, admin, topic)
    return Run(
        system=system.name,
        case=spec.case.name,
        pair=spec.pair,
        msgs_per_s=got.rate,
        messages=got.messages,
        cpu_s=got.cpu_s,
        peak_rss_mib=peak_rss_mib(system.broker.pid),
        load_before=load_before,
        load_after=load_1min(),
        tps_lines=got.tps,
        notes=got.notes,
        client_cpu_s=got.client_cpu_s,
        wall_s=got.wall_s,
        latency_ms=got.latency_ms,
        hiccups=got.hiccups,
    )
