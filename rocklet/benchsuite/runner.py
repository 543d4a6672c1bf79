"""One ``rocklet bench`` session: limits, then every system's cases, ``runs`` times over.

Each run measures the machine's limits (:mod:`rocklet.benchsuite.limits`), then, one
server at a time, starts the server on loopback in the run's temporary directory, runs
its cases (:mod:`rocklet.benchsuite.cases`) and stops it by PID. Runs repeat the whole
sequence, so slow drifts of the machine touch every system alike; medians are taken
over runs (:mod:`rocklet.benchsuite.report`). The results file is rewritten after
every run, so an interrupted session keeps what it measured.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import itertools
import json
import os
import platform
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Final

from rocklet.benchsuite.cases import CPP_DRIVER, CaseError, run_case
from rocklet.benchsuite.components import COMPONENTS, run_components
from rocklet.benchsuite.limits import LimitSettings, limit_names, measure_limits
from rocklet.benchsuite.measure import python_facts
from rocklet.benchsuite.peers.base import Server
from rocklet.benchsuite.peers.nats import NatsServer
from rocklet.benchsuite.peers.rabbitmq import RabbitMqServer
from rocklet.benchsuite.peers.redis_streams import RedisServer
from rocklet.benchsuite.peers.rocklet import RockletServer
from rocklet.benchsuite.plan import SYSTEMS, Case, Profile, build_plan, select_cases
from rocklet.benchsuite.procs import PeerStartError
from rocklet.benchsuite.progress import Progress

__all__ = [
    "Interrupted",
    "Session",
    "availability",
    "machine_facts",
    "run_session",
    "write_results",
]

_START_TIMEOUT_S: Final = 90.0
#: Python modules each system's client needs.
_MODULES: Final[dict[str, tuple[str, ...]]] = {
    "redis": ("redis", "hiredis"),
    "rabbitmq": ("aio_pika",),
    "rabbitmq-stream": ("rstream",),
    "nats": ("nats",),
    "rocklet-cpp": ("rocketmq",),
}
_SERVERS: Final[dict[str, Callable[[], Server]]] = {
    "rocklet": lambda: RockletServer("rocklet", "ASYNC_FLUSH"),
    "rocklet-sync": lambda: RockletServer("rocklet-sync", "SYNC_FLUSH"),
    "redis": RedisServer,
    "rabbitmq": RabbitMqServer,
    "nats": NatsServer,
}
_BINARIES: Final[dict[str, Callable[[], str | None]]] = {
    "redis": RedisServer.available,
    "rabbitmq": RabbitMqServer.available,
    "nats": NatsServer.available,
}


def availability(system: str) -> str | None:
    """Why ``system`` cannot run on this machine (None when it can)."""
    server = SYSTEMS[system].server
    if server in _BINARIES and (why := _BINARIES[server]()) is not None:
        return f"{why} (make bench-tools installs it)"
    for module in _MODULES.get(system, ()):
        if importlib.util.find_spec(module) is None:
            return f"Python module {module} is missing (pip install '.[bench]')"
    if system == "rocklet-cpp" and not CPP_DRIVER.exists():
        return f"{CPP_DRIVER} is missing (run from a source checkout)"
    return None


def machine_facts() -> dict[str, Any]:
    """CPU, memory, kernel, Python and the tree's revision, for the record."""
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "interpreter": python_facts(),
        "revision": _revision(),
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
    }


