"""Consumer-group bodies: member lists, queue locks and offset resets (§3.10, §3.14, §3.16).

* GET_CONSUMER_LIST_BY_GROUP (38) answer: ``{"consumerIdList":["cid1","cid2"]}``.
* LOCK_BATCH_MQ (41) / UNLOCK_BATCH_MQ (42) request:
  ``{"clientId":"…","consumerGroup":"…","mqSet":[{"brokerName":"b","queueId":0,"topic":"T"}]}``;
  LOCK answer: ``{"lockOKMQSet":[…]}``.
* RESET_CONSUMER_CLIENT_OFFSET (220): Java writes ``offsetTable`` as a map keyed by
  MessageQueue (fastjson object keys), while the C++ client reads a list of
  ``{"brokerName","queueId","topic","offset"}`` objects; both are read, either written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from rocklet.protocol.bodies._fields import (
    as_object,
    encode,
    get_int,
    get_list,
    get_str,
    get_str_list,
    parse_object,
    to_int,
)
from rocklet.protocol.bodies.queue import MessageQueue, decode_mq_map, encode_mq_map

__all__ = [
    "ConsumerListBody",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "ResetOffsetBody",
    "UnlockBatchRequestBody",
]


def _mq_list(obj: Mapping[str, Any], key: str, what: str) -> tuple[MessageQueue, ...]:
    return tuple(MessageQueue.from_dict(mq) for mq in get_list(obj, key, what))


def _lock_json(consumer_group: str, client_id: str, mq_set: tuple[MessageQueue, ...]) -> bytes:
    return encode(
        {
            "clientId": client_id,
            "consumerGroup": consumer_group,
            "mqSet": [mq.to_dict() for mq in mq_set],
        }
    )


@dataclass(frozen=True, slots=True)
class ConsumerListBody:
    """The client ids of a consumer group."""

    consumer_id_list: tuple[str, ...] = ()

    def to_json(self) -> bytes:
        """Serialize as ``{"consumerIdList":[...]}``."""
        return encode({"consumerIdList": list(self.consumer_id_list)})

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid consumer list.
        """
        obj = parse_object(data, "ConsumerListBody")
        return cls(get_str_list(obj, "consumerIdList", "ConsumerListBody"))


@dataclass(frozen=True, slots=True)
class LockBatchRequestBody:
    """Queues an orderly consumer wants to own."""

    consumer_group: str
    client_id: str
    mq_set: tuple[MessageQueue, ...] = ()

    def to_json(self) -> bytes:
        """Serialize, members in fastjson's order."""
        return _lock_json(self.consumer_group, self.client_id, self.mq_set)

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body (``queueId`` a number or a decimal string).

        Raises:
            BodyError: Not a valid lock request.
        """
        what = cls.__name__
        obj = parse_object(data, what)
        return cls(
            consumer_group=get_str(obj, "consumerGroup", what),
            client_id=get_str(obj, "clientId", what),
            mq_set=_mq_list(obj, "mqSet", what),
        )


@dataclass(frozen=True, slots=True)
class UnlockBatchRequestBody:
    """Queues an orderly consumer gives up; same shape as the lock request."""

    consumer_group: str
    client_id: str
    mq_set: tuple[MessageQueue, ...] = ()

    def to_json(self) -> bytes:
        """Serialize, members in fastjson's order."""
        return _lock_json(self.consumer_group, self.client_id, self.mq_set)

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid unlock request.
        """
        lock = LockBatchRequestBody.from_json(data)
        return cls(lock.consumer_group, lock.client_id, lock.mq_set)


@dataclass(frozen=True, slots=True)
class LockBatchResponseBody:
    """The subset of requested queues the client now owns."""

    lock_ok_mq_set: tuple[MessageQueue, ...] = ()

    def to_json(self) -> bytes:
        """Serialize as ``{"lockOKMQSet":[...]}``."""
        return encode({"lockOKMQSet": [mq.to_dict() for mq in self.lock_ok_mq_set]})

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid lock answer.
        """
        what = cls.__name__
        return cls(_mq_list(parse_object(data, what), "lockOKMQSet", what))


def _reset_entry(item: object) -> tuple[MessageQueue, int]:
    entry = as_object(item, "ResetOffsetBody entry")
    return MessageQueue.from_dict(entry), get_int(entry, "offset", "ResetOffsetBody entry")


@dataclass(frozen=True, slots=True)
class ResetOffsetBody:
    """New consume offsets the broker tells a client to jump to."""

    offset_table: Mapping[MessageQueue, int] = field(default_factory=dict)

    def to_json(self, *, list_form: bool = False) -> bytes:
        """Serialize in Java's map form, or the list form the C++ client reads.

        Args:
            list_form: Write ``offsetTable`` as a list of objects with an ``offset``
                member (``ResetOffsetBody::Decode`` in rocketmq-client-cpp).

        Returns:
            The body bytes.
        """
        if list_form:
            entries = [
                {**mq.to_dict(), "offset": self.offset_table[mq]}
                for mq in sorted(self.offset_table)
            ]
            return encode({"offsetTable": entries})
        return encode({"offsetTable": encode_mq_map(self.offset_table, lambda off: off)})

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse either form.

        Raises:
            BodyError: Not a valid ResetOffsetBody.
        """
        what = cls.__name__
        obj = parse_object(data, what, object_keys=True)
        if isinstance(obj.get("offsetTable"), list):
            return cls(dict(_reset_entry(item) for item in get_list(obj, "offsetTable", what)))
        return cls(decode_mq_map(obj, "offsetTable", what, lambda v: to_int(v, f"{what} offset")))
