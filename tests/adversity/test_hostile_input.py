"""Hostile input against a real ``rocklet standalone`` process: fuzzing and descriptors.

The fuzzer (tests/fuzzing.py) sends mutated and broken frames to the name server and
the broker of one process while a well-behaved client keeps sending, reading back and
asking the name server. Passing means: the process is alive, its log has no crash
("processor failed", a traceback...), every intact request that expects an answer got
one and none carried an exception's text, the witness was served throughout, and the
process's anonymous memory did not keep growing. ``make test`` sends a few thousand
frames; ``ROCKLET_ADVERSITY=long`` sends a million (docs/reliability.md).

The descriptor test sends every request family many times and checks the open
descriptors come back to what they were: no descriptor per request, and store files
held only while mapped.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import iter_messages
from rocklet.transport.dial import open_connection
from tests.adversity.conftest import rounds
from tests.adversity.procs import BrokerProcess, running_broker
from tests.broker.test_fuzz import witness_pull
from tests.broker.test_send_pull import cpp_send
from tests.fuzzing import (
    KEEP_TOPIC,
    FuzzReport,
    Mutator,
    Target,
    failure_lines,
    fuzz,
    may_be_held,
    seeds,
)

MiB = 1024 * 1024
#: Small segments, so a long run rolls the commitlog and maps new files.
PROPS = {
    "mappedFileSizeCommitLog": str(4 * MiB),
    "mappedFileSizeConsumeQueue": str(6000 * 20),
    "maxMessageSize": str(64 * 1024),
}
SEED = int(os.environ.get("ROCKLET_FUZZ_SEED", str(random.randrange(2**32))))


def status_kib(pid: int, key: str) -> int:
    """A ``/proc/<pid>/status`` figure in KiB (VmRSS, RssAnon, VmHWM...)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {key} in /proc/{pid}/status")


def descriptors(broker: BrokerProcess) -> Counter[str]:
    """The process's open descriptors by kind: sockets, store files, other."""
    kinds: Counter[str] = Counter()
    fd_dir = Path(f"/proc/{broker.pid}/fd")
    for entry in fd_dir.iterdir():
        try:
            target = os.readlink(entry)
        except FileNotFoundError:  # closed while we looked
            continue
        if target.startswith("socket:"):
            kinds["socket"] += 1
        elif target.startswith(str(broker.store)):
            kinds["store file"] += 1
        else:
            kinds["other"] += 1
    return kinds


