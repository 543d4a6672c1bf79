"""HEART_BEAT (34) bodies: who a client is and which groups and subscriptions it has.

Two dialects arrive (docs/protocol.md):

* **C++ 1.2** (jsoncpp): enums as integers (ordinals), ``subVersion`` as a string,
  empty sets omitted rather than ``[]``, no ``classFilterMode``/``expressionType``/
  ``unitMode``, a trailing newline, and a ``codeSet`` of ``atoi(tag)`` (0 for normal
  tags), which must never be used for filtering.
* **Java and ali-ons** (fastjson / JSON.stringify): enum names, numeric ``subVersion``,
  every member present.

Both parse into the same classes. Serialization uses the Java form.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Self

from rocklet.protocol.bodies._fields import (
    as_object,
    encode,
    get_bool,
    get_enum,
    get_int,
    get_list,
    get_opt_str,
    get_str,
    get_str_list,
    parse_object,
    to_int,
)

__all__ = [
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "HeartbeatData",
    "MessageModel",
    "ProducerData",
    "SubscriptionData",
]

#: ``SubscriptionData.SUB_ALL``: the expression that matches every tag.
SUB_ALL = "*"


class ConsumeType(IntEnum):
    """How a consumer gets messages (``heartbeat/ConsumeType.java``); values are ordinals."""

    CONSUME_ACTIVELY = 0  #: pull consumer
    CONSUME_PASSIVELY = 1  #: push consumer


class MessageModel(IntEnum):
    """Delivery model of a consumer group (``heartbeat/MessageModel.java``)."""

    BROADCASTING = 0  #: every consumer gets every message; offsets kept by the client
    CLUSTERING = 1  #: each message goes to one consumer of the group


class ConsumeFromWhere(IntEnum):
    """Where a new consumer group starts (``consumer/ConsumeFromWhere.java``)."""

    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1  #: deprecated
    CONSUME_FROM_MIN_OFFSET = 2  #: deprecated
    CONSUME_FROM_MAX_OFFSET = 3  #: deprecated
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """One topic subscription (``heartbeat/SubscriptionData.java``)."""

    topic: str
    sub_string: str = SUB_ALL
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False
    filter_class_source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The Java JSON object, members in fastjson's order; null members omitted."""
        out: dict[str, Any] = {
            "classFilterMode": self.class_filter_mode,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
        }
        if self.filter_class_source is not None:
            out["filterClassSource"] = self.filter_class_source
        out["subString"] = self.sub_string
        out["subVersion"] = self.sub_version
        out["tagsSet"] = list(self.tags_set)
        out["topic"] = self.topic
        return out

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read either dialect.

        Raises:
            BodyError: ``topic`` is missing or a member is ill-typed.
        """
        what = "SubscriptionData"
        data = as_object(obj, what)
        codes = tuple(
            to_int(c, "SubscriptionData codeSet item") for c in get_list(data, "codeSet", what)
        )
        return cls(
            topic=get_str(data, "topic", what),
            sub_string=get_str(data, "subString", what, SUB_ALL),
            tags_set=get_str_list(data, "tagsSet", what),
            code_set=codes,
            sub_version=get_int(data, "subVersion", what, 0),
            expression_type=get_str(data, "expressionType", what, "TAG"),
            class_filter_mode=get_bool(data, "classFilterMode", what, False),
            filter_class_source=get_opt_str(data, "filterClassSource", what),
        )


@dataclass(frozen=True, slots=True)
class ProducerData:
    """A producer group the client belongs to."""

    group_name: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON object."""
        return {"groupName": self.group_name}

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object.

        Raises:
            BodyError: ``groupName`` is missing.
        """
        return cls(get_str(as_object(obj, "ProducerData"), "groupName", "ProducerData"))


@dataclass(frozen=True, slots=True)
class ConsumerData:
    """A consumer group the client belongs to, with its subscriptions."""

    group_name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscription_data_set: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The Java JSON object (enum names), members in fastjson's order."""
        return {
            "consumeFromWhere": self.consume_from_where.name,
            "consumeType": self.consume_type.name,
            "groupName": self.group_name,
            "messageModel": self.message_model.name,
            "subscriptionDataSet": [s.to_dict() for s in self.subscription_data_set],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read either dialect (enum names or ordinals).

        Raises:
            BodyError: A member is missing, ill-typed or an unknown enum value.
        """
        what = "ConsumerData"
        data = as_object(obj, what)
        subs = get_list(data, "subscriptionDataSet", what)
        return cls(
            group_name=get_str(data, "groupName", what),
            consume_type=get_enum(data, "consumeType", what, ConsumeType),
            message_model=get_enum(data, "messageModel", what, MessageModel),
            consume_from_where=get_enum(data, "consumeFromWhere", what, ConsumeFromWhere),
            subscription_data_set=tuple(SubscriptionData.from_dict(s) for s in subs),
            unit_mode=get_bool(data, "unitMode", what, False),
        )


@dataclass(frozen=True, slots=True)
class HeartbeatData:
    """The HEART_BEAT body (``heartbeat/HeartbeatData.java``)."""

    client_id: str
    producer_data_set: tuple[ProducerData, ...] = ()
    consumer_data_set: tuple[ConsumerData, ...] = ()

    def to_json(self) -> bytes:
        """Serialize in the Java form.

        Returns:
            The body bytes.
        """
        return encode(
            {
                "clientID": self.client_id,
                "consumerDataSet": [c.to_dict() for c in self.consumer_data_set],
                "producerDataSet": [p.to_dict() for p in self.producer_data_set],
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse a C++, Java or ali-ons heartbeat body.

        Raises:
            BodyError: The body is not a valid HeartbeatData.
        """
        what = "HeartbeatData"
        obj = parse_object(data, what)
        return cls(
            client_id=get_str(obj, "clientID", what),
            producer_data_set=tuple(
                ProducerData.from_dict(p) for p in get_list(obj, "producerDataSet", what)
            ),
            consumer_data_set=tuple(
                ConsumerData.from_dict(c) for c in get_list(obj, "consumerDataSet", what)
            ),
        )
