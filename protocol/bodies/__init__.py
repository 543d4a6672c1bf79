"""JSON bodies as typed, frozen dataclasses.

Every body class has ``to_json() -> bytes`` and ``from_json(data) -> Self``; parsing
raises :class:`~rocklet.protocol.errors.BodyError` on bad input and nothing else. Output
follows what Java's fastjson writes (members in alphabetical order, compact), and
parsing also accepts the C++ client's and ali-ons' dialects.
"""

from rocklet.protocol.bodies.cluster import ClusterInfo, GroupList, KVTable, TopicList
from rocklet.protocol.bodies.consumer import (
    ConsumerListBody,
    GetConsumerStatusBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
    ResetOffsetBody,
    UnlockBatchRequestBody,
)
from rocklet.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.register import RegisterBrokerBody
from rocklet.protocol.bodies.route import BrokerData, Perm, QueueData, TopicRouteData
from rocklet.protocol.bodies.running import (
    ConsumerConnection,
    ConsumerRunningInfo,
    ConsumeStatus,
    ProcessQueueInfo,
    ProducerConnection,
    RemoteConnection,
)
from rocklet.protocol.bodies.stats import ConsumeStats, OffsetWrapper, TopicOffset, TopicStatsTable
from rocklet.protocol.bodies.subscription_group import (
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from rocklet.protocol.bodies.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper

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
    "GetConsumerStatusBody",
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
