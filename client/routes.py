"""Routes: the cache of topic routes a client instance fetched, and queues from a route.

:func:`publish_queues` and :func:`subscribe_queues` are pure: the part of RocketMQ's
``MQClientInstance.topicRouteData2TopicPublishInfo`` /
``topicRouteData2TopicSubscribeInfo`` that decides which queues a topic has.
:class:`RouteCache` keeps the routes fetched from the name server (GET_ROUTEINFO_BY_TOPIC),
the broker table derived from them, and the queue lists derived once per route version.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Final

from rocklet.client.errors import TransportError
from rocklet.client.pool import Spawner
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.route import BrokerData, Perm, TopicRouteData
from rocklet.protocol.names import AUTO_CREATE_TOPIC
from rocklet.transport.clock import SYSTEM_CLOCK, Clock
from rocklet.transport.logs import get_logger

__all__ = [
    "DEFAULT_TOPIC_QUEUE_NUMS",
    "NEGATIVE_ROUTE_TTL_MS",
    "RouteCache",
    "RouteFetcher",
    "publish_queues",
    "subscribe_queues",
]

_log = get_logger(__name__)

#: ``DefaultMQProducer.defaultTopicQueueNums``: queues of an auto-created topic.
DEFAULT_TOPIC_QUEUE_NUMS: Final = 4

#: How long "no route for this topic" is believed before asking the name server again.
NEGATIVE_ROUTE_TTL_MS: Final = 2000


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
class _RouteEntry:
    route: TopicRouteData | None
    fetched_at_ms: int
    publish: list[MessageQueue] | None = None
    subscribe: list[MessageQueue] | None = None
    #: The TBW102 route ``publish`` was derived from, for a topic with no route.
    template: TopicRouteData | None = None


#: Fetches one topic's route from a name server (``None``: the topic does not exist).
RouteFetcher = Callable[[str], Awaitable[TopicRouteData | None]]


class RouteCache:
    """Cached topic routes, the broker table derived from them, and queue lists.

    Concurrent lookups of one topic share one fetch; "topic does not exist" is
    believed for :data:`NEGATIVE_ROUTE_TTL_MS`, so a send loop to a topic not created
    yet does not ask the name server on every send; derived queue lists are computed
    once per route version. The broker table is rebuilt from all cached routes on
    every change, so a broker that left every route is forgotten (Java's
    ``cleanOfflineBroker``).

    Args:
        fetch: Asks the name server for a route.
        spawn: Runs a fetch as a task owned by the caller.
        clock: Ages negative answers (monotonic).
    """

    def __init__(self, fetch: RouteFetcher, spawn: Spawner, clock: Clock = SYSTEM_CLOCK) -> None:
        self._fetch = fetch
        self._spawn = spawn
        self._clock = clock
        self._routes: dict[str, _RouteEntry] = {}
        self._fetches: dict[str, asyncio.Task[TopicRouteData | None]] = {}
        self._brokers: dict[str, BrokerData] = {}

    def topics(self) -> list[str]:
        """Every topic with a cached answer."""
        return list(self._routes)

    async def topic_route(self, topic: str, *, refresh: bool = False) -> TopicRouteData | None:
        """A topic's route (GET_ROUTEINFO_BY_TOPIC): cached, or fetched when absent or stale.

        Args:
            topic: The topic.
            refresh: Ask the name server even if a cached route exists.

        Returns:
            The route, or ``None`` when the name server does not know the topic.

        Raises:
            TransportError: No name server answered.
            BrokerError: The name server answered with an error other than
                TOPIC_NOT_EXIST.
            NotANameServerError: The name server address is a broker's.
            ClientStateError: The client instance is closed.
        """
        entry = self._routes.get(topic)
        if (
            not refresh
            and entry is not None
            and (
                entry.route is not None
                or self._clock.monotonic_ms() - entry.fetched_at_ms < NEGATIVE_ROUTE_TTL_MS
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
        now = self._clock.monotonic_ms()
        old = self._routes.get(topic)
        brokers = self._brokers
        if old is not None and old.route == route:
            old.fetched_at_ms = now  # unchanged: keep the derived queue lists
        else:
            self._routes[topic] = _RouteEntry(route, now)
            brokers = {}
            for entry in self._routes.values():
                if entry.route is not None:
                    for bd in entry.route.broker_datas:
                        brokers[bd.broker_name] = bd
        if route is not None and any(
            brokers.get(bd.broker_name) != bd for bd in route.broker_datas
        ):
            # The newest answer wins over other topics' older routes (Java's
            # brokerAddrTable.put per fetch): after a failover those may still lack a
            # master that has come back, or list one that is gone.
            brokers = {**brokers, **{bd.broker_name: bd for bd in route.broker_datas}}
        self._brokers = brokers

    async def refresh(self, extra_topics: Iterable[str] = ()) -> None:
        """Fetch again every cached topic and ``extra_topics`` (one refresh-timer step).

        Java's ``updateTopicRouteInfoFromNameServer``: a name server that cannot be
        reached is logged per topic and the cached routes are kept.

        Args:
            extra_topics: Topics to refresh besides the cached ones (subscriptions).
        """
        for topic in sorted({*self._routes, *extra_topics}):
            try:
                await self.topic_route(topic, refresh=True)
            except TransportError as exc:
                _log.warning("route refresh failed", topic=topic, error=str(exc))

    async def publish_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's writable queues (a cached list: do not modify it).

        A topic the name server does not know is routed through the TBW102 template
        with at most 4 queues per broker, as Java's producer does, so that the
        broker auto-creates it on the first send.

        Raises:
            TransportError: No name server answered.
            BrokerError: The name server answered with an error.
        """
        entry = self._routes.get(topic)
        if entry is not None and entry.publish is not None and entry.route is not None:
            return entry.publish
        route = await self.topic_route(topic)
        entry = self._routes.get(topic)
        if route is None:
            template = await self.topic_route(AUTO_CREATE_TOPIC)
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
        """The topic's readable queues (sorted; a cached list: do not modify it).

        Empty when the topic is unknown.

        Raises:
            TransportError: No name server answered.
            BrokerError: The name server answered with an error.
        """
        route = await self.topic_route(topic)
        if route is None:
            return []
        entry = self._routes.get(topic)
        if entry is not None and entry.route is route:
            if entry.subscribe is None:
                entry.subscribe = subscribe_queues(topic, route)
            return entry.subscribe
        return subscribe_queues(topic, route)

    def routed_by_template(self, topic: str) -> bool:
        """Whether ``topic`` has no route of its own, so its publish queues are TBW102's.

        Those queue ids are guesses: the broker may already hold the topic with
        fewer queues (just created, not yet registered with the name server).
        """
        entry = self._routes.get(topic)
        return entry is not None and entry.route is None

    def broker_data(self, broker_name: str) -> BrokerData | None:
        """A broker group's cluster and addresses, from the cached routes."""
        return self._brokers.get(broker_name)

    def master_addr(self, broker_name: str) -> str | None:
        """The master address of a broker group, from the cached routes."""
        bd = self._brokers.get(broker_name)
        return None if bd is None else bd.master_addr

    def broker_addrs(self, *, slaves: bool = False) -> list[str]:
        """Every known master address (and slave address with ``slaves``), sorted."""
        if slaves:
            return sorted({a for bd in self._brokers.values() for a in bd.broker_addrs.values()})
        return sorted({a for bd in self._brokers.values() if (a := bd.master_addr) is not None})

    def subscribe_addr(
        self, broker_name: str, broker_id: int, avoid: str | None = None
    ) -> tuple[str, int] | None:
        """Where to pull a queue of ``broker_name`` from (``findBrokerAddressInSubscribe``).

        The address of ``broker_id`` when the route has it, else of the group's lowest
        id (the master while it is registered, a slave once it is gone), as the Java
        and C++ clients do. ``avoid`` (an address a pull just failed to reach) is only
        returned when the group has no other.

        Args:
            broker_name: The broker group.
            broker_id: The id the last pull answer suggested (0 at first).
            avoid: An address to pass over if there is another.

        Returns:
            ``(address, broker id)``, or ``None`` when the group is unknown or empty.
        """
        bd = self._brokers.get(broker_name)
        if bd is None or not bd.broker_addrs:
            return None
        addr = bd.broker_addrs.get(broker_id)
        if addr is not None and addr != avoid:
            return addr, broker_id  # the usual case, once per pull
        ids = sorted(bd.broker_addrs)
        if broker_id in bd.broker_addrs:
            ids.remove(broker_id)
            ids.insert(0, broker_id)
        usable = [i for i in ids if bd.broker_addrs[i] != avoid] or ids
        return bd.broker_addrs[usable[0]], usable[0]

    def admin_addr(self, broker_name: str) -> str | None:
        """The master, else the lowest-id slave (``findBrokerAddressInAdmin``).

        Offset commits and queries go here: with the master gone, a slave keeps the
        group's offsets (docs/replication.md).
        """
        bd = self._brokers.get(broker_name)
        if bd is None or not bd.broker_addrs:
            return None
        return bd.broker_addrs[min(bd.broker_addrs)]
