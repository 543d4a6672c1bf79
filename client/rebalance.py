"""Rebalance: which queues this consumer owns, and what happens when that changes.

RocketMQ's ``RebalanceImpl`` / ``RebalancePushImpl``, one round per call of
:meth:`Rebalancer.rebalance` (every 20 s and whenever the broker sends
NOTIFY_CONSUMER_IDS_CHANGED). For each subscribed topic (for clustering consumers
that includes ``%RETRY%<group>``, where the broker puts messages sent back for
another try):

1. The topic's readable queues come from the cached route; a clustering consumer
   asks a broker for the group's consumer ids (GET_CONSUMER_LIST_BY_GROUP) and runs
   the allocation strategy, a broadcasting one takes every queue.
2. Queues no longer ours are dropped: the ProcessQueue is marked dropped (its pull
   loop and consume tasks stop), its offset committed and forgotten, and for orderly
   consumers the broker lock released, but only once the batch in the listener
   finished, so the next owner cannot start while we still consume (Java waits on
   ``lockConsume`` for up to 1 s and retries the drop next round otherwise).
3. New queues get a ProcessQueue and a start offset: the committed offset, else
   ``consume_from`` (last: GET_MAX_OFFSET, except retry topics which start at 0;
   first: 0; a timestamp: SEARCH_OFFSET_BY_TIMESTAMP), and the consumer is told to
   start pulling. Orderly consumers first lock the queue on its broker (LOCK_BATCH_MQ)
   and skip it this round when someone else holds it.

Transient failures (a broker down, an error answer) skip the topic or queue for this
round with a warning; the next round tries again. A subscribed topic that does not
exist is warned about once (until it appears), naming the topic and what to do; the
consumer keeps asking and starts consuming it once it is created. Event loop only.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from typing import Final, Literal, Protocol, TypeAlias

from rocklet.client.allocate import AllocateStrategy
from rocklet.client.brokers import MasterLookup
from rocklet.client.errors import BrokerError, NoRouteError, TransportError, error_for_code
from rocklet.client.message import MessageExt
from rocklet.client.offset_store import OffsetStore
from rocklet.client.process_queue import ProcessQueue
from rocklet.client.pull_api import max_offset, search_offset
from rocklet.client.queue_locks import QueueLocks
from rocklet.client.selector import MessageSelector, as_selector
from rocklet.protocol.bodies.consumer import (
    ConsumerListBody,
)
from rocklet.protocol.bodies.heartbeat import SubscriptionData
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.route import BrokerData, TopicRouteData
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.filter import parse_tag_expression, tag_codes
from rocklet.protocol.headers.consumer import GetConsumerListByGroupRequestHeader
from rocklet.protocol.names import is_retry_topic, retry_topic
from rocklet.transport.clock import Clock
from rocklet.transport.logs import get_logger

__all__ = [
    "ConsumeFrom",
    "QueueAdded",
    "QueueRemoved",
    "RebalanceInstance",
    "RebalanceRoutes",
    "Rebalancer",
    "retry_topic",
    "subscription",
]

_log = get_logger(__name__)

#: Prefix of a group's retry topic (``MixAll.RETRY_GROUP_TOPIC_PREFIX``).
#: How long dropping an orderly queue waits for the batch in the listener (Java's 1 s).
_DROP_WAIT_S: Final = 1.0

#: Where a group with no committed offset starts: ``"last"``, ``"first"``, or a store
#: timestamp in epoch milliseconds.
ConsumeFrom: TypeAlias = Literal["last", "first"] | int
#: Called when a queue becomes ours: ``(mq, process_queue, next_offset)``.
QueueAdded: TypeAlias = Callable[[MessageQueue, ProcessQueue[MessageExt], int], None]
#: Called when a queue stops being ours (its ProcessQueue is already marked dropped).
QueueRemoved: TypeAlias = Callable[[MessageQueue, ProcessQueue[MessageExt]], None]


def _any_addr(bd: BrokerData) -> str | None:
    """The group's master, else its lowest-id slave."""
    return bd.broker_addrs[min(bd.broker_addrs)] if bd.broker_addrs else None


