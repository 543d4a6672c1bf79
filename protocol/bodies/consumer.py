"""Consumer-group bodies: member lists, queue locks and offset resets (§3.10, §3.14, §3.16).

* GET_CONSUMER_LIST_BY_GROUP (38) answer: ``{"consumerIdList":["cid1","cid2"]}``.
* LOCK_BATCH_MQ (41) / UNLOCK_BATCH_MQ (42) request:
  ``{"clientId":"…","consumerGroup":"…","mqSet":[{"brokerName":"b","queueId":0,"topic":"T"}]}``;
  LOCK answer: ``{"lockOKMQSet":[…]}``.
* RESET_CONSUMER_CLIENT_OFFSET (220): Java writes ``offsetTable`` as a map keyed by
  MessageQueue (fastjson object keys), while the C++ client reads a list of
  ``{"brokerName","queueId","topic","offset"}`` objects; both are read, either written.
* GET_CONSUMER_STATUS_FROM_CLIENT (221) answer and INVOKE_BROKER_TO_GET_CONSUMER_STATUS
  (223) answer: ``GetConsumerStatusBody``, a client's offsets in ``messageQueueTable``
  (``{<MessageQueue>:offset}``) and, in the broker's answer, every asked client's in
  ``consumerTable`` (``{"clientId":{<MessageQueue>:offset}}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Self

from rocklet.protocol.bodies._fields import (
    as_object,
    encode,
    get_int,
    get_list,
    get_map,
    get_str,
    get_str_list,
    parse_object,
    to_int,
)
from rocklet.protocol.bodies.queue import MessageQueue, decode_mq_map, encode_mq_map
from rocklet.protocol.errors import BodyError

__all__ = [
    "ConsumerListBody",
    "GetConsumerStatusBody",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "ResetOffsetBody",
    "UnlockBatchRequestBody",
]

#: Java's ``long`` and ``int``: an offset and a queue id must fit them.
_LONG: Final = range(-(1 << 63), 1 << 63)
_INT: Final = range(-(1 << 31), 1 << 31)


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


def _offset_table(obj: Mapping[str, Any], key: str, what: str) -> dict[MessageQueue, int]:
    """A ``{<MessageQueue>:offset}`` member, each offset a Java long, each queue id an int."""
    table = decode_mq_map(obj, key, what, lambda v: to_int(v, f"{what} offset"))
    for mq, offset in table.items():
        if offset not in _LONG:
            raise BodyError(f"{what} offset of {mq.topic}/{mq.queue_id} does not fit a long")
        if mq.queue_id not in _INT:
            raise BodyError(f"{what} queueId {mq.queue_id} does not fit an int")
    return table


@dataclass(frozen=True, slots=True)
class GetConsumerStatusBody:
    """Consume offsets held by clients in memory (``body/GetConsumerStatusBody.java``).

    A client answering 221 fills ``message_queue_table``; the broker answering 223 fills
    ``consumer_table``, one entry per client that answered.
    """

    message_queue_table: Mapping[MessageQueue, int] = field(default_factory=dict)
    consumer_table: Mapping[str, Mapping[MessageQueue, int]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """Serialize as fastjson does (MessageQueue keys unquoted, members sorted)."""
        return encode(
            {
                "consumerTable": {
                    client: encode_mq_map(table, lambda off: off)
                    for client, table in sorted(self.consumer_table.items())
                },
                "messageQueueTable": encode_mq_map(self.message_queue_table, lambda off: off),
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the body.

        Raises:
            BodyError: Not a valid GetConsumerStatusBody (an offset outside a Java long
                or a queue id outside an int included).
        """
        what = cls.__name__
        obj = parse_object(data, what, object_keys=True)
        clients = get_map(obj, "consumerTable", what)
        return cls(
            message_queue_table=_offset_table(obj, "messageQueueTable", what),
            # Each client's table is a member of consumerTable, read the same way.
            consumer_table={c: _offset_table(clients, c, f"{what} consumerTable") for c in clients},
        )
