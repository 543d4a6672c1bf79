"""Consumer-side headers: send-back, offsets, queue metadata and group management.

Covers docs/protocol.md (CONSUMER_SEND_MSG_BACK), §3.9-§3.11 (UNREGISTER_CLIENT,
GET_CONSUMER_LIST_BY_GROUP, offsets), §3.13 (NOTIFY_CONSUMER_IDS_CHANGED) and §3.16
(broker-to-client requests), plus the admin consume-stats queries.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocklet.protocol.headers.base import (
    INT32,
    NON_NEGATIVE_INT32,
    NON_NEGATIVE_INT64,
    Header,
    wire,
)

__all__ = [
    "ConsumeMessageDirectlyResultRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "GetConsumerStatusRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetEarliestMsgStoretimeResponseHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "ResetOffsetRequestHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "UnregisterClientRequestHeader",
    "UpdateConsumerOffsetRequestHeader",
]


@dataclass(frozen=True, slots=True)
class ConsumerSendMsgBackRequestHeader(Header):
    """``ConsumerSendMsgBackRequestHeader``: a message the consumer failed to process.

    The C++ client sends only ``offset``, ``group`` and ``delayLevel`` (always 0);
    Java adds the origin fields and ``maxReconsumeTimes``, which a broker honours only
    from client version V3_4_9 (121) on.
    """

    #: commit-log offset of the failed message
    offset: int = wire("offset", bounds=NON_NEGATIVE_INT64)
    group: str = wire("group")
    #: 0 = broker picks 3 + reconsumeTimes; < 0 = dead letter; past the table = its last
    delay_level: int = wire("delayLevel", bounds=INT32)
    origin_msg_id: str | None = wire("originMsgId", None)
    origin_topic: str | None = wire("originTopic", None)
    unit_mode: bool = wire("unitMode", False)
    max_reconsume_times: int | None = wire("maxReconsumeTimes", None, bounds=INT32)


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetRequestHeader(Header):
    """QUERY_CONSUMER_OFFSET (14): a group's committed offset for a queue."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId", bounds=NON_NEGATIVE_INT32)


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetResponseHeader(Header):
    """The committed offset."""

    offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class UpdateConsumerOffsetRequestHeader(Header):
    """UPDATE_CONSUMER_OFFSET (15): commit a group's offset for a queue."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId", bounds=NON_NEGATIVE_INT32)
    #: ali-ons commits -1 ("nothing consumed yet") for its retry queues; RocketMQ stores
    #: it and a later query reads it as no offset, so -1 is the one negative accepted.
    commit_offset: int = wire("commitOffset", bounds=(-1, NON_NEGATIVE_INT64[1]))


@dataclass(frozen=True, slots=True)
class GetMaxOffsetRequestHeader(Header):
    """GET_MAX_OFFSET (30): the next queue offset to be written."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId", bounds=NON_NEGATIVE_INT32)


@dataclass(frozen=True, slots=True)
class GetMaxOffsetResponseHeader(Header):
    """The queue's max offset."""

    offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class GetMinOffsetRequestHeader(Header):
    """GET_MIN_OFFSET (31): the smallest queue offset still stored."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId", bounds=NON_NEGATIVE_INT32)


@dataclass(frozen=True, slots=True)
class GetMinOffsetResponseHeader(Header):
    """The queue's min offset."""

    offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class SearchOffsetRequestHeader(Header):
    """SEARCH_OFFSET_BY_TIMESTAMP (29): the queue offset for a store time."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId", bounds=NON_NEGATIVE_INT32)
    timestamp: int = wire("timestamp")  #: epoch milliseconds


@dataclass(frozen=True, slots=True)
class SearchOffsetResponseHeader(Header):
    """The queue offset found."""

    offset: int = wire("offset")


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeRequestHeader(Header):
    """GET_EARLIEST_MSG_STORETIME (32): store time of a queue's first message."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId", bounds=NON_NEGATIVE_INT32)


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeResponseHeader(Header):
    """The store time, epoch milliseconds."""

    timestamp: int = wire("timestamp")


@dataclass(frozen=True, slots=True)
class GetConsumerListByGroupRequestHeader(Header):
    """GET_CONSUMER_LIST_BY_GROUP (38); the answer is a ``ConsumerListBody``."""

    consumer_group: str = wire("consumerGroup")


@dataclass(frozen=True, slots=True)
class UnregisterClientRequestHeader(Header):
    """UNREGISTER_CLIENT (35): a client leaves a producer and/or consumer group.

    The C++ client sends one request per group with the other group as ``""``; Java
    leaves the other key out. Treat ``None`` and ``""`` alike.
    """

    client_id: str = wire("clientID")
    producer_group: str | None = wire("producerGroup", None)
    consumer_group: str | None = wire("consumerGroup", None)


@dataclass(frozen=True, slots=True)
class NotifyConsumerIdsChangedRequestHeader(Header):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker to consumer: rebalance this group now."""

    consumer_group: str = wire("consumerGroup")


@dataclass(frozen=True, slots=True)
class ResetOffsetRequestHeader(Header):
    """RESET_CONSUMER_CLIENT_OFFSET (220) / INVOKE_BROKER_TO_RESET_OFFSET (222)."""

    topic: str = wire("topic")
    group: str = wire("group")
    timestamp: int = wire("timestamp")  #: reset to the offsets at this store time, ms
    is_force: bool = wire("isForce")


@dataclass(frozen=True, slots=True)
class GetConsumerRunningInfoRequestHeader(Header):
    """GET_CONSUMER_RUNNING_INFO (307), broker to client; answered with a body."""

    consumer_group: str = wire("consumerGroup")
    client_id: str = wire("clientId")
    jstack_enable: bool = wire("jstackEnable", False)


@dataclass(frozen=True, slots=True)
class GetConsumeStatsRequestHeader(Header):
    """GET_CONSUME_STATS (208): a group's progress, optionally for one topic."""

    consumer_group: str = wire("consumerGroup")
    topic: str | None = wire("topic", None)


@dataclass(frozen=True, slots=True)
class GetConsumerStatusRequestHeader(Header):
    """GET_CONSUMER_STATUS_FROM_CLIENT (221) / INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223)."""

    topic: str = wire("topic")
    group: str = wire("group")
    client_addr: str | None = wire("clientAddr", None)


@dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyResultRequestHeader(Header):
    """CONSUME_MESSAGE_DIRECTLY (309), broker to client: consume this one message."""

    consumer_group: str = wire("consumerGroup")
    client_id: str | None = wire("clientId", None)
    msg_id: str | None = wire("msgId", None)
    broker_name: str | None = wire("brokerName", None)
