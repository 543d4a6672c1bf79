"""The SDK case: Rocklet's own client, end to end, against either broker.

``sdke2e`` runs the suite's end-to-end workload (:func:`rocklet.benchsuite.workloads.
end_to_end`, the ``rocklet/e2e/e2e/1024`` case of ``rocklet bench``) with the broker
swapped: a push consumer subscribed first, then a producer paced at
:data:`E2E_RATE` messages/s of 1 KiB, the messages due on each ~1 ms tick sent as one
batch, latency from the send time stamped in each body to its arrival in the listener.
The client and its pacing are the same code on both sides, so the difference between
the two runs of a pair is the broker's: how soon it stores a batch, wakes the held pull
and answers it.

It runs in a worker process of the suite, so its CPU is its own; the broker's CPU is
taken over the worker's measured window.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final

from rocklet.benchsuite.cases import run_children, worker_argv, worker_result
from rocklet.benchsuite.measure import HiccupMeter

__all__ = ["E2E_RATE", "E2E_WARMUP_S", "run_sdk_e2e", "sdk_e2e_job"]

#: Messages per second (the rate of the suite's end-to-end case and of the latency goal).
E2E_RATE: Final = 5000
#: Left out of the percentiles at the start of the run.
E2E_WARMUP_S: Final = 1.0
#: Beyond the run's length: the interpreter's start, routes, the probe, the drain.
_SLACK_S: Final = 90.0


def sdk_e2e_job(namesrv: str, topic: str, seconds: float, broker_pid: int) -> dict[str, Any]:
    """The worker's job: the end-to-end workload on a new ``topic`` for ``seconds``.

    Args:
        namesrv: The system's name server, ``host:port``.
        topic: Created by the worker (8 queues) before it starts.
        seconds: Measured seconds, after the warm-up.
        broker_pid: The broker process, whose CPU the worker's window accounts
            (servers are started in process groups of their own).

    Returns:
        The job, as :mod:`rocklet.benchsuite.worker` takes it.
    """
    return {
        "client": "rocklet",
        "address": {"namesrv": namesrv},
        "channel": topic,
        "op": "e2e",
        "create": True,
        "server_pgid": broker_pid,
        "args": {
            "size": 1024, "rate": E2E_RATE, "seconds": seconds, "warmup_s": E2E_WARMUP_S,
            "per_message": False, "consumer": "push", "batch": 256,
        },
    }  # fmt: skip


async def run_sdk_e2e(job: dict[str, Any], home: Path) -> dict[str, Any]:
    """Run the job in a worker (in a thread: the event loop stays free).

    Returns:
        The workload's result: ``messages``, ``rate``, ``latency_ms``, ``window_cpu``,
        and the machine's stalls meanwhile (``hiccups``, a
        :meth:`~rocklet.benchsuite.measure.HiccupMeter.summary`).

    Raises:
        CaseError: The worker failed, printed nothing, or overran its time.
    """
    return await asyncio.to_thread(_run_blocking, job, home)


def _run_blocking(job: dict[str, Any], home: Path) -> dict[str, Any]:
    home.mkdir(parents=True, exist_ok=True)
    timeout_s = float(job["args"]["seconds"]) + E2E_WARMUP_S + _SLACK_S
    with HiccupMeter() as hiccups:
        (output,) = run_children([worker_argv(job)], home, timeout_s)
    result = worker_result(output)
    return result | {"hiccups": hiccups.summary(result.get("began"), result.get("ended"))}
