"""The name server's routing tables (RocketMQ's ``RouteInfoManager``).

Four tables, kept consistent by the methods below:

- topic -> broker name -> :class:`~rocklet.protocol.bodies.route.QueueData`;
- broker name -> cluster and broker id -> address (a ``BrokerData``);
- cluster -> broker names;
- live brokers: address -> last registration time, topic-table version, HA address
  and the connection it registered on.

Brokers re-register every 30 s; one silent for 120 s (``BROKER_CHANNEL_EXPIRED_TIME``)
is dropped by :meth:`RouteInfoManager.scan_once`, and one whose registering connection
closes is dropped by :meth:`RouteInfoManager.on_connection_closed` (RocketMQ's
``BrokerHousekeepingService``). Not thread-safe: the name server's event loop owns it.
Times are milliseconds of whatever clock the caller uses, consistently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, NamedTuple

import structlog

from rocklet.protocol.bodies.cluster import ClusterInfo
from rocklet.protocol.bodies.route import MASTER_ID, BrokerData, Perm, QueueData, TopicRouteData
from rocklet.protocol.bodies.topic import DataVersion, TopicConfigSerializeWrapper

__all__ = ["BROKER_EXPIRED_MS", "BrokerLiveInfo", "RegisterResult", "RouteInfoManager"]

_log = structlog.get_logger(__name__)

#: ``RouteInfoManager.BROKER_CHANNEL_EXPIRED_TIME``: 2 minutes without registration.
BROKER_EXPIRED_MS: Final = 120_000


@dataclass(frozen=True, slots=True)
class BrokerLiveInfo:
    """What the name server remembers of a broker's last registration.

    Attributes:
        last_update_ms: When it last registered.
        data_version: The version of the topic table it sent.
        connection: The connection it registered on (an opaque handle here).
        ha_server_addr: Its HA address, handed to its slaves.
    """

    last_update_ms: int
    data_version: DataVersion
    connection: object
    ha_server_addr: str


class RegisterResult(NamedTuple):
    """The REGISTER_BROKER answer: set only for slaves whose master is alive."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


class _Group:
    """A mutable broker group; published as an immutable ``BrokerData``."""

    __slots__ = ("addrs", "cluster", "name")

    def __init__(self, cluster: str, name: str) -> None:
        self.cluster = cluster
        self.name = name
        self.addrs: dict[int, str] = {}

    def snapshot(self) -> BrokerData:
        return BrokerData(
            cluster=self.cluster, broker_name=self.name, broker_addrs=dict(self.addrs)
        )


