"""The trace dispatcher: trace records out of the send and consume paths, into the trace topic.

RocketMQ 4.9.4's ``AsyncTraceDispatcher``, on the event loop. The hooks of
:mod:`rocklet.client.trace` hand it one *context* at a time (the records of one send,
one consumed batch or one transaction end) with :meth:`TraceDispatcher.append`, which
never blocks and never raises: the context goes into a bounded queue (2048), or is
dropped and counted when the queue is full. A worker task takes up to 100 contexts,
waiting up to 100 ms for a batch to gather, packs their records into trace messages of
at most 128,000 bytes whose KEYS are the traced messages' msgIds and keys (so a query
by key finds them), and sends each through its own *sender*: an internal producer of
group ``_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>`` on a client instance of
its own. A failed trace send is logged and counted, never raised to the application.
:meth:`TraceDispatcher.close` sends what is still queued, bounded by a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Sequence
from typing import Final, Protocol

from rocklet.client.message import Message, SendResult
from rocklet.protocol.trace import NULL_FIELD, TraceRecord, encode_trace_records
from rocklet.transport.logs import get_logger

__all__ = [
    "BATCH_SIZE",
    "FLUSH_TIMEOUT_S",
    "MAX_BODY",
    "POLL_S",
    "QUEUE_SIZE",
    "TraceDispatcher",
    "TraceSender",
]

_log = get_logger(__name__)

#: Contexts waiting to be sent; more are dropped (Java's queue of 2048).
QUEUE_SIZE: Final = 2048
#: Most contexts the worker takes at once (Java's batchSize).
BATCH_SIZE: Final = 100
#: How long the worker lets a batch gather once a context is queued (pollingTimeMil).
POLL_S: Final = 0.1
#: Largest trace message body, bytes (Java's maxMsgSize).
MAX_BODY: Final = 128_000
#: Longest :meth:`TraceDispatcher.close` waits for queued traces to be sent.
FLUSH_TIMEOUT_S: Final = 3.0
#: Trace messages being sent at once (Java's trace executor has at most 20 threads);
#: past that the worker waits, the queue fills, and new contexts are dropped.
MAX_IN_FLIGHT: Final = 20
#: Longest KEYS text of one trace message: properties are limited to 32767 bytes, and
#: a trace message must not be refused for its keys.
_MAX_KEYS_TEXT: Final = 30_000


class TraceSender(Protocol):
    """What sends the trace messages: the dispatcher's own producer."""

    async def start(self) -> None:
        """Join the client instance."""
        ...

    async def close(self) -> None:
        """Leave it."""
        ...

    async def send(self, msg: Message) -> SendResult:
        """Send one message."""
        ...


