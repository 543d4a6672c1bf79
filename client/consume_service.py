"""Consume services: hand pulled messages to the listener, concurrently or in order.

* :class:`ConcurrentConsumeService` (``ConsumeMessageConcurrentlyService``): a fixed
  number of worker tasks take batches of up to ``consume_batch_size`` messages from
  one queue and call the listener; any queue, any order. A successful batch is removed
  from its ProcessQueue and the offset ``remove`` returns (the lowest message still
  cached) becomes the in-memory commit offset. A failed batch (RECONSUME_LATER or an
  exception) is sent back to the broker with CONSUMER_SEND_MSG_BACK, delay level 0
  (the broker picks 3 + reconsume times, and the dead-letter queue once the group's
  max reconsume times is reached); a message whose send-back fails stays cached and
  is consumed again locally 5 s later (Java re-sends it itself; C++ drops it).
  Broadcasting consumers never send back: a failed message is dropped, as RocketMQ
  does.
* :class:`OrderlyConsumeService` (``ConsumeMessageOrderlyService``): one drain task
  per queue at a time, so a queue's messages reach the listener strictly in offset
  order. Batches are taken into the ProcessQueue's consuming twin; SUCCESS commits
  them; SUSPEND (or an exception) puts them back and retries after ``suspend_ms``.
  A message that failed ``max_reconsume_times`` times goes to the dead-letter queue
  (send-back with delay level -1) so the queue can move on.

Listeners, and how they are called, live in :mod:`rocklet.client.listeners`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final, Protocol, TypeAlias

from rocklet.client.brokers import BrokerInvoker
from rocklet.client.consume_result import ConsumeResult
from rocklet.client.errors import (
    BrokerError,
    ClientError,
    NoRouteError,
    TransportError,
    error_for_code,
)
from rocklet.client.listeners import ListenerTable, split_batches
from rocklet.client.message import MessageExt
from rocklet.client.offset_store import OffsetStore
from rocklet.client.process_queue import ProcessQueue
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader
from rocklet.transport.logs import get_logger

__all__ = [
    "ConcurrentConsumeService",
    "OrderlyConsumeService",
    "SendBack",
    "make_send_back",
]

_log = get_logger(__name__)

#: Sends one message back to the broker at a delay level; raises on failure.
SendBack: TypeAlias = Callable[[MessageExt, int], Awaitable[None]]
#: Called after a queue's messages were consumed (flow control may resume pulling).
Consumed: TypeAlias = Callable[[MessageQueue], None]

#: Java's delay before consuming locally again a message whose send-back failed.
RECONSUME_LATER_S: Final = 5.0
#: Delay level meaning "straight to the dead-letter queue" in CONSUMER_SEND_MSG_BACK.
DLQ_DELAY_LEVEL: Final = -1
#: Delay level the broker turns into 3 + reconsume times.
BROKER_DELAY_LEVEL: Final = 0
#: How long an orderly drain waits before retrying a lock someone else holds (Java's 3 s).
_RELOCK_DELAY_S: Final = 3.0


def make_send_back(invoker: BrokerInvoker, group: str, max_reconsume_times: int) -> SendBack:
    """Build the CONSUMER_SEND_MSG_BACK sender of a consumer group.

    The request goes to the master of the broker the message came from, or to its
    store host when no route names that broker (what the C++ client always uses).

    Args:
        invoker: Sends requests.
        group: The consumer group.
        max_reconsume_times: Sent as ``maxReconsumeTimes`` (the broker then decides
            when the message goes to the dead-letter queue).

    Returns:
        ``async send_back(msg, delay_level)``, raising ``BrokerError`` or
        ``TransportError`` on failure.
    """

    async def send_back(msg: MessageExt, delay_level: int) -> None:
        addr = invoker.routes.master_addr(msg.broker_name) or msg.store_addr
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=group,
            delay_level=delay_level,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.topic,
            max_reconsume_times=max_reconsume_times,
        )
        cmd = RemotingCommand(RequestCode.CONSUMER_SEND_MSG_BACK, ext_fields=header.to_ext_fields())
        answer = await invoker.invoke(addr, cmd)
        if answer.code != ResponseCode.SUCCESS:
            raise error_for_code(answer.code, answer.remark, addr=addr)

    return send_back


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
                    await self._send_back(msg, 3)
                except (TransportError, BrokerError, NoRouteError) as exc:
                    _log.warning("could not send back an expired message", mq=mq, error=str(exc))
                    break
                offset = pq.remove_if_head(msg)
                if offset >= 0 and not pq.dropped:
                    self._offsets.update(mq, offset)


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
