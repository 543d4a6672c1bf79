"""Rocklet under test: its broker (one process, loopback) and its own asyncio SDK.

The broker runs with ``flushDiskType`` ASYNC_FLUSH for the throughput table, as the
peers run with background flushing (see BENCHMARKS.md); a second instance with
SYNC_FLUSH is measured separately. Pulls may return up to 1024 messages or 4 MiB (the
peers' consumers take 1000 per fetch; RocketMQ's defaults, 32 and 256 KiB, are broker
settings a deployment raises the same way).

The SDK client sends one message per request (``Producer.send(Message)``) or a batch
(``Producer.send([...])``, SEND_BATCH_MESSAGE); it consumes with a
:class:`~rocklet.client.push_consumer.PushConsumer` (the usual API) or, for the
N-consumers case, a :class:`~rocklet.client.pull_consumer.PullConsumer` reading a fixed set of
queues to their end. Bodies are never compressed (the peers do not compress either).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from rocklet.benchsuite.peers.base import Sink
from rocklet.benchsuite.procs import LOOPBACK, ServerProcess, free_ports

__all__ = ["QUEUES", "RockletServer", "SdkClient"]

#: Queues per benchmark topic.
QUEUES: Final = 8
_NO_COMPRESSION: Final = 1 << 30
_ROUTE_TIMEOUT_S: Final = 15.0


class RockletServer:
    """A Rocklet name server + broker process on loopback.

    Args:
        name: Its name in the results (``rocklet``, ``rocklet-sync``).
        flush: ``ASYNC_FLUSH`` or ``SYNC_FLUSH``.
    """

    def __init__(self, name: str = "rocklet", flush: str = "ASYNC_FLUSH") -> None:
        self.name = name
        self.flush = flush
        self._proc: ServerProcess | None = None
        self._ports: tuple[int, ...] = (0, 0)  # name server, broker

    def start(self, workdir: Path, timeout_s: float) -> None:
        """Write its broker.conf and start it; return once both ports accept."""
        workdir.mkdir(parents=True, exist_ok=True)
        conf = workdir / "broker.conf"
        conf.write_text(
            f"brokerIP1 = {LOOPBACK}\nflushDiskType = {self.flush}\n"
            "maxTransferCountOnMessageInMemory = 1024\n"
            f"maxTransferBytesOnMessageInMemory = {4 * 1024 * 1024}\n",
            encoding="utf-8",
        )
        self._ports = free_ports(2)
        argv = [sys.executable, "-m", "rocklet.benchsuite.peers.rocklet_serve", str(conf)]
        argv += [str(p) for p in self._ports] + [str(workdir / "store")]
        self._proc = ServerProcess(self.name, argv, workdir / "server.log")
        self._proc.require_ports(self._ports, timeout_s)

    def stop(self) -> None:
        """SIGTERM (the broker flushes its store), SIGKILL after 30 s."""
        if self._proc is not None:
            self._proc.stop()
            self._proc = None

    @property
    def pgid(self) -> int | None:
        """The server's process group."""
        return None if self._proc is None else self._proc.pid

    @property
    def address(self) -> Mapping[str, Any]:
        """The name server address, as the SDK and the C++ client take it."""
        return {"namesrv": f"{LOOPBACK}:{self._ports[0]}"}