class TraceDispatcher:
    """Queues trace contexts and sends them, batched, to the trace topic.

    Args:
        sender: Sends the trace messages; started by :meth:`start`, closed by
            :meth:`close`.
        topic: The trace topic.
        queue_size: Most contexts queued; more are dropped.
        batch_size: Most contexts taken at once.
        poll_s: How long a batch may gather.
        max_body: Largest trace message body, bytes.
        flush_timeout_s: Longest :meth:`close` waits for queued traces to go out.

    Attributes:
        topic: The trace topic.
        dropped: Contexts refused because the queue was full (or the dispatcher closed).
        failed: Trace messages that could not be sent.
        sent: Trace messages sent.
    """

    def __init__(
        self,
        sender: TraceSender,
        topic: str,
        *,
        queue_size: int = QUEUE_SIZE,
        batch_size: int = BATCH_SIZE,
        poll_s: float = POLL_S,
        max_body: int = MAX_BODY,
        flush_timeout_s: float = FLUSH_TIMEOUT_S,
    ) -> None:
        self.topic = topic
        self.dropped = 0
        self.failed = 0
        self.sent = 0
        self._sender = sender
        self._sender_running = False
        self._queue: deque[Sequence[TraceRecord]] = deque()
        self._queue_size = queue_size
        self._batch_size = batch_size
        self._poll_s = poll_s
        self._max_body = max_body
        self._flush_timeout_s = flush_timeout_s
        self._closing = False
        self._worker: asyncio.Task[None] | None = None
        # Made by start(), on the loop that runs the worker.
        self._ready: asyncio.Event | None = None  # something is queued, or closing
        self._full: asyncio.Event | None = None  # a whole batch is queued, or closing
        self._slots: asyncio.Semaphore | None = None
        self._in_flight: set[asyncio.Task[None]] = set()

    def append(self, records: Sequence[TraceRecord]) -> bool:
        """Queue one context's records; never blocks, never raises.

        Args:
            records: The records of one send, consumed batch or transaction end.

        Returns:
            Whether it was queued (False: dropped and counted in :attr:`dropped`).
        """
        queue = self._queue
        if self._closing or len(queue) >= self._queue_size:
            self.dropped += 1
            # Logged at 1, 2, 4, 8... drops: a stalled trace topic under load would
            # otherwise log once per message.
            if self.dropped & (self.dropped - 1) == 0:
                _log.warning(
                    "trace queue full; trace dropped", topic=self.topic, dropped=self.dropped
                )
            return False
        queue.append(records)
        if self._ready is not None:
            self._ready.set()
            if len(queue) >= self._batch_size:
                assert self._full is not None
                self._full.set()
        return True

    @property
    def queued(self) -> int:
        """Contexts waiting to be sent."""
        return len(self._queue)

    async def start(self) -> None:
        """Start the sender and the worker; idempotent.

        A sender that cannot start is logged, not raised (tracing must not stop the
        application's producer or consumer); the worker tries it again before sending.
        """
        if self._worker is not None or self._closing:
            return
        self._ready, self._full = asyncio.Event(), asyncio.Event()
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        if self._queue:
            self._ready.set()
        await self._start_sender()
        self._worker = asyncio.get_running_loop().create_task(
            self._run(), name=f"rocklet-trace-{self.topic}"
        )

    async def close(self) -> None:
        """Send what is queued (for at most ``flush_timeout_s``), then stop; idempotent.

        Never raises: traces that could not be sent in time are logged and counted.
        """
        if self._closing:
            return
        self._closing = True
        worker = self._worker
        if worker is not None:
            assert self._ready is not None and self._full is not None
            self._ready.set()
            self._full.set()
            try:
                async with asyncio.timeout(self._flush_timeout_s):
                    await worker  # it sends what is queued, then returns
                    while self._in_flight:
                        await asyncio.gather(*self._in_flight)
            except TimeoutError:
                _log.warning(
                    "trace flush timed out; traces lost",
                    topic=self.topic,
                    queued=len(self._queue),
                    sending=len(self._in_flight),
                )
            except Exception as exc:  # the worker catches its own; this is a bug
                _log.error("trace worker failed", topic=self.topic, error=repr(exc))
            for task in (worker, *self._in_flight):
                task.cancel()
            await asyncio.gather(worker, *self._in_flight, return_exceptions=True)
        self.dropped += len(self._queue)
        self._queue.clear()
        if self._sender_running:
            try:
                await self._sender.close()
            except Exception as exc:
                _log.warning("trace producer did not close cleanly", error=repr(exc))

    # -- the worker ---------------------------------------------------------------------

    async def _run(self) -> None:
        ready, full = self._ready, self._full
        assert ready is not None and full is not None
        queue = self._queue
        while True:
            await ready.wait()
            if not self._closing and len(queue) < self._batch_size:
                # Let a burst gather into fewer trace messages (Java polls for 100 ms).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._poll_s):
                        await full.wait()
            n = min(len(queue), self._batch_size)
            batch = [queue.popleft() for _ in range(n)]
            if not self._closing:
                if not queue:
                    ready.clear()
                if len(queue) < self._batch_size:
                    full.clear()
            if batch:
                await self._ship(batch)
            if self._closing and not queue:
                return

    async def _start_sender(self) -> bool:
        if not self._sender_running:
            try:
                await self._sender.start()
            except Exception as exc:
                _log.warning("trace producer could not start", topic=self.topic, error=repr(exc))
                return False
            self._sender_running = True
        return True

    async def _ship(self, batch: list[Sequence[TraceRecord]]) -> None:
        messages = self._pack(batch)
        if not await self._start_sender():
            self.failed += len(messages)
            return
        slots = self._slots
        assert slots is not None
        for body, keys in messages:
            await slots.acquire()
            task = asyncio.get_running_loop().create_task(self._send(body, keys))
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)

    def _pack(self, batch: list[Sequence[TraceRecord]]) -> list[tuple[bytes, list[str]]]:
        """The contexts' records as trace messages: ``(body, keys)``.

        Bodies stay within ``max_body`` (a single larger context goes alone), keys
        within the properties' limit.
        """
        out: list[tuple[bytes, list[str]]] = []
        parts: list[bytes] = []
        keys: dict[str, None] = {}  # ordered and unique: msgIds first, as they come
        size = keys_size = 0
        for records in batch:
            try:
                data = encode_trace_records(records)
            except ValueError as exc:
                self.dropped += 1
                _log.warning("trace record not encodable; dropped", error=str(exc))
                continue
            new = [k for k in _keys_of(records) if k not in keys]
            new_size = sum(len(k) + 1 for k in new)
            if parts and (
                size + len(data) > self._max_body or keys_size + new_size > _MAX_KEYS_TEXT
            ):
                out.append((b"".join(parts), list(keys)))
                parts, keys, size, keys_size = [], {}, 0, 0
                new = list(dict.fromkeys(_keys_of(records)))
                new_size = sum(len(k) + 1 for k in new)
            parts.append(data)
            size += len(data)
            for key in new:
                if keys_size + len(key) + 1 > _MAX_KEYS_TEXT:
                    break  # one context with more keys than fit: its msgIds came first
                keys[key] = None
                keys_size += len(key) + 1
        if parts:
            out.append((b"".join(parts), list(keys)))
        return out

    async def _send(self, body: bytes, keys: list[str]) -> None:
        try:
            await self._sender.send(Message(self.topic, body, keys=tuple(keys)))
            self.sent += 1
        except Exception as exc:
            self.failed += 1
            _log.warning(
                "trace message not sent", topic=self.topic, bytes=len(body), error=repr(exc)
            )
        finally:
            assert self._slots is not None
            self._slots.release()


def _keys_of(records: Sequence[TraceRecord]) -> list[str]:
    """What a query by key finds the records by: msgIds and keys (Java's transKey)."""
    found: list[str] = []
    for record in records:
        found.append(record.msg_id)
        if record.keys and record.keys != NULL_FIELD:
            found.extend(record.keys.split())
    return [k for k in found if k]
