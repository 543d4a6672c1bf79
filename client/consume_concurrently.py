"""The concurrent consume service (RocketMQ's ``ConsumeMessageConcurrentlyService``).

A fixed number of worker tasks take batches of up to ``consume_batch_size`` messages from
one queue and call the listener; any queue, any order. A successful batch is removed
from its ProcessQueue and the offset ``remove`` returns (the lowest message still
cached) becomes the in-memory commit offset. A failed batch (RECONSUME_LATER or an
exception) is sent back to the broker with CONSUMER_SEND_MSG_BACK, delay level 0
(the broker picks 3 + reconsume times, and the dead-letter queue once the group's
max reconsume times is reached); a message whose send-back fails stays cached and
is consumed again locally 5 s later (Java re-sends it itself; C++ drops it).
Broadcasting consumers never send back: a failed message is dropped, as RocketMQ
does.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeAlias

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.consume_service import BROKER_DELAY_LEVEL, Consumed, SendBack
from rocklet.client.errors import BrokerError, ClientError, NoRouteError, TransportError
from rocklet.client.listeners import ListenerTable, split_batches
from rocklet.client.message import MessageExt
from rocklet.client.offset_store import OffsetStore
from rocklet.client.process_queue import ProcessQueue
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.transport.logs import get_logger

__all__ = ["RECONSUME_LATER_S", "ConcurrentConsumeService"]

_log = get_logger(__name__)

#: Java's delay before consuming locally again a message whose send-back failed.
RECONSUME_LATER_S: Final = 5.0
#: Delay level of a message stuck in the listener past the consume timeout (Java's 3).
_EXPIRED_DELAY_LEVEL: Final = 3

_Request: TypeAlias = tuple[MessageQueue, ProcessQueue[MessageExt], list[MessageExt]]


class ConcurrentConsumeService:
    """Consume batches from any queue on ``concurrency`` workers.

    Args:
        listeners: The listeners.
        offset_store: Receives the commit offsets.
        send_back: Sends failed messages back (clustering).
        on_consumed: Told after each batch (flow control resumes pulls).
        report_error: Receives unexpected failures of the service itself.
        batch_size: Most messages per listener call.
        concurrency: Batches in the listener at once.
        broadcasting: Drop failed messages instead of sending them back.
    """

    def __init__(
        self,
        listeners: ListenerTable,
        offset_store: OffsetStore,
        send_back: SendBack,
        *,
        on_consumed: Consumed,
        report_error: Callable[[BaseException, str], None],
        batch_size: int,
        concurrency: int,
        broadcasting: bool,
    ) -> None:
        self._listeners = listeners
        self._offsets = offset_store
        self._send_back = send_back
        self._on_consumed = on_consumed
        self._report_error = report_error
        self._batch_size = batch_size
        self._concurrency = concurrency
        self._broadcasting = broadcasting
        self._queue: asyncio.Queue[_Request] = asyncio.Queue()
        self._workers: list[asyncio.Task[None]] = []
        self._later: set[asyncio.TimerHandle] = set()

    def start(self) -> None:
        """Start the workers."""
        loop = asyncio.get_running_loop()
        self._workers = [
            loop.create_task(self._work(), name=f"rocklet-consume-{i}")
            for i in range(self._concurrency)
        ]

    async def close(self) -> None:
        """Stop the workers; batches not consumed yet are redelivered after a restart."""
        for handle in self._later:
            handle.cancel()
        self._later.clear()
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []

    def submit(
        self, mq: MessageQueue, pq: ProcessQueue[MessageExt], msgs: Sequence[MessageExt]
    ) -> None:
        """Queue freshly pulled (and cached) messages for the listener.

        Args:
            mq: Their queue.
            pq: Its ProcessQueue (they are already in it).
            msgs: The messages, in offset order.
        """
        put = self._queue.put_nowait
        if len(msgs) <= self._batch_size and (
            not msgs or msgs[0].topic == msgs[-1].topic == msgs[len(msgs) // 2].topic
        ):
            put((mq, pq, list(msgs)))  # the common case: one pull is one dispatch
            return
        for batch in split_batches(msgs, self._batch_size):
            put((mq, pq, batch))

    async def _work(self) -> None:
        get = self._queue.get
        while True:
            mq, pq, batch = await get()
            if pq.dropped:
                continue  # the queue moved on; its next owner consumes these
            try:
                await self._consume(mq, pq, batch)
            except Exception as exc:
                self._report_error(exc, f"consuming {mq}")

    async def _consume(
        self, mq: MessageQueue, pq: ProcessQueue[MessageExt], batch: list[MessageExt]
    ) -> None:
        pq.mark_consume_start(batch)
        result = await self._listeners.call(batch)
        if pq.dropped:
            return  # Java skips the result too: the new owner redelivers
        failed: list[MessageExt] = []
        if result is not ConsumeResult.SUCCESS:
            failed = await self._handle_failure(batch)
        done = batch if not failed else [m for m in batch if m not in failed]
        offset = pq.remove(done)
        if failed:
            self._consume_later(mq, pq, failed)
        if offset >= 0 and not pq.dropped:
            self._offsets.update(mq, offset)
        self._on_consumed(mq)

    async def _handle_failure(self, batch: list[MessageExt]) -> list[MessageExt]:
        if self._broadcasting:
            # RocketMQ drops failed broadcast messages: there is no per-consumer retry topic.
            _log.warning("broadcast messages failed and are dropped", count=len(batch))
            return []
        results = await asyncio.gather(
            *(self._send_back(msg, BROKER_DELAY_LEVEL) for msg in batch), return_exceptions=True
        )
        failed = []
        for msg, res in zip(batch, results, strict=True):
            if isinstance(res, ClientError):
                _log.warning("send-back failed; consuming again later", error=str(res))
                failed.append(msg)
            elif isinstance(res, BaseException):
                raise res
        return failed

    def _consume_later(
        self, mq: MessageQueue, pq: ProcessQueue[MessageExt], msgs: list[MessageExt]
    ) -> None:
        again = [dataclasses.replace(m, reconsume_times=m.reconsume_times + 1) for m in msgs]
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._later.discard(handle)
            if not pq.dropped:
                self.submit(mq, pq, again)

        handle = loop.call_later(RECONSUME_LATER_S, fire)
        self._later.add(handle)

    async def clean_expired(
        self, queues: Mapping[MessageQueue, ProcessQueue[MessageExt]], consume_timeout_ms: int
    ) -> None:
        """Send back messages stuck in the listener past the consume timeout.

        ``cleanExpireMsg``: each expired head goes back to the broker with delay
        level 3 and is then removed, so one hung listener call cannot hold the
        queue's commit offset forever. Broadcasting consumers skip this.

        Args:
            queues: The owned queues.
            consume_timeout_ms: How long a batch may stay in the listener.
        """
        if self._broadcasting:
            return
        for mq, pq in list(queues.items()):
            for msg in pq.expired_heads(consume_timeout_ms):
                try:
                    await self._send_back(msg, _EXPIRED_DELAY_LEVEL)
                except (TransportError, BrokerError, NoRouteError) as exc:
                    _log.warning("could not send back an expired message", mq=mq, error=str(exc))
                    break
                offset = pq.remove_if_head(msg)
                if offset >= 0 and not pq.dropped:
                    self._offsets.update(mq, offset)
