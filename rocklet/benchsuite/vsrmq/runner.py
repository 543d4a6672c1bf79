"""The order of the runs: every case, in pairs, the two systems alternating (ABBA).

Only one system is up at a time: each run starts its system fresh (new ports, new
store), runs the case and stops it. Pair 1 runs Rocklet first, pair 2 RocketMQ first,
and so on, so a drift in the machine's load does not always favour the same side.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rocklet.benchsuite.vsrmq.measure import RunSpec, measure_run
from rocklet.benchsuite.vsrmq.release import RocketMqRelease
from rocklet.benchsuite.vsrmq.results import Case, Run
from rocklet.benchsuite.vsrmq.servers import RunningSystem, start_rocketmq, start_rocklet

__all__ = ["Plan", "order", "run_plan"]


@dataclass(frozen=True)
class Plan:
    """A whole comparison.

    Attributes:
        release: The RocketMQ release (checked).
        cases: In the order to run them.
        pairs: Runs of each system per case.
        seconds: Length of each measured run.
        backlog: Messages written before each consumer case (None: each case's
            :meth:`~rocklet.benchsuite.vsrmq.results.Case.backlog_for`).
        work_dir: Parent of the temporary directories (the system's default if None).
        keep: Keep the stores and logs.
        warmup_s: The C++ cases' unmeasured warm-up run, seconds.
    """

    release: RocketMqRelease
    cases: tuple[Case, ...]
    pairs: int
    seconds: float
    backlog: int | None
    work_dir: Path | None = None
    keep: bool = False
    warmup_s: float = 0.0


def order(pair: int) -> tuple[str, str]:
    """Which system runs first in 1-based ``pair``: Rocklet in odd pairs (ABBA...)."""
    return ("rocklet", "rocketmq") if pair % 2 == 1 else ("rocketmq", "rocklet")


def _start(system: str, plan: Plan, work: Path) -> RunningSystem:
    if system == "rocketmq":
        return start_rocketmq(plan.release, work)
    return start_rocklet(work)


def run_plan(
    plan: Plan,
    progress: Callable[[str], None],
    done: Callable[[Run], None] | None = None,
) -> list[Run]:
    """Run every case's pairs; report each step through ``progress``.

    Args:
        plan: What to run.
        progress: Called with a line before each step (the CLI prints it).
        done: Called with each finished run.

    Returns:
        Every run, in the order run.

    Raises:
        PeerStartError: A system did not come up (the runs so far are lost to the caller;
            they were passed to ``done``); likewise BacklogError (a backlog not written
            in time), CaseError (the C++ client's driver failed) and TimeoutError (no
            broker registered to create a C++ case's topic on).
    """
    runs: list[Run] = []
    total = len(plan.cases) * plan.pairs * 2
    for case in plan.cases:
        for pair in range(1, plan.pairs + 1):
            for system in order(pair):
                work = Path(tempfile.mkdtemp(prefix=f"vsrmq-{system}-", dir=plan.work_dir))
                try:
                    step = f"[{len(runs) + 1}/{total}] {case.name} pair {pair}"
                    progress(f"{step}: starting {system}")
                    running = _start(system, plan, work)
                    try:
                        what = "writing the backlog, then " if case.backlog_first else ""
                        driver = f"{plan.seconds:.0f} s of {case.driver}"
                        progress(f"{step}: {system} up; {what}{driver}")
                        backlog = plan.backlog or case.backlog_for(plan.seconds)
                        spec = RunSpec(case, pair, plan.seconds, backlog, work, plan.warmup_s)
                        run = asyncio.run(measure_run(plan.release, running, spec))
                    finally:
                        running.stop()
                finally:
                    if not plan.keep:
                        shutil.rmtree(work, ignore_errors=True)
                runs.append(run)
                if done is not None:
                    done(run)
    return runs


def cases_of(runs: Sequence[Run]) -> list[str]:
    """The case names in ``runs``, in first-seen order."""
    return list(dict.fromkeys(r.case for r in runs))
