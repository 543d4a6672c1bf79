"""A worker process: one client, one workload, one JSON line on stdout.

Usage (the suite runs it; by hand for debugging)::

    python -m rocklet.benchsuite.worker '{"client": "redis", "address": {...},
        "channel": "bench-1024", "op": "produce", "create": true, "args": {...}}'

Each case runs in its own interpreter on uvloop so that its CPU is its own (the suite
reads it from the child's rusage), a crashing client cannot take the suite down, and
each system's client library is only imported where it is used.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
import traceback
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from rocklet.benchsuite import workloads
from rocklet.benchsuite.measure import CpuWindow, own_cpu_seconds
from rocklet.benchsuite.peers.base import BenchClient
from rocklet.transport.loop import run as run_loop

__all__ = ["CLIENTS", "main", "run_job"]

#: Client name -> "module:factory"; the factory takes the server's address mapping.
CLIENTS: Final[dict[str, str]] = {
    "rocklet": "rocklet.benchsuite.peers.rocklet:SdkClient",
    "redis": "rocklet.benchsuite.peers.redis_streams:RedisClient",
    "rabbitmq": "rocklet.benchsuite.peers.rabbitmq_clients:ClassicQueueClient",
    "rabbitmq-stream": "rocklet.benchsuite.peers.rabbitmq_clients:StreamClient",
    "nats": "rocklet.benchsuite.peers.nats:JetStreamClient",
}

_OPS: Final[dict[str, Callable[..., Awaitable[dict[str, Any]]]]] = {
    "produce": workloads.produce,
    "consume": workloads.consume,
    "e2e": workloads.end_to_end,
}


def make_client(name: str, address: Mapping[str, Any], options: Mapping[str, Any]) -> BenchClient:
    """Instantiate the named client for a server address.

    Raises:
        KeyError: Unknown client name.
    """
    module, factory = CLIENTS[name].split(":")
    cls = getattr(importlib.import_module(module), factory)
    client: BenchClient = cls(address, **options)
    return client


async def run_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """Open the client, run the job's workload, close the client.

    Args:
        job: ``client``, ``address``, ``channel``, ``op``, ``create``, ``args`` (the
            workload's keyword arguments), optional ``client_options`` and the
            ``server_pgid`` whose CPU the window accounts.

    Returns:
        The workload's result, with the CPU of its measured window (``window_cpu``).
    """
    client = make_client(job["client"], job["address"], job.get("client_options", {}))
    # The client is this process; the window is the workload's measured part only.
    meter = CpuWindow(job.get("server_pgid"), client=own_cpu_seconds, harness=None)
    await client.open(job["channel"], create=bool(job.get("create")))
    try:
        result = await _OPS[job["op"]](client, meter=meter, **job.get("args", {}))
    finally:
        await client.close()
    return result | {"window_cpu": meter.as_dict()}


def main(argv: list[str] | None = None) -> int:
    """Run the job given as the first argument; print its result as one JSON line."""
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.ERROR)  # the clients' own chatter stays out
    job = json.loads(args[0])
    try:
        result = {"ok": True, **run_loop(run_job(job))}
    except Exception as exc:
        result = {
            "ok": False,
            "error": f"{type(exc).__name__}: {exc}",
            "trace": traceback.format_exc(limit=6)[-2000:],
        }
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
