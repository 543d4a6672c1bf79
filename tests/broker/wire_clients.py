"""Requests a hand-made client sends to join a broker as a consumer (broker tests)."""

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

__all__ = ["consumer_heartbeat"]


def consumer_heartbeat(client_id: str, group: str, topic: str, **fields: Any) -> RemotingCommand:
    """HEART_BEAT of a clustering push consumer of ``group`` that subscribes all ``topic``.

    Args:
        client_id: The client id it registers with.
        group: Its consumer group.
        topic: The topic it subscribes (``*``).
        **fields: More :class:`RemotingCommand` fields (``language``, ``version``).
    """
    data = ConsumerData(
        group,
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        (SubscriptionData(topic, "*"),),
    )
    beat = HeartbeatData(client_id, consumer_data_set=(data,))
    return RemotingCommand(RequestCode.HEART_BEAT, body=beat.to_json(), **fields)
