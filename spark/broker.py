"""What the connector asks a cluster, over the Rocklet SDK (``client``).

:class:`Cluster` wraps one SDK client instance for the lifetime of one ``asyncio.run``
(driver calls) or one partition read (executors): Spark runs the connector's methods
in several short-lived Python processes, so nothing is
opened before it is needed and everything is closed before the method returns.

It answers: which queues a subscription covers now (routes from the name server, topic
list for patterns), which named topics have no route, each queue's stored range
(GET_MIN_OFFSET / GET_MAX_OFFSET, as Java's ``MQAdminImpl.minOffset``/``maxOffset``),
the offset for a store time (SEARCH_OFFSET_BY_TIMESTAMP), which brokers refuse the
consumer group; the source's reads pull through :attr:`Cluster.consumer` (the SDK's
:class:`~rocklet.client.pull_consumer.PullConsumer`).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Final, TypeVar

from rocklet.client.admin import Admin
from rocklet.client.errors import SubscriptionGroupNotExistError
from rocklet.client.instance import ClientInstance, get_instance
from rocklet.client.pull_consumer import PullConsumer
from rocklet.client.routes import subscribe_queues
from rocklet.protocol.acl import Credentials
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.spark.offsets import QueueBounds
from rocklet.spark.options import DEFAULT_CONSUMER_GROUP, Subscription

__all__ = ["Cluster", "is_system_topic", "run_with_cluster"]

T = TypeVar("T")

#: Topics a RocketMQ broker creates for itself (``TopicValidator``): a
#: ``subscribePattern`` never matches them.
_SYSTEM_TOPICS: Final = frozenset(
    {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "OFFSET_MOVED_EVENT",
        "SELF_TEST_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
    }
)
_SYSTEM_PREFIXES: Final = ("%RETRY%", "%DLQ%", "RMQ_SYS_", "rmq_sys_")

_instance_names = itertools.count(1)


def is_system_topic(topic: str) -> bool:
    """Whether ``topic`` is one a broker creates for its own use."""
    return (
        topic in _SYSTEM_TOPICS
        or topic.startswith(_SYSTEM_PREFIXES)
        or topic.endswith("_REPLY_TOPIC")
    )


class Cluster:
    """One SDK client instance and the queries the connector makes with it.

    Use as ``async with Cluster(name_server) as cluster:`` inside one event loop.

    Args:
        name_server: Name server address(es), ``;``-separated.
        group: The consumer group the pulls name (the ``consumerGroup`` option).
        timeout_s: Timeout of each request.
        consumer: Start the SDK pull consumer (the source needs it; the sink does
            not, and skips joining a consumer group).
        tls: TLS context of the connections; ``None``: plain TCP.
        credentials: Sign requests with this ACL account; ``None``: unsigned.
    """

    def __init__(
        self,
        name_server: str,
        *,
        group: str = DEFAULT_CONSUMER_GROUP,
        timeout_s: float = 5.0,
        consumer: bool = True,
        tls: ssl.SSLContext | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self._credentials = credentials
        self._name_server = name_server
        #: The TLS context; clients made for this cluster share its instance with it.
        self.tls = tls
        self._group = group
        self._timeout_s = timeout_s
        self._with_consumer = consumer
        # A private instance name: the connector's short-lived clients must not share
        # (and close) an instance the application runs in the same process.
        self._instance_name = f"rocklet-spark-{os.getpid()}-{next(_instance_names)}"
        self._instance: ClientInstance | None = None
        self._consumer: PullConsumer | None = None

    @property
    def instance(self) -> ClientInstance:
        """The SDK client instance (only inside ``async with``)."""
        if self._instance is None:
            raise RuntimeError("Cluster is used outside 'async with'")
        return self._instance

    @property
    def name_server(self) -> str:
        """The name server address(es) this cluster is reached through."""
        return self._name_server

    @property
    def group(self) -> str:
        """The consumer group the source's pulls name."""
        return self._group

    @property
    def credentials(self) -> Credentials | None:
        """The ACL account requests are signed with, or ``None``."""
        return self._credentials

    @property
    def instance_name(self) -> str:
        """The SDK instance name; producers made with it share the connections."""
        return self._instance_name

    @property
    def consumer(self) -> PullConsumer:
        """The SDK pull consumer the source reads and looks offsets up with."""
        if self._consumer is None:
            raise RuntimeError("Cluster is used outside 'async with'")
        return self._consumer

    def admin(self) -> Admin:
        """An admin client on this cluster's instance (use it ``async with``)."""
        return Admin(
            self._name_server,
            instance_name=self._instance_name,
            tls=self.tls,
            credentials=self._credentials,
        )

    async def __aenter__(self) -> Cluster:
        self._instance = get_instance(
            self._name_server,
            self._instance_name,
            tls=self.tls,
            credentials=self._credentials,
            request_timeout_s=self._timeout_s,
        )
        if not self._with_consumer:
            return self
        consumer = PullConsumer(
            self._group,
            self._name_server,
            pull_timeout_ms=int(self._timeout_s * 1000),
            instance_name=self._instance_name,
            tls=self.tls,
            credentials=self._credentials,
        )
        try:
            await consumer.start()
        except BaseException:
            await self._instance.release()
            raise
        self._consumer = consumer
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        consumer, self._consumer = self._consumer, None
        instance, self._instance = self._instance, None
        try:
            if consumer is not None:
                await consumer.shutdown()
        finally:
            if instance is not None:
                await instance.release()

    # -- discovery ------------------------------------------------------------------

    async def topics(self, subscription: Subscription) -> list[str]:
        """The topics a subscription covers now, sorted.

        Args:
            subscription: subscribe, subscribePattern or assign.

        Returns:
            Topic names (a subscribed topic that does not exist yet is still listed;
            it simply has no queues).
        """
        if subscription.pattern is None:
            named = subscription.assign.keys() if subscription.assign else subscription.topics
            return sorted(named)
        async with self.admin() as admin:
            listed = await admin.list_topics()
            cluster = await admin.cluster_info()
        own = set(cluster.broker_addr_table) | set(cluster.cluster_addr_table)
        pattern = subscription.pattern
        return sorted(
            t for t in listed if pattern.fullmatch(t) and not is_system_topic(t) and t not in own
        )

    async def queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` now (fresh route), sorted; [] if unknown."""
        route = await self.instance.topic_route(topic, refresh=True)
        return [] if route is None else subscribe_queues(topic, route)

    async def unknown_topics(self, topics: Iterable[str]) -> list[str]:
        """The topics among ``topics`` the name server has no route for, sorted.

        Routes just fetched by :meth:`queues` are cached: only a topic without one is
        asked again.
        """
        names = sorted(set(topics))
        routes = await asyncio.gather(*(self.instance.topic_route(t) for t in names))
        return [t for t, route in zip(names, routes, strict=True) if route is None]

    async def cluster_names(self) -> list[str]:
        """The clusters the name server knows, sorted (for commands in error messages)."""
        async with self.admin() as admin:
            info = await admin.cluster_info()
        return sorted(info.cluster_addr_table)

    async def subscribed_queues(self, subscription: Subscription) -> list[MessageQueue]:
        """Every queue the subscription covers now, sorted.

        For ``assign`` only the named queues that exist are returned; the caller
        checks for missing ones (see :func:`rocklet.spark.planning.resolve_assign`).
        """
        topics = await self.topics(subscription)
        found = await asyncio.gather(*(self.queues(t) for t in topics))
        return sorted(mq for queues in found for mq in queues)

    # -- offsets --------------------------------------------------------------------

    async def bounds(self, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, QueueBounds]:
        """Each queue's stored range ``[min, max)``, asked concurrently.

        Args:
            mqs: The queues.

        Returns:
            Their bounds (GET_MIN_OFFSET / GET_MAX_OFFSET through the SDK).
        """
        queues = list(mqs)
        consumer = self.consumer

        async def one(mq: MessageQueue) -> QueueBounds:
            low, high = await asyncio.gather(consumer.min_offset(mq), consumer.max_offset(mq))
            return QueueBounds(low, max(low, high))

        found = await asyncio.gather(*(one(mq) for mq in queues))
        return dict(zip(queues, found, strict=True))

    async def offsets_for_time(
        self, mqs: Iterable[MessageQueue], timestamp_ms: int
    ) -> dict[MessageQueue, int]:
        """Each queue's first offset stored at or after ``timestamp_ms``.

        Java's ``searchOffset``: a time after the last message answers the max offset,
        before the first answers the min offset.
        """
        queues = list(mqs)
        found = await asyncio.gather(
            *(self.consumer.offset_for_time(mq, timestamp_ms) for mq in queues)
        )
        return dict(zip(queues, found, strict=True))

    async def brokers_refusing_group(
        self, bounds: Mapping[MessageQueue, QueueBounds]
    ) -> dict[str, str | None]:
        """The brokers that refuse pulls of :attr:`group` because it does not exist there.

        One pull per broker, at the end of one of its queues, so nothing is read: the
        broker checks the group before anything else (with ``autoCreateSubscriptionGroup``
        off it answers SUBSCRIPTION_GROUP_NOT_EXIST). Other refusals are left to the read,
        which reports them.

        Args:
            bounds: The queues to be read, with their stored ranges.

        Returns:
            Broker name -> master address (``None`` if unknown), of the refusing brokers.
        """
        probes: dict[str, tuple[MessageQueue, int]] = {}
        for mq in sorted(bounds):
            probes.setdefault(mq.broker_name, (mq, bounds[mq].max_offset))

        async def refuses(mq: MessageQueue, offset: int) -> bool:
            try:
                await self.consumer.pull(mq, offset, 1)
            except SubscriptionGroupNotExistError:
                return True
            return False

        found = await asyncio.gather(*(refuses(mq, at) for mq, at in probes.values()))
        return {
            name: self.instance.routes.master_addr(name)
            for name, refused in zip(probes, found, strict=True)
            if refused
        }


def run_with_cluster(
    name_server: str,
    work: Callable[[Cluster], Awaitable[T]],
    *,
    group: str = DEFAULT_CONSUMER_GROUP,
    tls: ssl.SSLContext | None = None,
    credentials: Credentials | None = None,
) -> T:
    """Run ``work`` with an open :class:`Cluster` in a fresh event loop (sync callers).

    The connector's driver-side methods are synchronous and run in short-lived Spark
    Python processes; each call gets its own loop and client, closed on return.

    Args:
        name_server: Name server address(es).
        work: An async function of the cluster.
        group: The consumer group the source's requests name.
        tls: TLS context of the connections.
        credentials: Sign requests with this ACL account; ``None``: unsigned.

    Returns:
        What ``work`` returned.
    """

    async def main() -> T:
        async with Cluster(name_server, group=group, tls=tls, credentials=credentials) as cluster:
            return await work(cluster)

    return asyncio.run(main())
