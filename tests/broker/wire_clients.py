"""Requests a hand-made client sends as a consumer: joining a group, committing offsets."""

from __future__ import annotations

from typing import Any

from rocklet.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    SubscriptionData,
)
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import UpdateConsumerOffsetRequestHeader

__all__ = ["commit_offset", "consumer_heartbeat", "consumer_heartbeat_body"]


def consumer_heartbeat_body(client_id: str, group: str, *topics: str) -> bytes:
    """The HEART_BEAT body of a clustering push consumer of ``group`` on ``topics``.

    Args:
        client_id: The client id it registers with.
        group: Its consumer group.
        *topics: The topics it subscribes, each with ``*``.
    """
    data = ConsumerData(
        group,
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        tuple(SubscriptionData(topic, "*") for topic in topics),
    )
    return HeartbeatData(client_id, consumer_data_set=(data,)).to_json()


def consumer_heartbeat(client_id: str, group: str, topic: str, **fields: Any) -> RemotingCommand:
    """HEART_BEAT of a clustering push consumer of ``group`` that subscribes all ``topic``.

    Args:
        client_id: The client id it registers with.
        group: Its consumer group.
        topic: The topic it subscribes (``*``).
        **fields: More :class:`RemotingCommand` fields (``language``, ``version``).
    """
    body = consumer_heartbeat_body(client_id, group, topic)
    return RemotingCommand(RequestCode.HEART_BEAT, body=body, **fields)


def commit_offset(group: str, topic: str, queue_id: int, offset: int) -> RemotingCommand:
    """UPDATE_CONSUMER_OFFSET as a request (answered once the broker has the offset)."""
    header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
    return RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=header.to_ext_fields())
