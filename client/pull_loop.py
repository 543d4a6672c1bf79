"""The push consumer's pull loop: one task per owned queue, long polling, flow control.

``DefaultMQPushConsumerImpl.pullMessage`` with its ``PullCallback``, as one coroutine
per queue instead of callbacks on a shared executor. Each turn:

1. **Flow control.** While the queue's ProcessQueue caches more than
   ``max_cached_messages`` messages or ``max_cached_bytes`` bytes, or (concurrent
   consumption only) spans more than ``max_span`` offsets, the loop does not pull. It
   waits until the consume service reports progress on this queue (or 50 ms, Java's
   ``PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL``, whichever comes first).
2. **Orderly consumers** pull only while they hold the queue's broker lock.
3. **Pull** with long polling: the broker holds the request up to ``suspend_ms`` when
   there is nothing new, so a caught-up queue costs one request per 15 s, not a busy
   loop; the request timeout is the hold plus 15 s. The in-memory offset rides along
   as a commit (FLAG_COMMIT_OFFSET), as Java does.
4. **Found** messages go into the ProcessQueue and to the consume service; the next
   pull starts at ``nextBeginOffset``. Nothing new: pull again from
   ``nextBeginOffset`` (and if nothing is cached, make that the commit offset, as
   ``correctTagsOffset`` does). An illegal offset: jump to ``nextBeginOffset`` and
   make it the commit offset.

A failed pull (broker down, error answer) waits 3 s (``PULL_TIME_DELAY_MILLS_WHEN_
EXCEPTION``) and tries again; the loop ends when the ProcessQueue is dropped.

**Which broker.** Each queue is pulled from the broker id the last answer suggested
(``suggestWhichBrokerId``, 0 at first), or the group's lowest id when the route lacks
it, as Java's ``pullFromWhichNodeTable`` and ``findBrokerAddressInSubscribe`` do, so a
consumer reads from the slave once the name server has dropped the master. Beyond
RocketMQ, which waits for the next 30 s route refresh: a pull that cannot reach its
broker (connect refused, connection dropped) refreshes the topic's route at once and,
when the group has another address, pulls there right away, passing over the failed
address for :data:`FAILED_ADDR_AVOID_S`. While it reads from another broker than the
one suggested, the loop refreshes the route every :data:`FALLBACK_ROUTE_REFRESH_S`, so
it goes back to the master soon after the master registers again. Commits do not ride
on pulls to a slave (Java clears the flag; a slave ignores it anyway).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from rocklet.client.brokers import PullBrokers
from rocklet.client.errors import BrokerError, NoRouteError, TransportError
from rocklet.client.message import MessageExt
from rocklet.client.offset_store import OffsetStore
from rocklet.client.process_queue import ProcessQueue
from rocklet.client.pull_api import PullStatus, pull_request, read_pull_response
from rocklet.protocol.bodies.heartbeat import SubscriptionData
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.route import MASTER_ID
from rocklet.protocol.filter import parse_tag_expression
from rocklet.protocol.sql92 import is_tag_type
from rocklet.transport.logs import get_logger

__all__ = ["FlowLimits", "PullLoop", "PullLoopDeps"]

_log = get_logger(__name__)

#: Wait between flow-control checks when no progress is reported.
FLOW_CONTROL_WAIT_S: Final = 0.05
#: Wait after a failed pull.
PULL_ERROR_WAIT_S: Final = 3.0
#: Wait while an orderly queue is not locked, or its broker has no address.
NOT_READY_WAIT_S: Final = 1.0
#: Added to the long-poll hold to get the pull's request timeout.
PULL_TIMEOUT_MARGIN_S: Final = 15.0
#: How long an address a pull could not reach is passed over when the group has another.
FAILED_ADDR_AVOID_S: Final = 5.0
#: Route refresh period while a queue is read from another broker than suggested.
FALLBACK_ROUTE_REFRESH_S: Final = 5.0


@dataclass(frozen=True, slots=True)
class FlowLimits:
    """Per-queue thresholds above which pulling pauses (RocketMQ's defaults).

    Attributes:
        max_cached_messages: ``pullThresholdForQueue``. Default: 1000.
        max_cached_bytes: ``pullThresholdSizeForQueue``. Default: 100 MiB.
        max_span: ``consumeConcurrentlyMaxSpan`` (concurrent only). Default: 2000.
    """

    max_cached_messages: int = 1000
    max_cached_bytes: int = 100 * 1024 * 1024
    max_span: int = 2000


@dataclass(frozen=True, slots=True)
class PullLoopDeps:
    """The collaborators every pull loop of one consumer shares.

    Attributes:
        group: The consumer group.
        instance: Sends the pulls.
        offset_store: Supplies the piggy-backed commit offset.
        subscriptions: Topic -> subscription (read on each pull, so a re-subscribe
            takes effect at once).
        retry_topic: The group's retry topic (messages there get their original topic
            back), or ``None``.
        submit: Hands cached messages to the consume service:
            ``(mq, pq, msgs, dispatch)``.
        report_error: Receives unexpected failures.
        limits: Flow-control thresholds.
        orderly: Orderly consumption (pull only while locked; no span limit).
        commit_with_pull: Piggy-back the commit offset on pulls (clustering).
        batch_size: ``maxMsgNums`` per pull.
        suspend_ms: Long-poll hold.
    """

    group: str
    instance: PullBrokers
    offset_store: OffsetStore
    subscriptions: Mapping[str, SubscriptionData]
    retry_topic: str | None
    submit: Callable[[MessageQueue, ProcessQueue[MessageExt], list[MessageExt], bool], None]
    report_error: Callable[[BaseException, str], None]
    limits: FlowLimits
    orderly: bool
    commit_with_pull: bool
    batch_size: int
    suspend_ms: int


class PullLoop:
    """Pulls one queue until its ProcessQueue is dropped.

    Args:
        deps: Shared collaborators.
        mq: The queue.
        pq: Its ProcessQueue.
        next_offset: The first offset to pull.
    """

    def __init__(
        self, deps: PullLoopDeps, mq: MessageQueue, pq: ProcessQueue[MessageExt], next_offset: int
    ) -> None:
        self._deps = deps
        self.mq = mq
        self.pq = pq
        self.next_offset = next_offset
        self._progress = asyncio.Event()
        #: The task running :meth:`run`, set by whoever starts it.
        self.task: asyncio.Task[Any] | None = None
        self._tags_cache: tuple[tuple[str, str], frozenset[str] | None] = (("TAG", "*"), None)
        #: The broker id the last answer suggested (Java's pullFromWhichNodeTable).
        self.broker_id = MASTER_ID
        #: An address a pull could not reach, and until when it is passed over.
        self._avoid: str | None = None
        self._avoid_until = 0.0
        self._next_fallback_refresh = 0.0

    def wake(self) -> None:
        """Report consume progress: a flow-controlled loop checks again at once."""
        self._progress.set()

    async def run(self) -> None:
        """Pull until the queue is dropped; unexpected failures are reported, then retried."""
        while not self.pq.dropped:
            try:
                await self._turn()
            except (TransportError, BrokerError, NoRouteError) as exc:
                _log.warning("pull failed; retrying", mq=self.mq, error=str(exc))
                await asyncio.sleep(PULL_ERROR_WAIT_S)
            except Exception as exc:
                self._deps.report_error(exc, f"pulling {self.mq}")
                await asyncio.sleep(PULL_ERROR_WAIT_S)

    def _flow_controlled(self) -> bool:
        pq, limits = self.pq, self._deps.limits
        if pq.count > limits.max_cached_messages or pq.size > limits.max_cached_bytes:
            return True
        return not self._deps.orderly and pq.max_span() > limits.max_span

    async def _wait_progress(self, timeout_s: float) -> None:
        self._progress.clear()
        try:
            async with asyncio.timeout(timeout_s):
                await self._progress.wait()
        except TimeoutError:
            pass

    async def _turn(self) -> None:
        deps, mq, pq = self._deps, self.mq, self.pq
        pq.touch_pull()  # Java stamps every attempt, so a paused queue is not "stuck"
        if self._flow_controlled():
            await self._wait_progress(FLOW_CONTROL_WAIT_S)
            return
        sub = deps.subscriptions.get(mq.topic)
        picked = await self._pick()
        if (deps.orderly and not pq.locked) or sub is None or picked is None:
            await self._wait_progress(NOT_READY_WAIT_S)
            return
        addr, broker_id = picked
        to_master = broker_id == MASTER_ID
        commit = deps.offset_store.read_memory(mq) if deps.commit_with_pull and to_master else None
        cmd = pull_request(
            deps.group,
            mq,
            self.next_offset,
            deps.batch_size,
            subscription=sub.sub_string,
            commit_offset=commit,
            suspend_ms=deps.suspend_ms,
            sub_version=sub.sub_version,
            expression_type=sub.expression_type,
        )
        timeout_s = deps.suspend_ms / 1000 + PULL_TIMEOUT_MARGIN_S
        try:
            answer = await deps.instance.invoke(addr, cmd, timeout_s)
        except TransportError:
            if await self._fail_over(addr):
                return  # pull again at once, from the other address
            raise
        result = read_pull_response(
            answer, mq.broker_name, tags=self._tags(sub), retry_topic=deps.retry_topic, addr=addr
        )
        self.broker_id = result.suggest_which_broker_id
        if pq.dropped:
            return
        requested = self.next_offset
        self._apply(result.status, result.next_begin_offset, result.max_offset, result.messages)
        if result.messages and result.next_begin_offset >= result.max_offset:
            # Caught up: the next pull will wait at the broker for new messages, so
            # first let the consume workers hand these to the listener; building the
            # pull first put it on every delivery's path. With a backlog the pull
            # goes first, to keep the next batch coming.
            await asyncio.sleep(0)
        if result.status is PullStatus.NO_MATCHED_MSG and result.next_begin_offset == requested:
            # A slave that does not have this offset (yet) keeps it rather than moving
            # it; Java pulls again at once, in a busy loop. Wait a little instead.
            await self._wait_progress(NOT_READY_WAIT_S)

    async def _pick(self) -> tuple[str, int] | None:
        routes, loop = self._deps.instance.routes, asyncio.get_running_loop()
        if self._avoid is not None and loop.time() >= self._avoid_until:
            self._avoid = None
        picked = routes.subscribe_addr(self.mq.broker_name, self.broker_id, self._avoid)
        # Not where the broker said (its master is gone or was unreachable): look for
        # it in a fresh route now and then, to go back as soon as it returns.
        if (
            picked is not None
            and picked[1] != self.broker_id
            and loop.time() >= self._next_fallback_refresh
        ):
            self._next_fallback_refresh = loop.time() + FALLBACK_ROUTE_REFRESH_S
            await self._refresh_route()
            picked = routes.subscribe_addr(self.mq.broker_name, self.broker_id, self._avoid)
        return picked

    async def _fail_over(self, addr: str) -> bool:
        """After ``addr`` could not be reached: whether the group has another address."""
        self._avoid = addr
        self._avoid_until = asyncio.get_running_loop().time() + FAILED_ADDR_AVOID_S
        await self._refresh_route()
        other = self._deps.instance.routes.subscribe_addr(self.mq.broker_name, self.broker_id, addr)
        if other is None or other[0] == addr:
            return False
        _log.warning("pull broker unreachable; switching", mq=self.mq, failed=addr, to=other[0])
        return True

    async def _refresh_route(self) -> None:
        try:
            await self._deps.instance.routes.topic_route(self.mq.topic, refresh=True)
        except (TransportError, BrokerError) as exc:
            _log.warning("route refresh failed", topic=self.mq.topic, error=str(exc))

    def _apply(
        self, status: PullStatus, next_begin: int, broker_max: int, msgs: list[MessageExt]
    ) -> None:
        deps, mq, pq = self._deps, self.mq, self.pq
        if status is PullStatus.FOUND:
            self.next_offset = next_begin
            if msgs:
                dispatch = pq.put(msgs, broker_max)
                deps.submit(mq, pq, msgs, dispatch)
            elif pq.count == 0:
                deps.offset_store.update(mq, next_begin)
        elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            self.next_offset = next_begin
            if pq.count == 0:
                deps.offset_store.update(mq, next_begin)
        else:  # OFFSET_ILLEGAL: the queue was truncated or reset under us
            _log.warning(
                "pull offset illegal; jumping", mq=mq, offset=self.next_offset, to=next_begin
            )
            self.next_offset = next_begin
            deps.offset_store.update(mq, next_begin, increase_only=False)

    def _tags(self, sub: SubscriptionData) -> frozenset[str] | None:
        key = (sub.expression_type, sub.sub_string)
        cached, tags = self._tags_cache
        if cached != key:
            # An SQL92 selector is the broker's to apply: nothing to re-check here.
            tags = parse_tag_expression(sub.sub_string) if is_tag_type(key[0]) else None
            self._tags_cache = (key, tags)
        return tags
