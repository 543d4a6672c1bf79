"""Routing: the route cache, queues from a topic route, and latency-fault avoidance.

:func:`publish_queues`, :func:`subscribe_queues` and :class:`LatencyFaultTolerance` are
pure (no I/O, no clock: callers pass monotonic times in). They are the part of
RocketMQ's ``MQClientInstance.topicRouteData2TopicPublishInfo`` /
``topicRouteData2TopicSubscribeInfo`` and ``MQFaultStrategy`` /
``LatencyFaultToleranceImpl`` that decides *where* a message goes.
:class:`RouteCache` keeps the routes fetched from the name server for a client instance.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Final

from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.route import BrokerData, Perm, TopicRouteData
from rocklet.protocol.names import AUTO_CREATE_TOPIC

__all__ = [
    "DEFAULT_TOPIC_QUEUE_NUMS",
    "NEGATIVE_ROUTE_TTL_S",
    "LatencyFaultTolerance",
    "RouteCache",
    "publish_queues",
    "subscribe_queues",
]

#: ``DefaultMQProducer.defaultTopicQueueNums``: queues of an auto-created topic.
DEFAULT_TOPIC_QUEUE_NUMS: Final = 4

#: How long "no route for this topic" is believed before asking the name server again.
NEGATIVE_ROUTE_TTL_S: Final = 2.0

#: ``MQFaultStrategy.latencyMax`` / ``notAvailableDuration`` (ms): a broker whose call
#: took at least ``latency`` ms is avoided for ``duration`` ms.
_LATENCY_STEPS_MS: Final = (
    (15000, 600000),
    (3000, 180000),
    (2000, 120000),
    (1000, 60000),
    (550, 30000),
    (100, 0),
    (50, 0),
)


def publish_queues(
    topic: str, route: TopicRouteData, *, max_queues: int | None = None
) -> list[MessageQueue]:
    """The writable queues of ``topic`` according to ``route``.

    As ``topicRouteData2TopicPublishInfo``: when ``orderTopicConf`` is set
    (``"brokerA:4;brokerB:4"``) it alone decides the queues; otherwise every queue
    datum with WRITE permission whose broker has a registered master contributes
    ``writeQueueNums`` queues. Brokers are taken in name order, so every client builds
    the same list (C++ sorts too).

    Args:
        topic: The topic the queues are named for (differs from the route's topic
            when ``route`` is the TBW102 template).
        route: The route.
        max_queues: Per-broker cap (``min(defaultTopicQueueNums, writeQueueNums)``
            for a topic routed through the template).

    Returns:
        The queues, possibly empty.
    """
    masters = {b.broker_name for b in route.broker_datas if b.master_addr is not None}
    out: list[MessageQueue] = []
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            name, _, nums = item.partition(":")
            if name and nums.strip().isdigit():
                out.extend(MessageQueue(topic, name, i) for i in range(int(nums)))
        return out
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if not qd.perm & Perm.WRITE or qd.broker_name not in masters:
            continue
        count = qd.write_queue_nums if max_queues is None else min(max_queues, qd.write_queue_nums)
        out.extend(MessageQueue(topic, qd.broker_name, i) for i in range(count))
    return out


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """The readable queues of ``topic``: ``readQueueNums`` per READ-permitted queue datum.

    Args:
        topic: The topic.
        route: Its route.

    Returns:
        The queues sorted by broker name and queue id.
    """
    out: list[MessageQueue] = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.perm & Perm.READ:
            out.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
    return out


@dataclass(slots=True)
class _FaultItem:
    latency_ms: float
    available_at: float


class LatencyFaultTolerance:
    """Which brokers to avoid because they were slow or failed recently.

    ``MQFaultStrategy`` with ``sendLatencyFaultEnable``: after each send the producer
    records the broker and how long the call took; a call that failed counts as
    taking 30 s. A latency of at least 550 ms makes the broker unavailable for 30 s,
    and more for slower calls (the table above); below that the broker stays
    available. Selection round-robins over the queues and skips unavailable brokers;
    when every broker is unavailable it picks the least bad one, as Java's
    ``pickOneAtLeast`` does, so a send is always attempted.

    Times are monotonic seconds supplied by the caller.
    """

    __slots__ = ("_items",)

    #: Latency charged for a failed call, ms (``MQFaultStrategy``: isolation => 30 s).
    FAILURE_LATENCY_MS: Final = 30000.0

    def __init__(self) -> None:
        self._items: dict[str, _FaultItem] = {}

    def update(self, broker_name: str, latency_ms: float, now: float, *, failed: bool) -> None:
        """Record one call's outcome.

        Args:
            broker_name: The broker group called.
            latency_ms: How long the call took.
            now: Monotonic time of the outcome, seconds.
            failed: Whether the call failed (charged :attr:`FAILURE_LATENCY_MS`).
        """
        latency = self.FAILURE_LATENCY_MS if failed else latency_ms
        duration_ms = _not_available_ms(latency)
        if duration_ms == 0 and broker_name not in self._items:
            return  # the common case: a fast broker we never had trouble with
        self._items[broker_name] = _FaultItem(latency, now + duration_ms / 1000)

    def is_available(self, broker_name: str, now: float) -> bool:
        """Whether ``broker_name`` may be used at ``now``."""
        item = self._items.get(broker_name)
        return item is None or now >= item.available_at

    def remove(self, broker_name: str) -> None:
        """Forget a broker's record (e.g. after a fast successful call)."""
        self._items.pop(broker_name, None)

    def select(
        self,
        queues: Sequence[MessageQueue],
        start: int,
        now: float,
        avoid: str | None = None,
    ) -> MessageQueue:
        """Pick a queue: the next available one from position ``start``, round-robin.

        Args:
            queues: Candidate queues (non-empty).
            start: Round-robin position (any int; taken modulo ``len(queues)``).
            now: Monotonic time, seconds.
            avoid: A broker to skip if anything else is available (the broker the
                previous attempt of this send failed on).

        Returns:
            The chosen queue.
        """
        n = len(queues)
        items = self._items
        if not items and avoid is None:
            return queues[start % n]
        for i in range(n):
            mq = queues[(start + i) % n]
            name = mq.broker_name
            if name != avoid and self.is_available(name, now):
                return mq
        # Everything is faulty or avoided: take the broker that recovers first, but not
        # the one just failed on when there is another.
        return min(
            (queues[(start + i) % n] for i in range(n)),
            key=lambda mq: (mq.broker_name == avoid, self._available_at(mq.broker_name)),
        )

    def _available_at(self, broker_name: str) -> float:
        item = self._items.get(broker_name)
        return 0.0 if item is None else item.available_at


