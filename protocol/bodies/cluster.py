"""Name server listing bodies: ``ClusterInfo``, ``TopicList`` and ``KVTable`` (§5.2, §5.3).

* GET_BROKER_CLUSTER_INFO (106)::

      {"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"ip:port"},"brokerName":"broker-a",
                                      "cluster":"DefaultCluster"}},
       "clusterAddrTable":{"DefaultCluster":["broker-a"]}}

  A Java name server always writes the unquoted-key form here; ours writes quoted
  keys unless asked, and reads both.
* GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) and friends: ``{"topicList":["T1","T2"]}``,
  plus ``brokerAddr`` when set.
* KV lists (GET_KVLIST_BY_NAMESPACE, the REGISTER_BROKER answer): ``{"table":{...}}``.
* QUERY_TOPIC_CONSUME_BY_WHO (300) answer: ``{"groupList":["G1","G2"]}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from rocklet.protocol.bodies._fields import (
    encode,
    get_map,
    get_opt_str,
    get_str,
    get_str_list,
    parse_object,
)
from rocklet.protocol.bodies.route import BrokerData

__all__ = ["ClusterInfo", "GroupList", "KVTable", "TopicList"]


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """Every broker group by name, and the broker names of each cluster."""

    broker_addr_table: Mapping[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json(self, *, unquoted_int_keys: bool = False) -> bytes:
        """Serialize the GET_BROKER_CLUSTER_INFO body.

        Args:
            unquoted_int_keys: Write broker ids unquoted, as a Java name server does.

        Returns:
            The body bytes.
        """
        body: dict[str, Any] = {
            "brokerAddrTable": {n: b.to_dict() for n, b in self.broker_addr_table.items()},
            "clusterAddrTable": {c: list(n) for c, n in self.cluster_addr_table.items()},
        }
        return encode(body, unquoted_int_keys=unquoted_int_keys)

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body in either key style.

        Raises:
            BodyError: Not a valid ClusterInfo.
        """
        what = "ClusterInfo"
        obj = parse_object(data, what)
        brokers = get_map(obj, "brokerAddrTable", what)
        clusters = get_map(obj, "clusterAddrTable", what)
        return cls(
            broker_addr_table={n: BrokerData.from_dict(b) for n, b in brokers.items()},
            cluster_addr_table={c: get_str_list(clusters, c, what) for c in clusters},
        )


@dataclass(frozen=True, slots=True)
class TopicList:
    """A list of topic names (``body/TopicList.java``)."""

    topic_list: tuple[str, ...] = ()
    broker_addr: str | None = None

    def to_json(self) -> bytes:
        """Serialize; ``brokerAddr`` is omitted when ``None``, as fastjson does."""
        body: dict[str, Any] = {}
        if self.broker_addr is not None:
            body["brokerAddr"] = self.broker_addr
        body["topicList"] = list(self.topic_list)
        return encode(body)

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid TopicList.
        """
        obj = parse_object(data, "TopicList")
        return cls(
            get_str_list(obj, "topicList", "TopicList"),
            get_opt_str(obj, "brokerAddr", "TopicList"),
        )


@dataclass(frozen=True, slots=True)
class KVTable:
    """String key/value pairs (``body/KVTable.java``)."""

    table: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """Serialize as ``{"table":{...}}``."""
        return encode({"table": dict(self.table)})

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body; numeric values are read as their decimal text.

        Raises:
            BodyError: Not a valid KVTable.
        """
        table = get_map(parse_object(data, "KVTable"), "table", "KVTable")
        return cls({k: get_str(table, k, "KVTable table") for k in table})


@dataclass(frozen=True, slots=True)
class GroupList:
    """A list of consumer group names (``body/GroupList.java``)."""

    group_list: tuple[str, ...] = ()

    def to_json(self) -> bytes:
        """Serialize as ``{"groupList":[...]}``."""
        return encode({"groupList": list(self.group_list)})

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid GroupList.
        """
        return cls(get_str_list(parse_object(data, "GroupList"), "groupList", "GroupList"))