class SdkClient:
    """Rocklet's SDK as a :class:`~rocklet.benchsuite.peers.base.BenchClient`.

    Args:
        address: ``{"namesrv": "host:port"}``.
        msgpack: Send msgpack request headers (a Rocklet extension) instead of JSON.
    """

    def __init__(self, address: Mapping[str, Any], *, msgpack: bool = False) -> None:
        self._namesrv = str(address["namesrv"])
        self._msgpack = msgpack
        self._topic = ""
        self._producer: Any = None
        self._consumer: Any = None
        self._tasks: list[asyncio.Task[None]] = []

    async def open(self, channel: str, *, create: bool) -> None:
        """Start a producer; with ``create``, create the 8-queue topic and await its route."""
        from rocklet.client.producer import Producer

        self._topic = channel
        if create:
            await _create_topic(self._namesrv, channel)
        self._producer = Producer(
            f"PG_{channel}",
            self._namesrv,
            compress_over=_NO_COMPRESSION,
            msgpack_headers=self._msgpack,
        )
        await self._producer.start()

    async def send(self, bodies: Sequence[bytes], tag: str | None = None) -> None:
        """One SEND_MESSAGE_V2 for one body, else one SEND_BATCH_MESSAGE."""
        from rocklet.client.message import Message

        if len(bodies) == 1:
            await self._producer.send(Message(self._topic, bodies[0], tags=tag))
        else:
            await self._producer.send([Message(self._topic, b, tags=tag) for b in bodies])

    async def start_consumer(
        self,
        sink: Sink,
        *,
        from_start: bool,
        tag: str | None = None,
        consumer: str = "push",
        batch: int = 32,
        queues: Sequence[int] = (),
        **_: Any,
    ) -> None:
        """A push consumer in a new group, or pull tasks reading ``queues`` to their end."""
        if consumer == "pull":
            await self._start_pull(sink, queues or range(QUEUES), batch, tag)
            return
        from rocklet.client.consume_result import ConsumeResult
        from rocklet.client.message import MessageExt
        from rocklet.client.push_consumer import PushConsumer

        async def listener(msgs: list[MessageExt]) -> ConsumeResult:
            sink([m.body for m in msgs])
            return ConsumeResult.SUCCESS

        self._consumer = PushConsumer(
            f"CG_{self._topic}_{time.monotonic_ns()}",
            self._namesrv,
            consume_from="first" if from_start else "last",
            consume_batch_size=batch,
            pull_batch_size=batch,
        )
        self._consumer.subscribe(self._topic, tag or "*", listener)
        await self._consumer.start()

    async def _start_pull(
        self, sink: Sink, queues: Sequence[int], batch: int, tag: str | None
    ) -> None:
        from rocklet.client.pull_consumer import PullConsumer
        from rocklet.protocol.bodies.queue import MessageQueue

        self._consumer = PullConsumer(f"CG_{self._topic}_{time.monotonic_ns()}", self._namesrv)
        await self._consumer.start()
        brokers = {mq.broker_name for mq in await self._consumer.fetch_queues(self._topic)}
        mqs = [MessageQueue(self._topic, b, q) for b in sorted(brokers) for q in queues]
        ends = await asyncio.gather(*(self._consumer.max_offset(mq) for mq in mqs))
        pullers = [
            self._pull_queue(mq, end, batch, tag, sink) for mq, end in zip(mqs, ends, strict=False)
        ]

        async def all_queues() -> None:
            await asyncio.gather(*pullers)
            sink(())  # every assigned queue read to its end: the backlog is drained

        self._tasks.append(asyncio.create_task(all_queues(), name="pull-queues"))

    async def _pull_queue(self, mq: Any, end: int, batch: int, tag: str | None, sink: Sink) -> None:
        from rocklet.client.pull_api import PullStatus

        offset = 0
        while offset < end:
            result = await self._consumer.pull(mq, offset, batch, expression=tag or "*")
            if result.status is PullStatus.FOUND:
                sink([m.body for m in result.messages])
            elif result.status is not PullStatus.NO_MATCHED_MSG:
                return  # nothing more to read (or an offset problem): stop this queue
            offset = result.next_begin_offset

    async def close(self) -> None:
        """Stop the consumer tasks, the consumer and the producer."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._consumer is not None:
            await self._consumer.shutdown()
        if self._producer is not None:
            await self._producer.close()


async def _create_topic(namesrv: str, topic: str) -> None:
    """Create ``topic`` with :data:`QUEUES` queues and wait until the name server routes it."""
    from rocklet.benchsuite.topics import create_routed_topic
    from rocklet.client.admin import Admin

    async with Admin(namesrv) as admin:
        await create_routed_topic(admin, topic, QUEUES, _ROUTE_TIMEOUT_S)