class RouteInfoManager:
    """Topic routes, broker groups, clusters and live brokers."""

    def __init__(self) -> None:
        self._topic_queues: dict[str, dict[str, QueueData]] = {}
        self._groups: dict[str, _Group] = {}
        self._clusters: dict[str, set[str]] = {}
        self._live: dict[str, BrokerLiveInfo] = {}

    # -- registration ---------------------------------------------------------------

    def register_broker(
        self,
        *,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topics: TopicConfigSerializeWrapper,
        connection: object,
        now_ms: int,
    ) -> RegisterResult:
        """Record a broker's (re-)registration.

        Args:
            cluster: Its cluster name.
            broker_addr: Its ``ip:port`` for clients.
            broker_name: Its group name.
            broker_id: 0 for a master, >= 1 for slaves.
            ha_server_addr: Its HA ``ip:port``.
            topics: Its topic table and version.
            connection: The connection the request came on.
            now_ms: The registration time.

        Returns:
            The HA and master addresses for a slave (empty for a master).
        """
        self._clusters.setdefault(cluster, set()).add(broker_name)
        group = self._groups.get(broker_name)
        first = group is None
        if group is None:
            group = self._groups[broker_name] = _Group(cluster, broker_name)
        # A slave promoted to master (or the reverse) keeps its address under a new id:
        # forget the old id first, as Java does.
        for bid in [b for b, addr in group.addrs.items() if addr == broker_addr and b != broker_id]:
            del group.addrs[bid]
        first = group.addrs.get(broker_id) is None or first
        group.addrs[broker_id] = broker_addr
        previous = self._live.get(broker_addr)
        # Only the master's topic table builds queue data (RouteInfoManager.registerBroker).
        if broker_id == MASTER_ID and (
            first or previous is None or previous.data_version != topics.data_version
        ):
            for config in topics.topic_config_table.values():
                self._topic_queues.setdefault(config.topic_name, {})[broker_name] = QueueData(
                    broker_name=broker_name,
                    read_queue_nums=config.read_queue_nums,
                    write_queue_nums=config.write_queue_nums,
                    perm=config.perm,
                    topic_sys_flag=config.topic_sys_flag,
                )
        self._live[broker_addr] = BrokerLiveInfo(
            now_ms, topics.data_version, connection, ha_server_addr
        )
        if previous is None:
            _log.info(
                "broker registered",
                cluster=cluster,
                broker=broker_name,
                id=broker_id,
                addr=broker_addr,
            )
        if broker_id == MASTER_ID:
            return RegisterResult()
        master_addr = group.addrs.get(MASTER_ID)
        master = None if master_addr is None else self._live.get(master_addr)
        if master is None:
            return RegisterResult()
        return RegisterResult(ha_server_addr=master.ha_server_addr, master_addr=master_addr)

    def unregister_broker(
        self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        """Forget a broker that is shutting down (UNREGISTER_BROKER).

        Args:
            cluster: Its cluster name.
            broker_addr: Its ``ip:port``.
            broker_name: Its group name.
            broker_id: Its id within the group.
        """
        self._live.pop(broker_addr, None)
        group = self._groups.get(broker_name)
        if group is not None:
            group.addrs.pop(broker_id, None)
            if not group.addrs:
                self._remove_group(broker_name)
        _log.info("broker unregistered", cluster=cluster, broker=broker_name, addr=broker_addr)

    def scan_once(self, now_ms: int) -> list[BrokerLiveInfo]:
        """Drop brokers that have not registered for :data:`BROKER_EXPIRED_MS`.

        Args:
            now_ms: The current time, on the clock registrations used.

        Returns:
            The dropped brokers' live info (their connections should be closed).
        """
        expired = [
            addr
            for addr, live in self._live.items()
            if live.last_update_ms + BROKER_EXPIRED_MS < now_ms
        ]
        dropped = []
        for addr in expired:
            dropped.append(self._live[addr])
            _log.warning("broker expired: no registration for 120 s", addr=addr)
            self._drop_broker_addr(addr)
        return dropped

    def on_connection_closed(self, connection: object) -> list[str]:
        """Drop every broker that registered on a connection that closed.

        Args:
            connection: The closed connection.

        Returns:
            The dropped broker addresses.
        """
        addrs = [addr for addr, live in self._live.items() if live.connection is connection]
        for addr in addrs:
            _log.info("broker connection closed; dropping its routes", addr=addr)
            self._drop_broker_addr(addr)
        return addrs

    # -- queries ----------------------------------------------------------------------

    def get_topic_route(self, topic: str) -> TopicRouteData | None:
        """The route of a topic, or ``None`` when no live broker group serves it.

        Args:
            topic: The topic name.

        Returns:
            Queue datas and broker datas, sorted by broker name.
        """
        queues = self._topic_queues.get(topic)
        if not queues:
            return None
        names = sorted(queues)
        groups = [self._groups[n].snapshot() for n in names if n in self._groups]
        if not groups:
            return None
        return TopicRouteData(
            queue_datas=tuple(queues[n] for n in names), broker_datas=tuple(groups)
        )

    def cluster_info(self) -> ClusterInfo:
        """Every broker group and the broker names of each cluster (sorted)."""
        return ClusterInfo(
            broker_addr_table={n: self._groups[n].snapshot() for n in sorted(self._groups)},
            cluster_addr_table={
                c: tuple(sorted(self._clusters[c])) for c in sorted(self._clusters)
            },
        )

    def all_topics(self) -> list[str]:
        """Every topic with queue data, sorted."""
        return sorted(self._topic_queues)

    def topics_of_cluster(self, cluster: str) -> list[str]:
        """Topics with queues on some broker group of a cluster, sorted.

        Args:
            cluster: The cluster name.

        Returns:
            The topic names.
        """
        names = self._clusters.get(cluster, set())
        return sorted(t for t, queues in self._topic_queues.items() if names & queues.keys())

    def data_version(self, broker_addr: str) -> DataVersion | None:
        """The topic-table version a live broker last registered with.

        Args:
            broker_addr: The broker's ``ip:port``.

        Returns:
            The version, or ``None`` when the broker is not live.
        """
        live = self._live.get(broker_addr)
        return None if live is None else live.data_version

    def touch(self, broker_addr: str, now_ms: int) -> None:
        """Record a sign of life from a live broker (QUERY_DATA_VERSION does this).

        Args:
            broker_addr: The broker's ``ip:port``.
            now_ms: The current time.
        """
        live = self._live.get(broker_addr)
        if live is not None:
            self._live[broker_addr] = dataclasses.replace(live, last_update_ms=now_ms)

    def live_brokers(self) -> dict[str, BrokerLiveInfo]:
        """Live brokers by address (a copy)."""
        return dict(self._live)

    def wipe_write_perm(self, broker_name: str) -> int:
        """Take WRITE away from every queue data of a broker group (WIPE_WRITE_PERM_OF_BROKER).

        As ``RouteInfoManager.operateWritePermOfBroker``: every topic the group serves
        counts, whether or not it could be written before. The group's next registration
        puts its own perms back only when its topic table changed (a new data version)
        or it registers anew, since only then is queue data rebuilt.

        Args:
            broker_name: The group.

        Returns:
            How many topics' queue data of the group were touched (0: none, or no such group).
        """
        return self._set_perms(broker_name, lambda perm: perm & ~int(Perm.WRITE))

    def add_write_perm(self, broker_name: str) -> int:
        """Make every queue data of a broker group READ|WRITE (ADD_WRITE_PERM_OF_BROKER).

        As Java, the perm becomes exactly READ|WRITE (6): an INHERIT bit is dropped and
        a topic the broker serves read-only becomes writable in the routes.

        Args:
            broker_name: The group.

        Returns:
            How many topics' queue data of the group were touched.
        """
        return self._set_perms(broker_name, lambda _perm: int(Perm.READ | Perm.WRITE))

    def _set_perms(self, broker_name: str, change: Callable[[int], int]) -> int:
        count = 0
        for queues in self._topic_queues.values():
            data = queues.get(broker_name)
            if data is not None:
                queues[broker_name] = dataclasses.replace(data, perm=change(int(data.perm)))
                count += 1
        return count

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """Forget a topic's queues (DELETE_TOPIC_IN_NAMESRV).

        Args:
            topic: The topic.
            cluster: Only remove the queues on this cluster's broker groups; all when
                ``None``.
        """
        queues = self._topic_queues.get(topic)
        if queues is None:
            return
        if cluster is None:
            del self._topic_queues[topic]
            return
        for name in self._clusters.get(cluster, set()):
            queues.pop(name, None)
        if not queues:
            del self._topic_queues[topic]

    # -- internals --------------------------------------------------------------------

    def _drop_broker_addr(self, addr: str) -> None:
        # RouteInfoManager.onChannelDestroy: remove the address from every group, and a
        # group that becomes empty with its cluster membership and topic queues.
        self._live.pop(addr, None)
        for name in list(self._groups):
            group = self._groups[name]
            for bid in [b for b, a in group.addrs.items() if a == addr]:
                del group.addrs[bid]
            if not group.addrs:
                self._remove_group(name)

    def _remove_group(self, name: str) -> None:
        group = self._groups.pop(name)
        members = self._clusters.get(group.cluster)
        if members is not None:
            members.discard(name)
            if not members:
                del self._clusters[group.cluster]
        self._remove_topics_of(name)

    def _remove_topics_of(self, name: str) -> None:
        for topic in list(self._topic_queues):
            queues = self._topic_queues[topic]
            queues.pop(name, None)
            if not queues:
                del self._topic_queues[topic]
