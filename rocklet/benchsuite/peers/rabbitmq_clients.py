"""RabbitMQ's usual Python clients: aio-pika for a classic queue, rstream for a stream.

* :class:`ClassicQueueClient`: a durable classic queue, persistent messages, publisher
  confirms with a sliding window (every body of a request is published at once and
  the request ends when all are confirmed); consuming with prefetch 1000 and a
  multiple-ack every 100 deliveries (see BENCHMARKS.md).
* :class:`StreamClient`: a stream over the native stream protocol (``rstream``): one
  ``send_batch`` per request, awaiting its confirms; a subscriber from the first
  offset or the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from rocklet.benchsuite.peers.base import Sink, Unsupported, client_library

__all__ = ["ClassicQueueClient", "StreamClient"]

_PREFETCH: Final = 1000
_ACK_EVERY: Final = 100
_USER: Final = "guest"


class ClassicQueueClient:
    """aio-pika on a durable classic queue with publisher confirms."""

    def __init__(self, address: Mapping[str, Any]) -> None:
        self._url = f"amqp://{_USER}:{_USER}@{address['host']}:{address['amqp']}/"
        self._connection: Any = None
        self._channel: Any = None
        self._queue: Any = None
        self._tag: str | None = None

    async def open(self, channel: str, *, create: bool) -> None:
        """Connect; with ``create``, replace the queue by an empty durable one."""
        aio_pika = client_library("aio_pika")
        self._connection = await aio_pika.connect(self._url)
        self._channel = await self._connection.channel(publisher_confirms=True)
        if create:
            await self._channel.queue_delete(channel)
        self._queue = await self._channel.declare_queue(channel, durable=True)

    async def send(self, bodies: Sequence[bytes], tag: str | None = None) -> None:
        """Publish every body (persistent) at once; wait for all the confirms."""
        aio_pika = client_library("aio_pika")
        if tag is not None:
            raise Unsupported("AMQP queues have no tags")
        exchange = self._channel.default_exchange
        persistent = aio_pika.DeliveryMode.PERSISTENT
        await asyncio.gather(
            *(
                exchange.publish(
                    aio_pika.Message(body, delivery_mode=persistent),
                    routing_key=self._queue.name,
                )
                for body in bodies
            )
        )

    async def start_consumer(
        self, sink: Sink, *, from_start: bool, tag: str | None = None, **_: Any
    ) -> None:
        """Consume with prefetch 1000, acknowledging every 100th delivery (multiple)."""
        if tag is not None:
            raise Unsupported("AMQP queues have no tags")
        # A queue has no "start": the backlog is whatever it holds, and the live case
        # uses a new, empty queue, so both modes consume the same way.
        await self._channel.set_qos(prefetch_count=_PREFETCH)
        unacked = 0

        async def on_message(message: Any) -> None:
            nonlocal unacked
            sink((message.body,))
            unacked += 1
            if unacked >= _ACK_EVERY:
                unacked = 0
                await message.ack(multiple=True)

        self._tag = await self._queue.consume(on_message)

    async def close(self) -> None:
        """Cancel the consumer; disconnect."""
        if self._tag is not None:
            with contextlib.suppress(Exception):
                await self._queue.cancel(self._tag)
        if self._connection is not None:
            await self._connection.close()


class StreamClient:
    """rstream (native stream protocol) on one stream."""

    def __init__(self, address: Mapping[str, Any]) -> None:
        self._host = str(address["host"])
        self._port = int(address["stream"])
        self._stream = ""
        self._producer: Any = None
        self._consumer: Any = None
        self._runner: asyncio.Task[None] | None = None

    async def open(self, channel: str, *, create: bool) -> None:
        """Connect a producer; with ``create``, replace the stream by an empty one."""
        rstream = client_library("rstream")
        self._stream = channel
        self._producer = rstream.Producer(self._host, self._port, username=_USER, password=_USER)
        await self._producer.start()
        if create:
            await self._producer.delete_stream(channel, missing_ok=True)
        await self._producer.create_stream(channel, exists_ok=True)

    async def send(self, bodies: Sequence[bytes], tag: str | None = None) -> None:
        """One ``send_batch``; returns when the broker confirmed all of it."""
        if tag is not None:
            raise Unsupported("streams have no tags")
        confirmed = asyncio.get_running_loop().create_future()
        left = len(bodies)

        async def on_confirm(status: Any) -> None:
            nonlocal left
            left -= 1
            if not status.is_confirmed and not confirmed.done():
                confirmed.set_exception(RuntimeError(f"not confirmed: {status}"))
            elif left == 0 and not confirmed.done():
                confirmed.set_result(None)

        await self._producer.send_batch(self._stream, list(bodies), on_publish_confirm=on_confirm)
        await confirmed

    async def start_consumer(
        self, sink: Sink, *, from_start: bool, tag: str | None = None, **_: Any
    ) -> None:
        """Subscribe from the stream's first offset, or from the next message."""
        rstream = client_library("rstream")
        if tag is not None:
            raise Unsupported("streams have no tags")
        self._consumer = rstream.Consumer(self._host, self._port, username=_USER, password=_USER)
        await self._consumer.start()
        offset = rstream.OffsetType.FIRST if from_start else rstream.OffsetType.NEXT

        async def on_message(body: Any, _context: Any) -> None:
            sink((body,))

        await self._consumer.subscribe(
            self._stream,
            on_message,
            offset_specification=rstream.ConsumerOffsetSpecification(offset, None),
        )

    async def close(self) -> None:
        """Close the consumer and the producer."""
        if self._consumer is not None:
            await self._consumer.close()
        if self._producer is not None:
            await self._producer.close()
