"""What every system under test provides: a server the suite runs, a client a worker drives.

A *server* (:class:`Server`) runs in the suite's process tree: started on loopback in a
temporary directory, within a bounded time, and stopped by PID. It describes how to
reach it with a JSON-able ``address`` mapping, which is handed to worker processes.

A *client* (:class:`BenchClient`) runs inside a worker process on uvloop and speaks to
one *channel* (a topic, a stream, a queue) through the system's usual Python client.
The workloads (:mod:`rocklet.benchsuite.workloads`) only use these few operations, so
every system is measured by the same code.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

__all__ = ["BenchClient", "Server", "Sink", "Unsupported", "client_library", "finish_reader"]

#: Receives each delivered batch of message bodies (in the consumer's event loop). An
#: empty batch means "the backlog this consumer was given is read to its end" (only
#: clients that know where it ends send it).
Sink = Callable[[Sequence[bytes]], None]


class Unsupported(RuntimeError):
    """The system (or its usual client) has no such feature (for instance tags)."""


def client_library(name: str) -> Any:
    """Import a peer's Python client (the ``bench`` extra), typed loosely.

    The peers' libraries are optional dependencies: importing them by name keeps the
    project's type checking independent of whether they are installed.

    Raises:
        Unsupported: The library is not installed.
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise Unsupported(f"{name} is not installed (pip install '.[bench]')") from exc


async def finish_reader(task: asyncio.Task[None] | None, timeout_s: float = 5.0) -> None:
    """Wait for a read loop that was told to stop, then surface its failure, if any.

    The loops stop on a flag they check between (short) blocking reads rather than by
    cancellation: redis-py and nats-py were seen to swallow a cancellation arriving in
    the middle of a read, so cancelling and awaiting hung. A loop still running after
    ``timeout_s`` is cancelled and left behind (the worker exits right after).
    """
    if task is None:
        return
    await asyncio.wait({task}, timeout=timeout_s)
    if not task.done():
        task.cancel()
        return
    if not task.cancelled() and (error := task.exception()) is not None:
        raise error


class Server(Protocol):
    """A server process tree the suite owns."""

    name: str

    def start(self, workdir: Path, timeout_s: float) -> None:
        """Start on loopback with its data under ``workdir``; return once it serves.

        Raises:
            PeerStartError: It did not come up in ``timeout_s`` (it is stopped).
        """

    def stop(self) -> None:
        """Stop it by PID within a bounded time (SIGKILL as the last resort)."""

    @property
    def pgid(self) -> int | None:
        """The process group whose CPU counts as the server's (None once stopped)."""

    @property
    def address(self) -> Mapping[str, Any]:
        """How a client reaches it (JSON-able: host, ports, name server...)."""


class BenchClient(Protocol):
    """One system's usual client, bound to one channel, in a worker's event loop."""

    async def open(self, channel: str, *, create: bool) -> None:
        """Connect; with ``create``, (re)create the channel empty first."""

    async def send(self, bodies: Sequence[bytes], tag: str | None = None) -> None:
        """Send the bodies as one request and await every acknowledgement.

        "One request" is the client's closest unit: a batch, a pipeline, a window.

        Raises:
            Unsupported: ``tag`` was given and the system has no tags.
        """

    async def start_consumer(
        self, sink: Sink, *, from_start: bool, tag: str | None = None, **options: Any
    ) -> None:
        """Begin delivering bodies to ``sink`` in the background.

        Args:
            sink: Called with each batch of bodies received.
            from_start: From the channel's first message (a backlog), or only what
                is sent from now on (live latency).
            tag: Only messages with this tag (where the system has tags).
            **options: System-specific consumer settings from the case.
        """

    async def close(self) -> None:
        """Stop the consumer, if any, and disconnect."""
