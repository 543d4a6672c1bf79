"""JSON bodies as typed, frozen dataclasses.

Every body class has ``to_json() -> bytes`` and ``from_json(data) -> Self``; parsing
raises :class:`~protocol.errors.BodyError` on bad input and nothing else. Output
follows what Java's fastjson writes (members in alphabetical order, compact), and
parsing also accepts the C++ client's and ali-ons' dialects.
"""

from protocol.bodies.cluster import ClusterInfo, GroupList, KVTable, TopicList
from protocol.bodies.consumer import (
    ConsumerListBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
    ResetOffsetBody,
    UnlockBatchRequestBody,
)
from protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from protocol.bodies.queue import MessageQueue
from protocol.bodies.register import RegisterBrokerBody
from protocol.bodies.route import BrokerData, Perm, QueueData, TopicRouteData
from protocol.bodies.running import (
    ConsumerConnection,
    ConsumerRunningInfo,
    ConsumeStatus,
    ProcessQueueInfo,
    ProducerConnection,
    RemoteConnection,
)
from protocol.bodies.stats import ConsumeStats, OffsetWrapper, TopicOffset, TopicStatsTable
from protocol.bodies.subscription_group import SubscriptionGroupConfig, SubscriptionGroupWrapper
from protocol.bodies.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper

__all__ = [
    "BrokerData",
    "ClusterInfo",
    "ConsumeFromWhere",
    "ConsumeStats",
    "ConsumeStatus",
    "ConsumeType",
    "ConsumerConnection",
    "ConsumerData",
    "ConsumerListBody",
    "ConsumerRunningInfo",
    "DataVersion",
    "GroupList",
    "HeartbeatData",
    "KVTable",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageModel",
    "MessageQueue",
    "OffsetWrapper",
    "Perm",
    "ProcessQueueInfo",
    "ProducerConnection",
    "ProducerData",
    "QueueData",
    "RegisterBrokerBody",
    "RemoteConnection",
    "ResetOffsetBody",
    "SubscriptionData",
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicList",
    "TopicOffset",
    "TopicRouteData",
    "TopicStatsTable",
    "UnlockBatchRequestBody",
]
