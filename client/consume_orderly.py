"""The orderly consume service (RocketMQ's ``ConsumeMessageOrderlyService``).

One drain task per queue at a time, so a queue's messages reach the listener strictly in offset
order. Batches are taken into the ProcessQueue's consuming twin; SUCCESS commits
them; SUSPEND (or an exception) puts them back and retries after ``suspend_ms``.
A message that failed ``max_reconsume_times`` times goes to the dead-letter queue
(send-back with delay level -1) so the queue can move on.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Final, Protocol

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.consume_service import DLQ_DELAY_LEVEL, Consumed, SendBack
from rocklet.client.errors import BrokerError, NoRouteError, TransportError
from rocklet.client.listeners import ListenerTable
from rocklet.client.message import MessageExt
from rocklet.client.offset_store import OffsetStore
from rocklet.client.process_queue import ProcessQueue
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.transport.logs import get_logger

__all__ = ["LockSource", "OrderlyConsumeService"]

_log = get_logger(__name__)

#: How long an orderly drain waits before retrying a lock someone else holds (Java's 3 s).
_RELOCK_DELAY_S: Final = 3.0


class LockSource(Protocol):
    """How an orderly drain re-acquires a broker lock it lost."""

    async def lock(self, mq: MessageQueue) -> bool:
        """Lock ``mq`` on its broker; whether this client holds it now."""
        ...


class OrderlyConsumeService:
    """Consume each queue strictly in order, one drain task per queue.

    Args:
        listeners: The listeners.
        offset_store: Receives the commit offsets.
        send_back: Sends messages past ``max_reconsume_times`` to the DLQ.
        locks: Re-locks a queue whose lock lapsed (``None`` for broadcasting).
        on_consumed: Told after each batch (flow control resumes pulls).
        report_error: Receives unexpected failures of the service itself.
        batch_size: Most messages per listener call.
        max_reconsume_times: Local retries before a message goes to the DLQ.
        suspend_ms: Pause after SUSPEND before retrying the batch.
    """

    def __init__(
        self,
        listeners: ListenerTable,
        offset_store: OffsetStore,
        send_back: SendBack,
        *,
        locks: LockSource | None,
        on_consumed: Consumed,
        report_error: Callable[[BaseException, str], None],
        batch_size: int,
        max_reconsume_times: int,
        suspend_ms: int,
    ) -> None:
        self._listeners = listeners
        self._offsets = offset_store
        self._send_back = send_back
        self._locks = locks
        self._on_consumed = on_consumed
        self._report_error = report_error
        self._batch_size = batch_size
        self._max_reconsume = max_reconsume_times
        self._suspend_s = suspend_ms / 1000
        self._draining: dict[MessageQueue, asyncio.Task[None]] = {}

    def start(self) -> None:
        """Nothing to start: drain tasks are created as messages arrive."""

    async def close(self) -> None:
        """Cancel the drain tasks (a batch in the listener is consumed again later)."""
        tasks = list(self._draining.values())
        self._draining.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def submit(self, mq: MessageQueue, pq: ProcessQueue[MessageExt], dispatch: bool) -> None:
        """Start draining ``mq`` if :meth:`ProcessQueue.put` asked for it.

        Args:
            mq: The queue.
            pq: Its ProcessQueue.
            dispatch: What ``put`` returned.
        """
        if dispatch and mq not in self._draining:
            task = asyncio.get_running_loop().create_task(
                self._drain(mq, pq), name=f"rocklet-orderly-{mq.topic}-{mq.queue_id}"
            )
            self._draining[mq] = task

    async def _drain(self, mq: MessageQueue, pq: ProcessQueue[MessageExt]) -> None:
        try:
            while await self._step(mq, pq):
                pass
        except Exception as exc:
            self._report_error(exc, f"consuming {mq} in order")
        finally:
            if self._draining.get(mq) is asyncio.current_task():
                del self._draining[mq]
            pq.consuming = False

    async def _step(self, mq: MessageQueue, pq: ProcessQueue[MessageExt]) -> bool:
        if pq.dropped:
            return False
        if self._locks is not None and (not pq.locked or pq.is_lock_expired()):
            if not await self._locks.lock(mq):
                await asyncio.sleep(_RELOCK_DELAY_S)
            return True
        batch = pq.take(self._batch_size)
        if not batch:
            # take() cleared ``consuming``; leave at once (no await) so a put right now
            # starts a new drain instead of finding this one still registered.
            if self._draining.get(mq) is asyncio.current_task():
                del self._draining[mq]
            return False
        async with pq.consume_lock:
            if pq.dropped:
                return False  # not committed: the next owner consumes the batch again
            result = await self._listeners.call(batch)
            retry = [] if result is ConsumeResult.SUCCESS else await self._failed(batch)
            if not retry:
                # Still under consume_lock, so a rebalance that is dropping the queue
                # waits for this commit and hands the next owner the right offset.
                offset = pq.commit()
                if offset >= 0:
                    self._offsets.update(mq, offset, increase_only=False)
        self._on_consumed(mq)
        if retry:
            pq.make_consume_again(retry)
            await asyncio.sleep(self._suspend_s)
        return True

    async def _failed(self, batch: list[MessageExt]) -> list[MessageExt]:
        # checkReconsumeTimes: past the limit a message goes to the DLQ so the queue
        # can move on; the rest are counted and tried again in place.
        retry: list[MessageExt] = []
        for msg in batch:
            if msg.reconsume_times >= self._max_reconsume:
                try:
                    await self._send_back(msg, DLQ_DELAY_LEVEL)
                    continue
                except (TransportError, BrokerError, NoRouteError) as exc:
                    _log.warning("could not move a message to the DLQ", error=str(exc))
            retry.append(dataclasses.replace(msg, reconsume_times=msg.reconsume_times + 1))
        return retry