def _not_available_ms(latency_ms: float) -> int:
    for threshold, duration in _LATENCY_STEPS_MS:
        if latency_ms >= threshold:
            return duration
    return 0


@dataclass(slots=True)
class _RouteEntry:
    route: TopicRouteData | None
    fetched_at: float
    publish: list[MessageQueue] | None = None
    subscribe: list[MessageQueue] | None = None
    #: The TBW102 route ``publish`` was derived from, for a topic with no route.
    template: TopicRouteData | None = None


#: Fetches one topic's route from a name server (``None``: the topic does not exist).
RouteFetcher = Callable[[str], Awaitable[TopicRouteData | None]]
#: Runs a coroutine as an owned task.
Spawner = Callable[[Coroutine[Any, Any, Any], str], "asyncio.Task[Any]"]


class RouteCache:
    """Cached topic routes, the broker table derived from them, and queue lists.

    Concurrent lookups of one topic share one fetch; "topic does not exist" is
    believed for :data:`NEGATIVE_ROUTE_TTL_S`, so a send loop to a topic not created
    yet does not ask the name server on every send; derived queue lists are computed
    once per route version. The broker table is rebuilt from all cached routes on
    every change, so a broker that left every route is forgotten (Java's
    ``cleanOfflineBroker``).

    Args:
        fetch: Asks the name server for a route.
        spawn: Runs a fetch as a task owned by the caller.
    """

    def __init__(self, fetch: RouteFetcher, spawn: Spawner) -> None:
        self._fetch = fetch
        self._spawn = spawn
        self._routes: dict[str, _RouteEntry] = {}
        self._fetches: dict[str, asyncio.Task[TopicRouteData | None]] = {}
        self._brokers: dict[str, BrokerData] = {}

    def topics(self) -> list[str]:
        """Every topic with a cached answer."""
        return list(self._routes)

    async def get(self, topic: str, *, refresh: bool = False) -> TopicRouteData | None:
        """The route of ``topic``: cached, or fetched when absent, stale or ``refresh``."""
        entry = self._routes.get(topic)
        if (
            not refresh
            and entry is not None
            and (
                entry.route is not None
                or time.monotonic() - entry.fetched_at < NEGATIVE_ROUTE_TTL_S
            )
        ):
            return entry.route
        fetch = self._fetches.get(topic)
        if fetch is None:
            fetch = self._spawn(self._load(topic), f"route-{topic}")
            self._fetches[topic] = fetch
        # shield: one caller giving up must not cancel the fetch others wait on.
        return await asyncio.shield(fetch)

    async def _load(self, topic: str) -> TopicRouteData | None:
        try:
            route = await self._fetch(topic)
            self.store(topic, route)
            return route
        finally:
            self._fetches.pop(topic, None)

    def store(self, topic: str, route: TopicRouteData | None) -> None:
        """Remember a fetched route (``None``: the topic does not exist)."""
        old = self._routes.get(topic)
        if old is not None and old.route == route:
            old.fetched_at = time.monotonic()  # unchanged: keep the derived queue lists
            return
        self._routes[topic] = _RouteEntry(route, time.monotonic())
        brokers: dict[str, BrokerData] = {}
        for entry in self._routes.values():
            if entry.route is not None:
                for bd in entry.route.broker_datas:
                    brokers[bd.broker_name] = bd
        self._brokers = brokers

    async def publish_queues(self, topic: str) -> list[MessageQueue]:
        """Writable queues of ``topic`` (a shared list), via TBW102 when it is unknown."""
        entry = self._routes.get(topic)
        if entry is not None and entry.publish is not None and entry.route is not None:
            return entry.publish
        route = await self.get(topic)
        entry = self._routes.get(topic)
        if route is None:
            template = await self.get(AUTO_CREATE_TOPIC)
            if template is None:
                return []
            if entry is not None and entry.template is template and entry.publish is not None:
                return entry.publish
            queues = publish_queues(topic, template, max_queues=DEFAULT_TOPIC_QUEUE_NUMS)
            if entry is not None and entry.route is None:
                entry.publish, entry.template = queues, template
            return queues
        queues = publish_queues(topic, route)
        if entry is not None and entry.route is route:
            entry.publish, entry.template = queues, None
        return queues

    async def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """Readable queues of ``topic`` (a shared list); empty when it is unknown."""
        route = await self.get(topic)
        if route is None:
            return []
        entry = self._routes.get(topic)
        if entry is not None and entry.route is route:
            if entry.subscribe is None:
                entry.subscribe = subscribe_queues(topic, route)
            return entry.subscribe
        return subscribe_queues(topic, route)

    def routed_by_template(self, topic: str) -> bool:
        """Whether the last answer for ``topic`` was "no route" (sends go via TBW102)."""
        entry = self._routes.get(topic)
        return entry is not None and entry.route is None

    def broker_data(self, broker_name: str) -> BrokerData | None:
        """A broker group from the cached routes."""
        return self._brokers.get(broker_name)

    def master_addrs(self) -> list[str]:
        """Every known master address, sorted."""
        return sorted({a for bd in self._brokers.values() if (a := bd.master_addr) is not None})