def _revision() -> str:
    """The checkout's commit, with "+changes" when the tree differs from it."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+changes" if status.strip() else "")


@dataclass
class Session:
    """What a session measures and where it writes.

    Attributes:
        profile: Counts and caps.
        systems: Systems to run (unavailable ones are recorded as skipped).
        out_dir: Where ``results.json`` (and the report and chart) go.
        work_dir: Parent of the temporary data directories.
        keep: Keep the data directories.
        command: The command line, for the record.
        runs: Override of the profile's run count.
        components: Also run the component benchmarks of ``bench/`` after the runs.
        cases: Patterns of the case keys to run (empty: every case).
        skipped: Systems left out, and why (filled in by :func:`run_session`).
    """

    profile: Profile
    systems: tuple[str, ...]
    out_dir: Path
    work_dir: Path | None = None
    keep: bool = False
    command: str = ""
    runs: int | None = None
    components: bool = False
    cases: tuple[str, ...] = ()
    skipped: dict[str, str] = field(default_factory=dict)


class Interrupted(KeyboardInterrupt):
    """SIGTERM: unwind like Ctrl-C, stopping the servers on the way out."""


@contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    def handler(_signum: int, _frame: FrameType | None) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _summary(result: Mapping[str, Any]) -> str:
    if not result.get("ok"):
        return f"FAILED {str(result.get('error', ''))[:120]}"
    text = f"{result['rate']:,.0f} msg/s"
    if result.get("requests") and result.get("seconds"):
        text += f" in {result['requests'] / result['seconds']:,.0f} requests/s"
    if (lat := result.get("latency_ms")) is not None:
        text += f", p50 {lat['p50']:.2f} ms, p99 {lat['p99']:.2f} ms"
    return text + f" (other load {result['cpu']['other_cores']:.2f} cores)"


def _limit_outcome(result: Mapping[str, Any]) -> str:
    for key, unit in (("mb_s", "MB/s"), ("gbit_s", "Gbit/s"), ("rate", "/s")):
        if key in result:
            return f"{result[key]:,.1f} {unit}"
    return f"FAILED {result.get('error', '')}"


def _run_server(
    name: str, cases: Sequence[Case], workdir: Path, progress: Progress
) -> dict[str, Any]:
    """Start one server, run its cases in order, stop it; every case gets a result."""
    results: dict[str, Any] = {}
    server = _SERVERS[name]()
    progress.start(f"starting {name}")
    began = time.monotonic()
    try:
        server.start(workdir / name, _START_TIMEOUT_S)
    except (PeerStartError, OSError) as exc:
        for case in cases:
            results[case.key] = {"ok": False, "error": f"server did not start: {exc}"}
            progress.finish(case.key, "skipped: server did not start")
        return results
    progress.note(f"{name} up in {time.monotonic() - began:.1f} s")
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    try:
        for case in cases:
            progress.start(case.key)
            source = results.get(case.backlog_of) if case.backlog_of else None
            try:
                results[case.key] = {"ok": True} | run_case(
                    case, server.address, server.pgid, home, source
                )
            except (CaseError, OSError, ValueError) as exc:
                results[case.key] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            progress.finish(case.key, _summary(results[case.key]))
    finally:
        server.stop()
    return results


def _one_run(
    index: int, plan: Sequence[Case], session: Session, root: Path, progress: Progress
) -> dict[str, Any]:
    run_dir = root / f"run{index}"
    limits = LimitSettings(**session.profile.limits)
    began = dt.datetime.now(dt.UTC)

    def step(name: str, result: Any) -> None:
        if result is None:
            progress.start(f"limit {name}")
        else:
            progress.finish(f"limit {name}", _limit_outcome(result))

    measured = measure_limits(run_dir / "limits", limits, step)
    cases: dict[str, Any] = {}
    for name, group in itertools.groupby(plan, key=lambda c: SYSTEMS[c.system].server):
        cases |= _run_server(name, list(group), run_dir, progress)
    if not session.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return {
        "index": index,
        "started": began.isoformat(timespec="seconds"),
        "limits": measured,
        "cases": cases,
    }


def _components(root: Path, progress: Progress) -> dict[str, Any]:
    def step(name: str, result: Any) -> None:
        if result is None:
            progress.start(f"component {name}")
        else:
            outcome = "done" if result["returncode"] == 0 else f"FAILED {result['tail'][-200:]}"
            progress.finish(f"component {name} ({result['seconds']:.0f} s)", outcome)

    found = run_components(root / "components", step)
    progress.total -= len(COMPONENTS) - len(found)  # scripts absent from this checkout
    return found


def _document(session: Session, plan: Sequence[Case], runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "suite": "rocklet bench",
        "format": 1,
        "profile": session.profile.name,
        "command": session.command,
        "machine": machine_facts(),
        "skipped": session.skipped,
        "plan": [
            {
                "key": c.key,
                "system": c.system,
                "title": SYSTEMS[c.system].title,
                "peer": SYSTEMS[c.system].peer,
                "kind": c.kind,
                "variant": c.variant,
                "label": c.label,
                "size": c.size,
                "processes": c.processes,
            }
            for c in plan
        ],
        "runs": runs,
    }


def run_session(session: Session, progress_stream: Any = None) -> dict[str, Any]:
    """Run every run of the session and write ``results.json`` after each.

    Returns:
        The results document (see ``BENCHMARKS.md`` for its fields).
    """
    for system in session.systems:
        if (why := availability(system)) is not None:
            session.skipped[system] = why
    systems = tuple(s for s in session.systems if s not in session.skipped)
    plan = build_plan(session.profile, systems)
    if session.cases:
        plan = select_cases(plan, session.cases)
    runs_wanted = session.runs or session.profile.runs
    steps = runs_wanted * (len(plan) + len(limit_names()))
    progress = Progress(steps + (len(COMPONENTS) if session.components else 0), progress_stream)
    for system, why in session.skipped.items():
        progress.note(f"skipping {system}: {why}")
    session.out_dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="rocklet-bench-", dir=session.work_dir))
    runs: list[dict[str, Any]] = []
    document = _document(session, plan, runs)
    try:
        with _sigterm_unwinds():
            for index in range(1, runs_wanted + 1):
                progress.note(f"run {index} of {runs_wanted} (data under {root})")
                runs.append(_one_run(index, plan, session, root, progress))
                write_results(session.out_dir / "results.json", document)
            if session.components:
                document["components"] = _components(root, progress)
    finally:
        if not session.keep:
            shutil.rmtree(root, ignore_errors=True)
    document["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    write_results(session.out_dir / "results.json", document)
    return document


def write_results(path: Path, document: Mapping[str, Any]) -> None:
    """Write the results document atomically (a partial file, then a rename)."""
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    partial.replace(path)
