"""Client connection and running-state bodies (admin codes 203, 204 and 307).

* GET_CONSUMER_CONNECTION_LIST (203) answer: ``ConsumerConnection`` (the group's
  channels, subscriptions and consume settings);
  GET_PRODUCER_CONNECTION_LIST (204) answer: ``ProducerConnection``.
* GET_CONSUMER_RUNNING_INFO (307), answered by a client: ``ConsumerRunningInfo``
  (properties, subscriptions, per-queue ``ProcessQueueInfo`` in ``mqTable`` keyed by
  MessageQueue, per-topic ``ConsumeStatus``, optional ``jstack``). The C++ client writes
  ``mqTable`` with unquoted object keys and its offsets as strings; with no queues it
  writes the invalid ``{"mqTable":},...``, which is repaired before parsing.

Members are those of the Java 4.9 classes (``common/protocol/body``), in fastjson order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Self

from rocklet.protocol.bodies._fields import (
    ScalarSpec,
    as_object,
    encode,
    get_enum,
    get_int,
    get_list,
    get_map,
    get_opt_str,
    get_str,
    parse_object,
    read_scalars,
    write_scalars,
)
from rocklet.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from rocklet.protocol.bodies.queue import MessageQueue, decode_mq_map, encode_mq_map
from rocklet.protocol.codes import LanguageCode
from rocklet.protocol.errors import BodyError

__all__ = [
    "ConsumeStatus",
    "ConsumerConnection",
    "ConsumerRunningInfo",
    "ProcessQueueInfo",
    "ProducerConnection",
    "RemoteConnection",
]

_PROCESS_QUEUE: Final[tuple[ScalarSpec, ...]] = (
    ("commit_offset", "commitOffset", int),
    ("cached_msg_min_offset", "cachedMsgMinOffset", int),
    ("cached_msg_max_offset", "cachedMsgMaxOffset", int),
    ("cached_msg_count", "cachedMsgCount", int),
    ("cached_msg_size_in_mib", "cachedMsgSizeInMiB", int),
    ("transaction_msg_min_offset", "transactionMsgMinOffset", int),
    ("transaction_msg_max_offset", "transactionMsgMaxOffset", int),
    ("transaction_msg_count", "transactionMsgCount", int),
    ("locked", "locked", bool),
    ("try_unlock_times", "tryUnlockTimes", int),
    ("last_lock_timestamp", "lastLockTimestamp", int),
    ("dropped", "droped", bool),  # sic: Java's getter is isDroped()
    ("last_pull_timestamp", "lastPullTimestamp", int),
    ("last_consume_timestamp", "lastConsumeTimestamp", int),
)
_CONSUME_STATUS: Final[tuple[ScalarSpec, ...]] = (
    ("pull_rt", "pullRT", float),
    ("pull_tps", "pullTPS", float),
    ("consume_rt", "consumeRT", float),
    ("consume_ok_tps", "consumeOKTPS", float),
    ("consume_failed_tps", "consumeFailedTPS", float),
    ("consume_failed_msgs", "consumeFailedMsgs", int),
)
#: What the C++ client writes when its mqTable is empty, and what it should have been.
_CPP_EMPTY_MQ_TABLE: Final = (b'{"mqTable":},', b'{"mqTable":{},')


@dataclass(frozen=True, slots=True)
class RemoteConnection:
    """One client channel (``body/Connection.java``)."""

    client_id: str
    client_addr: str
    language: str = LanguageCode.JAVA.name  #: a ``LanguageCode`` name
    version: int = 0  #: the client's ``MQVersion`` ordinal

    def to_dict(self) -> dict[str, Any]:
        """The JSON object."""
        return {
            "clientAddr": self.client_addr,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object (``language`` as a name or a code).

        Raises:
            BodyError: A member is missing or ill-typed.
        """
        what = "Connection"
        data = as_object(obj, what)
        language = get_str(data, "language", what, LanguageCode.OTHER.name)
        if language.isascii() and language.isdigit():
            language = get_enum(data, "language", what, LanguageCode).name
        return cls(
            client_id=get_str(data, "clientId", what),
            client_addr=get_str(data, "clientAddr", what, ""),
            language=language,
            version=get_int(data, "version", what, 0),
        )


def _connections(obj: Mapping[str, Any], what: str) -> tuple[RemoteConnection, ...]:
    return tuple(RemoteConnection.from_dict(c) for c in get_list(obj, "connectionSet", what))


