"""The C++ client cases: the official client (PyPI ``rocketmq``) against either system.

The client runs in the suite's C++ driver (:func:`rocklet.benchsuite.cases.cpp_argv`),
a child process, time-capped at the run's length: ``cpp-producer`` sends 1 KiB bodies
with ``send_sync`` from N threads sharing one producer; ``cpp-pull`` reads a backlog
(written first by the release's BatchProducer, like the Java consumer cases) with the
wheel's PullConsumer, 32 per pull, queue after queue.

The C++ client does not create topics, so the run's topic is created on the system
first through the admin API (UPDATE_AND_CREATE_TOPIC, the same request on both), with
:data:`QUEUES` queues: as many as the topic the Java benchmark Producer makes on first
use (its default of 4).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any, Final, NamedTuple

from rocklet.benchsuite.cases import cpp_argv, parse_cpp_output, run_children
from rocklet.benchsuite.measure import children_cpu_seconds
from rocklet.benchsuite.topics import create_routed_topic
from rocklet.benchsuite.vsrmq.results import Case
from rocklet.client.admin import Admin

__all__ = ["QUEUES", "CppResult", "cpp_job", "create_topic", "run_cpp"]

QUEUES: Final = 4
BODY_BYTES: Final = 1024
#: Beyond the run's length: the interpreter's start, the client's, and its shutdown.
_SLACK_S: Final = 90.0
_ROUTE_TIMEOUT_S: Final = 30.0


class CppResult(NamedTuple):
    """One driver run.

    Attributes:
        result: The driver's summary (messages, seconds, rate, errors).
        client_cpu_s: The driver process's CPU, start to exit.
        wall_s: Start to exit.
    """

    result: dict[str, Any]
    client_cpu_s: float
    wall_s: float


async def create_topic(admin: Admin, topic: str) -> None:
    """Create ``topic`` with :data:`QUEUES` queues on the system's broker, routed.

    Raises:
        TimeoutError: No broker to create it on, or no route, within the time allowed.
    """
    await create_routed_topic(admin, topic, QUEUES, _ROUTE_TIMEOUT_S)


def cpp_job(case: Case, topic: str, seconds: float) -> dict[str, Any]:
    """The C++ driver's command for ``case`` on ``topic``, capped at ``seconds``."""
    tag = uuid.uuid4().hex[:8]
    if case.tool == "cpp-producer":
        return {
            "op": "load", "topic": topic, "threads": case.threads, "body_size": BODY_BYTES,
            "seconds": seconds, "group": f"VsRmqCppP{case.threads}_{tag}",
        }  # fmt: skip
    return {
        "op": "pull", "topic": topic, "max_num": 32, "seconds": seconds,
        "group": f"VsRmqCppPull_{tag}",
    }  # fmt: skip


def _run_blocking(job: dict[str, Any], namesrv: str, home: Path) -> CppResult:
    home.mkdir(parents=True, exist_ok=True)
    cpu, began = children_cpu_seconds(), time.monotonic()
    (output,) = run_children([cpp_argv(job, namesrv)], home, float(job["seconds"]) + _SLACK_S)
    wall, client = time.monotonic() - began, children_cpu_seconds() - cpu
    return CppResult(parse_cpp_output(output), client, wall)


async def run_cpp(job: dict[str, Any], namesrv: str, home: Path) -> CppResult:
    """Run the driver for ``job`` (in a thread: the event loop stays free) and measure it.

    The client's CPU is this process's reaped children's over the call: the driver is
    the only child that ends meanwhile (the servers run on; the Java tools have ended).

    Raises:
        CaseError: The driver failed, printed nothing, or overran its time.
    """
    return await asyncio.to_thread(_run_blocking, job, namesrv, home)
