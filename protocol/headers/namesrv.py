"""Name server headers: broker registration, routes, topics and KV config (§5)."""

from __future__ import annotations

from dataclasses import dataclass

from rocklet.protocol.headers.base import INT32, NON_NEGATIVE_INT64, Header, wire

__all__ = [
    "AddWritePermOfBrokerRequestHeader",
    "AddWritePermOfBrokerResponseHeader",
    "DeleteKVConfigRequestHeader",
    "DeleteTopicFromNamesrvRequestHeader",
    "GetKVConfigRequestHeader",
    "GetKVConfigResponseHeader",
    "GetKVListByNamespaceRequestHeader",
    "GetRouteInfoRequestHeader",
    "GetTopicsByClusterRequestHeader",
    "PutKVConfigRequestHeader",
    "QueryDataVersionRequestHeader",
    "QueryDataVersionResponseHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "UnregisterBrokerRequestHeader",
    "WipeWritePermOfBrokerRequestHeader",
    "WipeWritePermOfBrokerResponseHeader",
]


@dataclass(frozen=True, slots=True)
class RegisterBrokerRequestHeader(Header):
    """REGISTER_BROKER (103): a broker announces itself and its topics (§5.2).

    ``compressed`` says which ``RegisterBrokerBody`` form the body has; ``body_crc32``
    is ``UtilAll.crc32(body)``, 0 meaning "don't check".
    """

    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")  #: ``ip:port`` clients connect to
    cluster_name: str = wire("clusterName")
    ha_server_addr: str = wire("haServerAddr")
    broker_id: int = wire("brokerId", bounds=NON_NEGATIVE_INT64)  #: 0 = master
    compressed: bool = wire("compressed", False)
    body_crc32: int = wire("bodyCrc32", 0, bounds=INT32)


@dataclass(frozen=True, slots=True)
class RegisterBrokerResponseHeader(Header):
    """REGISTER_BROKER answer; both are set only for a slave whose master is alive."""

    ha_server_addr: str | None = wire("haServerAddr", None)
    master_addr: str | None = wire("masterAddr", None)


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRequestHeader(Header):
    """UNREGISTER_BROKER (104): a broker leaves."""

    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    broker_id: int = wire("brokerId", bounds=NON_NEGATIVE_INT64)


@dataclass(frozen=True, slots=True)
class QueryDataVersionRequestHeader(Header):
    """QUERY_DATA_VERSION (322): has the name server seen this broker's topic version?"""

    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    broker_id: int = wire("brokerId", bounds=NON_NEGATIVE_INT64)


@dataclass(frozen=True, slots=True)
class QueryDataVersionResponseHeader(Header):
    """Whether the broker's DataVersion (the body) differs from the registered one."""

    changed: bool = wire("changed")


@dataclass(frozen=True, slots=True)
class GetRouteInfoRequestHeader(Header):
    """GET_ROUTEINFO_BY_TOPIC (105).

    ``acceptStandardJsonOnly`` (4.9.4+) asks for quoted ``brokerAddrs`` keys whatever
    the client version (§5.1).
    """

    topic: str = wire("topic")
    accept_standard_json_only: bool | None = wire("acceptStandardJsonOnly", None)


@dataclass(frozen=True, slots=True)
class GetTopicsByClusterRequestHeader(Header):
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str = wire("cluster")


@dataclass(frozen=True, slots=True)
class DeleteTopicFromNamesrvRequestHeader(Header):
    """DELETE_TOPIC_IN_NAMESRV (216); ``clusterName`` limits it to one cluster."""

    topic: str = wire("topic")
    cluster_name: str | None = wire("clusterName", None)


@dataclass(frozen=True, slots=True)
class WipeWritePermOfBrokerRequestHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER (205): make a broker's topics read-only."""

    broker_name: str = wire("brokerName")


@dataclass(frozen=True, slots=True)
class WipeWritePermOfBrokerResponseHeader(Header):
    """How many topics lost write permission."""

    wipe_topic_count: int = wire("wipeTopicCount")


@dataclass(frozen=True, slots=True)
class AddWritePermOfBrokerRequestHeader(Header):
    """ADD_WRITE_PERM_OF_BROKER (327): give a broker's topics write permission back."""

    broker_name: str = wire("brokerName")


@dataclass(frozen=True, slots=True)
class AddWritePermOfBrokerResponseHeader(Header):
    """How many topics regained write permission."""

    add_topic_count: int = wire("addTopicCount")


@dataclass(frozen=True, slots=True)
class PutKVConfigRequestHeader(Header):
    """PUT_KV_CONFIG (100)."""

    namespace: str = wire("namespace")
    key: str = wire("key")
    value: str = wire("value")


@dataclass(frozen=True, slots=True)
class GetKVConfigRequestHeader(Header):
    """GET_KV_CONFIG (101)."""

    namespace: str = wire("namespace")
    key: str = wire("key")


@dataclass(frozen=True, slots=True)
class GetKVConfigResponseHeader(Header):
    """The value, absent when the key is unknown (then the code is QUERY_NOT_FOUND)."""

    value: str | None = wire("value", None)


@dataclass(frozen=True, slots=True)
class DeleteKVConfigRequestHeader(Header):
    """DELETE_KV_CONFIG (102)."""

    namespace: str = wire("namespace")
    key: str = wire("key")


@dataclass(frozen=True, slots=True)
class GetKVListByNamespaceRequestHeader(Header):
    """GET_KVLIST_BY_NAMESPACE (219); the answer is a ``KVTable`` body."""

    namespace: str = wire("namespace")
