"""Admin headers: topics, subscription groups, connections and broker info (§3.15).

Admin requests without custom fields (GET_ALL_TOPIC_CONFIG, GET_BROKER_RUNTIME_INFO,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG, GET_BROKER_CLUSTER_INFO...) have no header class;
their answers are bodies (:mod:`rocklet.protocol.bodies`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rocklet.protocol.headers.base import INT32, NON_NEGATIVE_INT32, Header, wire

__all__ = [
    "MAX_QUEUE_NUMS",
    "CreateTopicRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "DeleteTopicRequestHeader",
    "GetBrokerConfigResponseHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetProducerConnectionListRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "QueryConsumeQueueRequestHeader",
    "QueryTopicConsumeByWhoRequestHeader",
]


#: Most read or write queues a topic may be given. RocketMQ sets no limit; a topic
#: with billions of queues would stall every request that visits its queues (stats,
#: routes, rebalancing), and real topics have a few to a few hundred.
MAX_QUEUE_NUMS: Final = 1024
_QUEUE_NUMS: Final = (0, MAX_QUEUE_NUMS)


@dataclass(frozen=True, slots=True)
class CreateTopicRequestHeader(Header):
    """UPDATE_AND_CREATE_TOPIC (17): create or update a topic on a broker.

    Java requires ``topicFilterType`` and ``order`` too; absent, they mean the
    defaults every tool sends (``SINGLE_TAG``, not ordered).
    """

    topic: str = wire("topic")
    default_topic: str = wire("defaultTopic")
    read_queue_nums: int = wire("readQueueNums", bounds=_QUEUE_NUMS)
    write_queue_nums: int = wire("writeQueueNums", bounds=_QUEUE_NUMS)
    perm: int = wire("perm", bounds=INT32)  #: :class:`rocklet.protocol.bodies.Perm` bits
    topic_filter_type: str = wire("topicFilterType", "SINGLE_TAG")
    topic_sys_flag: int = wire("topicSysFlag", 0, bounds=INT32)
    order: bool = wire("order", False)


@dataclass(frozen=True, slots=True)
class DeleteTopicRequestHeader(Header):
    """DELETE_TOPIC_IN_BROKER (215)."""

    topic: str = wire("topic")


@dataclass(frozen=True, slots=True)
class GetTopicStatsInfoRequestHeader(Header):
    """GET_TOPIC_STATS_INFO (202); the answer is a ``TopicStatsTable`` body."""

    topic: str = wire("topic")


@dataclass(frozen=True, slots=True)
class QueryTopicConsumeByWhoRequestHeader(Header):
    """QUERY_TOPIC_CONSUME_BY_WHO (300); the answer is a ``GroupList`` body."""

    topic: str = wire("topic")


@dataclass(frozen=True, slots=True)
class DeleteSubscriptionGroupRequestHeader(Header):
    """DELETE_SUBSCRIPTIONGROUP (207); ``removeOffset`` also drops its offsets."""

    group_name: str = wire("groupName")
    remove_offset: bool = wire("removeOffset", False)


@dataclass(frozen=True, slots=True)
class GetConsumerConnectionListRequestHeader(Header):
    """GET_CONSUMER_CONNECTION_LIST (203); the answer is a ``ConsumerConnection`` body."""

    consumer_group: str = wire("consumerGroup")


@dataclass(frozen=True, slots=True)
class GetProducerConnectionListRequestHeader(Header):
    """GET_PRODUCER_CONNECTION_LIST (204); the answer is a ``ProducerConnection`` body."""

    producer_group: str = wire("producerGroup")


@dataclass(frozen=True, slots=True)
class GetBrokerConfigResponseHeader(Header):
    """GET_BROKER_CONFIG (26) answer: the config's data version; the body is properties."""

    version: str = wire("version")


@dataclass(frozen=True, slots=True)
class QueryConsumeQueueRequestHeader(Header):
    """QUERY_CONSUME_QUEUE (321): ``count`` entries of a queue from queue offset ``index``.

    Java declares no field required; an absent number is 0, as there.
    """

    topic: str = wire("topic")
    queue_id: int = wire("queueId", 0, bounds=INT32)
    index: int = wire("index", 0)
    count: int = wire("count", 0, bounds=NON_NEGATIVE_INT32)
    consumer_group: str | None = wire("consumerGroup", None)