def subscription(
    topic: str, expression: str | MessageSelector, version_ms: int
) -> SubscriptionData:
    """The subscription of ``topic`` to ``expression``.

    Args:
        topic: The topic.
        expression: ``"*"``, tags joined by ``||``, or a :class:`MessageSelector`.
        version_ms: The subscription's version, wall-clock ms when it was made (a
            broker keeps the subscription with the highest version).
    """
    selector = as_selector(expression)
    if not selector.is_tag:
        return SubscriptionData(
            topic=topic,
            sub_string=selector.expression,
            sub_version=version_ms,
            expression_type=selector.expression_type,
        )
    expression = selector.expression
    tags = parse_tag_expression(expression)
    codes = tag_codes(tags)
    return SubscriptionData(
        topic=topic,
        sub_string=expression.strip() or "*",
        tags_set=tuple(sorted(tags)) if tags else (),
        code_set=tuple(sorted(codes)) if codes else (),
        sub_version=version_ms,
    )


class RebalanceRoutes(MasterLookup, Protocol):
    """The route look-ups a rebalance uses (:class:`~rocklet.client.routes.RouteCache`)."""

    async def topic_route(self, topic: str, *, refresh: bool = False) -> TopicRouteData | None:
        """A topic's route (cached)."""
        ...

    async def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """A topic's readable queues."""
        ...