@dataclass(frozen=True, slots=True)
class ProducerConnection:
    """The channels of a producer group."""

    connection_set: tuple[RemoteConnection, ...] = ()

    def to_json(self) -> bytes:
        """Serialize as ``{"connectionSet":[...]}``."""
        return encode({"connectionSet": [c.to_dict() for c in self.connection_set]})

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid ProducerConnection.
        """
        return cls(_connections(parse_object(data, cls.__name__), cls.__name__))


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """A consumer group's channels, subscriptions and settings."""

    connection_set: tuple[RemoteConnection, ...]
    subscription_table: Mapping[str, SubscriptionData]
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere

    def to_json(self) -> bytes:
        """Serialize as Java does (enum names)."""
        return encode(
            {
                "connectionSet": [c.to_dict() for c in self.connection_set],
                "consumeFromWhere": self.consume_from_where.name,
                "consumeType": self.consume_type.name,
                "messageModel": self.message_model.name,
                "subscriptionTable": {
                    topic: sub.to_dict() for topic, sub in self.subscription_table.items()
                },
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid ConsumerConnection.
        """
        what = cls.__name__
        obj = parse_object(data, what)
        subs = get_map(obj, "subscriptionTable", what)
        return cls(
            connection_set=_connections(obj, what),
            subscription_table={t: SubscriptionData.from_dict(s) for t, s in subs.items()},
            consume_type=get_enum(obj, "consumeType", what, ConsumeType),
            message_model=get_enum(obj, "messageModel", what, MessageModel),
            consume_from_where=get_enum(obj, "consumeFromWhere", what, ConsumeFromWhere),
        )


@dataclass(frozen=True, slots=True)
class ProcessQueueInfo:
    """A consumer's local state for one queue (``body/ProcessQueueInfo.java``)."""

    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mib: int = 0
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    dropped: bool = False
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON object."""
        return write_scalars(self, _PROCESS_QUEUE)

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object; absent members are 0/false, numbers may be strings.

        Raises:
            BodyError: Not an object or a member is ill-typed.
        """
        return cls(**read_scalars(obj, "ProcessQueueInfo", _PROCESS_QUEUE))


@dataclass(frozen=True, slots=True)
class ConsumeStatus:
    """A consumer's rates for one topic (``body/ConsumeStatus.java``)."""

    pull_rt: float = 0.0
    pull_tps: float = 0.0
    consume_rt: float = 0.0
    consume_ok_tps: float = 0.0
    consume_failed_tps: float = 0.0
    consume_failed_msgs: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON object."""
        return write_scalars(self, _CONSUME_STATUS)

    @classmethod
    def from_dict(cls, obj: object) -> Self:
        """Read the JSON object; absent members are 0.

        Raises:
            BodyError: Not an object or a member is not a number.
        """
        return cls(**read_scalars(obj, "ConsumeStatus", _CONSUME_STATUS))


def _properties(obj: Mapping[str, Any], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in get_map(obj, "properties", what).items():
        if isinstance(value, bool):  # java.util.Properties holds strings; be forgiving
            out[key] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            out[key] = str(value)
        elif value is not None:
            raise BodyError(f"{what} property {key!r} must be a string, got {value!r}")
    return out


@dataclass(frozen=True, slots=True)
class ConsumerRunningInfo:
    """A consumer's self-description (``body/ConsumerRunningInfo.java``)."""

    properties: Mapping[str, str] = field(default_factory=dict)
    subscription_set: tuple[SubscriptionData, ...] = ()
    mq_table: Mapping[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    status_table: Mapping[str, ConsumeStatus] = field(default_factory=dict)
    jstack: str | None = None

    def to_json(self) -> bytes:
        """Serialize as Java does (MessageQueue keys unquoted, ``jstack`` omitted if None)."""
        body: dict[str, Any] = {}
        if self.jstack is not None:
            body["jstack"] = self.jstack
        body["mqTable"] = encode_mq_map(self.mq_table, ProcessQueueInfo.to_dict)
        body["properties"] = dict(self.properties)
        body["statusTable"] = {t: s.to_dict() for t, s in sorted(self.status_table.items())}
        body["subscriptionSet"] = [s.to_dict() for s in self.subscription_set]
        return encode(body)

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse a Java or C++ body.

        Raises:
            BodyError: Not a valid ConsumerRunningInfo.
        """
        what = cls.__name__
        bad, good = _CPP_EMPTY_MQ_TABLE
        if data.startswith(bad):
            data = good + data[len(bad) :]
        obj = parse_object(data, what, object_keys=True)
        statuses = get_map(obj, "statusTable", what)
        subs = get_list(obj, "subscriptionSet", what)
        return cls(
            properties=_properties(obj, what),
            subscription_set=tuple(SubscriptionData.from_dict(s) for s in subs),
            mq_table=decode_mq_map(obj, "mqTable", what, ProcessQueueInfo.from_dict),
            status_table={t: ConsumeStatus.from_dict(s) for t, s in statuses.items()},
            jstack=get_opt_str(obj, "jstack", what),
        )
