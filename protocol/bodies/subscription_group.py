"""``SubscriptionGroupConfig``: a consumer group's broker-side settings.

It is the body of UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), an entry of
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) and of ``config/subscriptionGroup.json``. Field
names and defaults follow RocketMQ 4.9's ``SubscriptionGroupConfig``.
``SubscriptionGroupWrapper`` (``{"dataVersion":{...},"subscriptionGroupTable":{...}}``)
is the code-201 answer and the file's whole content.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from rocklet.protocol.bodies._fields import (
    as_object,
    encode,
    get_bool,
    get_int,
    get_map,
    get_str,
    parse_object,
)
from rocklet.protocol.bodies.topic import DataVersion

__all__ = ["SubscriptionGroupConfig", "SubscriptionGroupWrapper"]

_WHAT = "SubscriptionGroupConfig"


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """Settings of one consumer group.

    Attributes:
        group_name: The group.
        consume_enable: Whether pulls are served.
        consume_from_min_enable: Start a new group at the queue's minimum offset.
        consume_broadcast_enable: Whether broadcasting consumers are allowed.
        retry_queue_nums: Queues of ``%RETRY%<group>`` (1).
        retry_max_times: Deliveries before a message goes to ``%DLQ%<group>`` (16).
        broker_id: Broker id to pull from normally (0, the master).
        which_broker_when_consume_slowly: Broker id suggested when a consumer lags (1).
        notify_consumer_ids_changed_enable: Send NOTIFY_CONSUMER_IDS_CHANGED on change.
    """

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON object, members in fastjson's alphabetical order."""
        return {
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "groupName": self.group_name,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object; absent members take RocketMQ's defaults.

        Raises:
            BodyError: Not an object, no ``groupName``, or a member of the wrong type.
        """
        d = as_object(obj, _WHAT)
        return cls(
            group_name=get_str(d, "groupName", _WHAT),
            consume_enable=get_bool(d, "consumeEnable", _WHAT, True),
            consume_from_min_enable=get_bool(d, "consumeFromMinEnable", _WHAT, True),
            consume_broadcast_enable=get_bool(d, "consumeBroadcastEnable", _WHAT, True),
            retry_queue_nums=get_int(d, "retryQueueNums", _WHAT, 1),
            retry_max_times=get_int(d, "retryMaxTimes", _WHAT, 16),
            broker_id=get_int(d, "brokerId", _WHAT, 0),
            which_broker_when_consume_slowly=get_int(d, "whichBrokerWhenConsumeSlowly", _WHAT, 1),
            notify_consumer_ids_changed_enable=get_bool(
                d, "notifyConsumerIdsChangedEnable", _WHAT, True
            ),
        )

    def to_json(self) -> bytes:
        """Encode as a request body."""
        return encode(self.to_dict())

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Decode a request body.

        Raises:
            BodyError: The body is not a valid SubscriptionGroupConfig.
        """
        return cls.from_dict(parse_object(data, _WHAT))


@dataclass(frozen=True, slots=True)
class SubscriptionGroupWrapper:
    """Every subscription group of a broker, with the table's version."""

    subscription_group_table: Mapping[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> bytes:
        """Serialize as the GET_ALL_SUBSCRIPTIONGROUP_CONFIG body."""
        table = {n: c.to_dict() for n, c in self.subscription_group_table.items()}
        return encode({"dataVersion": self.data_version.to_dict(), "subscriptionGroupTable": table})

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid SubscriptionGroupWrapper.
        """
        what = cls.__name__
        obj = parse_object(data, what)
        groups = get_map(obj, "subscriptionGroupTable", what)
        return cls(
            {n: SubscriptionGroupConfig.from_dict(c) for n, c in groups.items()},
            DataVersion.from_dict(get_map(obj, "dataVersion", what)),
        )