def mapped_store_files(broker: BrokerProcess) -> int:
    """Distinct store files the process has mapped (``/proc/<pid>/maps``)."""
    paths = set()
    for line in Path(f"/proc/{broker.pid}/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith(str(broker.store)):
            paths.add(parts[5])
    return len(paths)


@pytest.mark.timeout(rounds(300, 6 * 3600))
async def test_fuzzed_frames_leave_a_real_broker_serving(tmp_path: Path) -> None:
    frames = rounds(4000, 1_000_000)
    async with running_broker(tmp_path, PROPS) as broker:
        ports: dict[Target, int] = {"broker": broker.broker_port, "namesrv": broker.namesrv_port}
        stop = asyncio.Event()
        served = asyncio.create_task(_witness(broker, stop))
        samples: list[tuple[int, int, int]] = []

        def sample(report: FuzzReport) -> None:
            if report.frames // 2000 > len(samples):
                pid = broker.pid
                samples.append(
                    (report.frames, status_kib(pid, "RssAnon"), status_kib(pid, "VmRSS"))
                )
                if len(samples) % 50 == 0:  # progress of a long run, every 100k frames
                    print(f"{report.summary()}; RssAnon {samples[-1][1]} KiB", file=sys.stderr)

        report = await fuzz(Mutator(SEED), ports, frames, on_progress=sample)
        stop.set()
        witnessed = await served
        assert broker.proc is not None and broker.proc.returncode is None, "the broker died"
        fds = descriptors(broker)
        anon_kib, rss_kib = status_kib(broker.pid, "RssAnon"), status_kib(broker.pid, "VmRSS")
        peak_kib = status_kib(broker.pid, "VmHWM")
        assert await broker.stop() == 0
        crashes = failure_lines(broker.lines)
    print(
        f"\nseed {SEED}: {report.summary()}\n"
        f"witness: {witnessed} rounds; memory at the end: RssAnon {anon_kib // 1024} MiB, "
        f"VmRSS {rss_kib // 1024} MiB, peak {peak_kib // 1024} MiB; descriptors {dict(fds)}\n"
        f"samples (frames, RssAnon KiB, VmRSS KiB): {samples[:: max(1, len(samples) // 10)]}",
        file=sys.stderr,
    )
    assert crashes == [], (SEED, crashes[:5])
    assert report.crashes == [], (SEED, report.crashes[:5])
    assert report.unanswered == [], (SEED, report.unanswered[:5])
    assert report.closed_by_server > 0
    # Memory: what the broker keeps is bounded by the fuzzer's name pools, so after the
    # first samples (tables filled, caches warm) anonymous memory stays level.
    if len(samples) >= 10:
        warm = max(anon for _, anon, _ in samples[: len(samples) // 5])
        assert anon_kib < warm + 64 * 1024, (warm, anon_kib, samples)


async def _witness(broker: BrokerProcess, stop: asyncio.Event) -> int:
    """Send, read back and ask the name server, until told to stop; returns the rounds."""
    sent = 0
    async with (
        await open_connection("127.0.0.1", broker.broker_port) as conn,
        await open_connection("127.0.0.1", broker.namesrv_port) as namesrv,
    ):
        while not stop.is_set() or sent == 0:
            body = f"witness-{sent}".encode()
            answer = await conn.request(cpp_send(KEEP_TOPIC, body), 10)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            got = await conn.request(witness_pull(sent), 10)
            assert got.code == ResponseCode.SUCCESS, got.remark
            assert [m.body for m in iter_messages(got.body)][:1] == [body]
            sent += 1
            listed = RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            assert (await namesrv.request(listed, 10)).code == ResponseCode.SUCCESS
            await asyncio.sleep(0.05)  # pacing only: nothing waits on it
    return sent


@pytest.mark.timeout(rounds(300, 3600))
async def test_requests_of_every_family_leave_no_descriptor_behind(tmp_path: Path) -> None:
    """A valid request of every code of both servers, many times over."""
    one_per_code = {(s.target, s.cmd.code): s for s in seeds() if not may_be_held(s.cmd)}
    requests = list(one_per_code.values())
    repeats = rounds(20, 2000)
    async with running_broker(tmp_path, PROPS) as broker:
        ports = {"broker": broker.broker_port, "namesrv": broker.namesrv_port}

        async def one_round() -> None:
            async with (
                await open_connection("127.0.0.1", ports["broker"]) as conn,
                await open_connection("127.0.0.1", ports["namesrv"]) as namesrv,
            ):
                for seed in requests:
                    on = conn if seed.target == "broker" else namesrv
                    if seed.cmd.is_oneway or seed.cmd.is_response:
                        continue
                    answer = await on.request(seed.cmd, 15)
                    assert answer.code != ResponseCode.SYSTEM_ERROR or not (
                        answer.remark or ""
                    ).endswith("Error"), answer.remark

        await one_round()  # the store files every family maps are mapped now
        before = descriptors(broker)
        for _ in range(repeats):
            await one_round()
        # Our connections are closed; the broker notices within a moment.
        for _ in range(100):
            after = descriptors(broker)
            if after["socket"] <= before["socket"]:
                break
            await asyncio.sleep(0.05)
        mapped = mapped_store_files(broker)
        print(
            f"\n{repeats} rounds of {len(requests)} requests: descriptors before {dict(before)}, "
            f"after {dict(after)}; {mapped} store files mapped",
            file=sys.stderr,
        )
        assert failure_lines(broker.lines) == []
    assert after["socket"] <= before["socket"]
    assert after["other"] <= before["other"]
    # Store files: only what the new messages' segments map (the commitlog may roll),
    # and never more than one descriptor per mapped file (two before Python 3.13, whose
    # mmap keeps a duplicate of the descriptor unless told not to).
    per_file = 1 if sys.version_info >= (3, 13) else 2
    assert after["store file"] <= per_file * mapped + 2, (after, mapped)
