"""Topic route bodies: GET_ROUTEINFO_BY_TOPIC (105) answers (docs/protocol.md).

The JSON is exactly what a Java name server writes, members in fastjson's alphabetical
order::

    {"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.5:10911"},"brokerName":"broker-a",
                     "cluster":"DefaultCluster"}],
     "filterServerTable":{},
     "orderTopicConf":"broker-a:4",             <- omitted when None
     "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,
                    "topicSysFlag":0,"writeQueueNums":4}]}

Queue counts and ``perm`` are JSON numbers: the C++ client fails every send with
"Value is not convertible to Int." when they are strings. ``brokerAddrs`` keys are
quoted by default (what 4.9.4+ name servers send to clients of version >= 401); the
unquoted fastjson form (``{0:"..."}``), which older name servers send and older clients
may expect, is available with ``unquoted_int_keys=True``. Reading accepts both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntFlag
from typing import Any, Final, Self

from rocklet.protocol.bodies._fields import (
    as_object,
    encode,
    get_int,
    get_list,
    get_map,
    get_opt_str,
    get_str,
    get_str_list,
    parse_object,
    to_int,
    to_str,
)

__all__ = ["MASTER_ID", "BrokerData", "Perm", "QueueData", "TopicRouteData"]

#: ``MixAll.MASTER_ID``: the broker id of a master in ``brokerAddrs``.
MASTER_ID: Final = 0


class Perm(IntFlag):
    """Topic and broker permission bits (``common/constant/PermName.java``)."""

    INHERIT = 1  #: a template topic (TBW102) whose config new topics inherit
    WRITE = 2  #: producers may send
    READ = 4  #: consumers may pull
    PRIORITY = 8


@dataclass(frozen=True, slots=True)
class QueueData:
    """A topic's queues on one broker (``route/QueueData.java``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = Perm.READ | Perm.WRITE
    topic_sys_flag: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, members in fastjson's order."""
        return {
            "brokerName": self.broker_name,
            "perm": int(self.perm),
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object; counts may be numbers or decimal strings.

        Raises:
            BodyError: A member is missing or ill-typed.
        """
        what = "QueueData"
        data = as_object(obj, what)
        return cls(
            broker_name=get_str(data, "brokerName", what),
            read_queue_nums=get_int(data, "readQueueNums", what),
            write_queue_nums=get_int(data, "writeQueueNums", what),
            perm=get_int(data, "perm", what),
            # 4.5.x wrote the typo "topicSynFlag"; clients ignore both.
            topic_sys_flag=get_int(data, "topicSysFlag", what, 0)
            or get_int(data, "topicSynFlag", what, 0),
        )


@dataclass(frozen=True, slots=True)
class BrokerData:
    """A broker group: its name, cluster and address per broker id (0 = master)."""

    cluster: str
    broker_name: str
    broker_addrs: Mapping[int, str]

    @property
    def master_addr(self) -> str | None:
        """The master's ``ip:port``, or ``None`` when the master is not registered."""
        return self.broker_addrs.get(MASTER_ID)

    @property
    def any_addr(self) -> str | None:
        """The master's address, else the first slave's (``BrokerData.selectBrokerAddr``).

        What mqadmin reads statistics from: a group whose master is down is still
        counted, from its slave.
        """
        addrs = self.broker_addrs
        if MASTER_ID in addrs:
            return addrs[MASTER_ID]
        return addrs[min(addrs)] if addrs else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object; ``brokerAddrs`` keeps integer keys, sorted by broker id."""
        return {
            "brokerAddrs": {bid: self.broker_addrs[bid] for bid in sorted(self.broker_addrs)},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object (``brokerAddrs`` keys quoted or not).

        Raises:
            BodyError: A member is missing or ill-typed, or a key is not an integer.
        """
        what = "BrokerData"
        data = as_object(obj, what)
        addrs = {
            to_int(key, "BrokerData brokerAddrs key"): to_str(addr, "BrokerData address")
            for key, addr in get_map(data, "brokerAddrs", what).items()
        }
        return cls(
            cluster=get_str(data, "cluster", what, ""),
            broker_name=get_str(data, "brokerName", what),
            broker_addrs=addrs,
        )


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """A topic's route: which brokers serve it with how many queues."""

    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    order_topic_conf: str | None = None
    filter_server_table: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json(self, *, unquoted_int_keys: bool = False) -> bytes:
        """Serialize as the §5.1 body.

        Args:
            unquoted_int_keys: Write ``brokerAddrs`` keys unquoted, as fastjson does by
                default (what a name server answers clients older than 4.9.4).

        Returns:
            The body bytes.
        """
        body: dict[str, Any] = {
            "brokerDatas": [b.to_dict() for b in self.broker_datas],
            "filterServerTable": {k: list(v) for k, v in self.filter_server_table.items()},
        }
        if self.order_topic_conf is not None:
            body["orderTopicConf"] = self.order_topic_conf
        body["queueDatas"] = [q.to_dict() for q in self.queue_datas]
        return encode(body, unquoted_int_keys=unquoted_int_keys)

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse a route body in either key style.

        Raises:
            BodyError: The body is not a valid TopicRouteData.
        """
        what = "TopicRouteData"
        obj = parse_object(data, what)
        servers = get_map(obj, "filterServerTable", what)
        return cls(
            queue_datas=tuple(QueueData.from_dict(q) for q in get_list(obj, "queueDatas", what)),
            broker_datas=tuple(BrokerData.from_dict(b) for b in get_list(obj, "brokerDatas", what)),
            order_topic_conf=get_opt_str(obj, "orderTopicConf", what),
            filter_server_table={k: get_str_list(servers, k, what) for k in servers},
        )