class RebalanceInstance(Protocol):
    """The slice of :class:`~rocklet.client.instance.ClientInstance` a rebalance uses."""

    @property
    def client_id(self) -> str:
        """This client's id in the group."""
        ...

    @property
    def routes(self) -> RebalanceRoutes:
        """The cached routes."""
        ...

    @property
    def clock(self) -> Clock:
        """The time source of the ProcessQueues."""
        ...

    async def invoke(
        self, addr: str, cmd: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Send a request to ``addr`` and return the answer."""
        ...


class Rebalancer:
    """Keeps a consumer's ProcessQueue table in line with its share of the queues.

    Args:
        group: The consumer group.
        instance: The client instance.
        offset_store: Where offsets are read from and committed to.
        on_added: Called for each queue that becomes ours (start pulling it).
        on_removed: Called for each queue that stops being ours (stop pulling it).
        strategy: The allocation strategy (clustering only).
        broadcasting: Take every queue instead of a share.
        orderly: Lock queues on their broker before consuming them.
        consume_from: Start of a queue with no committed offset.
        drop_stuck_queues: Rebuild queues whose pulls stalled for 2 minutes (push
            consumers; ``isPullExpired``).
    """

    def __init__(
        self,
        group: str,
        instance: RebalanceInstance,
        offset_store: OffsetStore,
        *,
        on_added: QueueAdded,
        on_removed: QueueRemoved | None = None,
        strategy: AllocateStrategy,
        broadcasting: bool = False,
        orderly: bool = False,
        consume_from: ConsumeFrom = "last",
        drop_stuck_queues: bool = True,
    ) -> None:
        self._group = group
        self._instance = instance
        self._offsets = offset_store
        self._on_added = on_added
        self._on_removed = on_removed
        self._strategy = strategy
        self._broadcasting = broadcasting
        self._locking = orderly and not broadcasting
        self._consume_from = consume_from
        self._drop_stuck = drop_stuck_queues
        #: Topic -> subscription, as the consumer subscribed (retry topic included).
        self.subscriptions: dict[str, SubscriptionData] = {}
        #: Every queue this consumer owns right now.
        self.process_queues: dict[MessageQueue, ProcessQueue[MessageExt]] = {}
        #: Broker locks of the owned queues (orderly consumers).
        self.locks = QueueLocks(group, instance, self.process_queues)
        # One round at a time: a round triggered by the broker must not interleave
        # with the timer's and add a queue twice.
        self._round = asyncio.Lock()
        # Subscribed topics found missing and warned about (again once they return).
        self._missing: set[str] = set()

    # -- one round --------------------------------------------------------------------

    async def rebalance(self) -> bool:
        """Run one rebalance round over every subscribed topic.

        Returns:
            Whether any queue was added or dropped.
        """
        async with self._round:
            return await self._rebalance_all()

    async def _rebalance_all(self) -> bool:
        changed = False
        for topic in list(self.subscriptions):
            try:
                changed |= await self._rebalance_topic(topic)
            except (TransportError, BrokerError, NoRouteError) as exc:
                _log.warning(
                    "rebalance skipped a topic", group=self._group, topic=topic, error=str(exc)
                )
        for mq, pq in list(self.process_queues.items()):
            if mq.topic not in self.subscriptions:  # unsubscribed since the last round
                changed |= await self._drop(mq, pq)
        return changed

    async def _rebalance_topic(self, topic: str) -> bool:
        mqs = await self._instance.routes.subscribe_queues(topic)
        if not mqs:
            # Not routed when last asked (a retry topic appears only after the first
            # heartbeat): ask the name server again rather than wait for the 30 s refresh.
            await self._instance.routes.topic_route(topic, refresh=True)
            mqs = await self._instance.routes.subscribe_queues(topic)
        if not mqs:
            # Still no route: keep what we have, as Java does, rather than drop it all.
            await self._no_queues(topic)
            return False
        self._missing.discard(topic)
        if self._broadcasting:
            return await self._update(topic, set(mqs))
        cids = await self.consumer_ids(topic)
        if not cids:
            return False
        mine = self._strategy(self._group, self._instance.client_id, mqs, cids)
        return await self._update(topic, set(mine))

    async def _no_queues(self, topic: str) -> None:
        # Once per topic, not every round: the first hour's typo or missing topic must
        # be visible at the default WARNING level without flooding the log. Retry
        # topics are left out: the broker creates them with the group's first
        # heartbeat, so their absence right after start is normal.
        if topic in self._missing or is_retry_topic(topic):
            _log.debug("no queues to rebalance", group=self._group, topic=topic)
            return
        self._missing.add(topic)
        if await self._instance.routes.topic_route(topic) is None:
            _log.warning(
                "subscribed topic does not exist",
                group=self._group,
                topic=topic,
                hint=f"create it (rocklet admin updateTopic -c <cluster> -t {topic}) or "
                "check the topic name; consuming starts once it exists",
            )
        else:
            _log.warning(
                "subscribed topic has no readable queue",
                group=self._group,
                topic=topic,
                hint="make it readable (perm 4 or 6); consuming starts once it is",
            )

    async def consumer_ids(self, topic: str) -> list[str]:
        """Ask a broker of ``topic`` for the group's consumer ids.

        Args:
            topic: A subscribed topic (its brokers know the group's members).

        Returns:
            The ids, possibly empty.

        Raises:
            BrokerError: The broker refused (e.g. no consumer registered yet).
            TransportError: The broker could not be reached.
        """
        route = await self._instance.routes.topic_route(topic)
        if route is None:
            return []
        # Java's findBrokerAddrByTopic: a random group, its master or else any slave
        # (consumers heartbeat slaves too, so a slave knows the group's members).
        addrs = [a for bd in route.broker_datas if (a := _any_addr(bd)) is not None]
        if not addrs:
            return []
        addr = random.choice(addrs)
        header = GetConsumerListByGroupRequestHeader(self._group)
        cmd = RemotingCommand(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP, ext_fields=header.to_ext_fields()
        )
        answer = await self._instance.invoke(addr, cmd)
        if answer.code != ResponseCode.SUCCESS:
            raise error_for_code(answer.code, answer.remark, addr=addr)
        return list(ConsumerListBody.from_json(answer.body).consumer_id_list)

    async def _update(self, topic: str, allocated: set[MessageQueue]) -> bool:
        changed = False
        for mq, pq in list(self.process_queues.items()):
            if mq.topic != topic:
                continue
            if mq not in allocated:
                changed |= await self._drop(mq, pq)
            elif self._drop_stuck and pq.is_pull_expired():
                # Java logs this as a bug: a pull loop stopped without being dropped.
                _log.error("rebuilding a queue whose pulls stalled", group=self._group, mq=mq)
                changed |= await self._drop(mq, pq)
        for mq in sorted(allocated):
            if mq not in self.process_queues:
                changed |= await self._add(mq)
        return changed

    async def _add(self, mq: MessageQueue) -> bool:
        if self._locking and not await self.locks.lock(mq):
            _log.info("queue locked by another consumer; later", group=self._group, mq=mq)
            return False
        self._offsets.remove(mq)  # a stale in-memory offset must not win over the broker's
        try:
            offset = await self.compute_start_offset(mq)
        except (TransportError, BrokerError, NoRouteError) as exc:
            _log.warning("no start offset; later", group=self._group, mq=mq, error=str(exc))
            return False
        pq: ProcessQueue[MessageExt] = ProcessQueue(clock=self._instance.clock)
        if self._locking:
            pq.set_locked(True)
        self.process_queues[mq] = pq
        _log.info("queue assigned", group=self._group, mq=mq, offset=offset)
        self._on_added(mq, pq, offset)
        return True

    async def _drop(self, mq: MessageQueue, pq: ProcessQueue[MessageExt]) -> bool:
        pq.dropped = True
        if self._locking:
            try:
                await asyncio.wait_for(pq.consume_lock.acquire(), _DROP_WAIT_S)
            except TimeoutError:
                pq.try_unlock_times += 1
                return False  # still consuming: keep it (dropped) and try next round
            try:
                await self._commit_and_forget([mq])
                await self.locks.unlock([mq])
            finally:
                pq.consume_lock.release()
        else:
            await self._commit_and_forget([mq])
        if self.process_queues.get(mq) is pq:
            del self.process_queues[mq]
        if self._on_removed is not None:
            self._on_removed(mq, pq)
        _log.info("queue released", group=self._group, mq=mq)
        return True

    async def _commit_and_forget(self, mqs: Sequence[MessageQueue]) -> None:
        try:
            await self._offsets.persist(mqs)
        except (TransportError, BrokerError, NoRouteError) as exc:
            _log.warning("offset commit failed on release", group=self._group, error=str(exc))
        for mq in mqs:
            self._offsets.remove(mq)

    # -- offsets ----------------------------------------------------------------------

    async def compute_start_offset(self, mq: MessageQueue) -> int:
        """Where consumption of a newly assigned queue starts.

        ``computePullFromWhereWithException``: the stored offset when there is one,
        else according to ``consume_from``.

        Args:
            mq: The queue.

        Returns:
            The first offset to pull.

        Raises:
            BrokerError: A broker refused a query.
            NoRouteError: The queue's broker has no known address.
            TransportError: A broker could not be reached.
        """
        stored = await self._offsets.read_store(mq)
        if stored is not None and stored >= 0:
            return stored
        is_retry = is_retry_topic(mq.topic)
        if self._consume_from == "first":
            return 0
        if self._consume_from == "last":
            # Retry topics hold only messages sent back for us: start at their beginning.
            return 0 if is_retry else await max_offset(self._instance, self._addr(mq), mq)
        if is_retry:
            return await max_offset(self._instance, self._addr(mq), mq)
        return await search_offset(self._instance, self._addr(mq), mq, self._consume_from)

    def _addr(self, mq: MessageQueue) -> str:
        addr = self._instance.routes.admin_addr(mq.broker_name)
        if addr is None:
            raise NoRouteError(mq.topic, f"no address known for broker {mq.broker_name}")
        return addr

    async def reset(self, offsets: dict[MessageQueue, int]) -> None:
        """Jump owned queues to new offsets (RESET_CONSUMER_CLIENT_OFFSET).

        Each affected queue is dropped without committing its old offset, the new
        offset is committed, and a rebalance round re-adds the queue from there.

        Args:
            offsets: Queue to new offset.
        """
        async with self._round:
            for mq in offsets:
                pq = self.process_queues.pop(mq, None)
                if pq is not None:
                    pq.dropped = True
                    pq.clear()
            for mq, offset in offsets.items():
                self._offsets.update(mq, offset, increase_only=False)
            try:
                await self._offsets.persist(offsets)
            except (TransportError, BrokerError, NoRouteError) as exc:
                _log.warning("offset reset commit failed", group=self._group, error=str(exc))
            await self._rebalance_all()

    async def release_all(self) -> None:
        """Drop every queue at shutdown: commit offsets, then unlock (orderly)."""
        async with self._round:
            mqs = list(self.process_queues)
            for pq in self.process_queues.values():
                pq.dropped = True
            try:
                await self._offsets.persist(mqs)
            except (TransportError, BrokerError, NoRouteError) as exc:
                _log.warning("offset commit failed at shutdown", group=self._group, error=str(exc))
            if self._locking:
                await self.locks.unlock(mqs)
            self.process_queues.clear()
