r"""Message-trace records: the bodies clients send to the trace topic.

A client with message trace on (Java's ``enableMsgTrace``) reports each send, each
consume and each transaction end as a *trace record* and sends batches of them as
ordinary messages to the trace topic (``RMQ_SYS_TRACE_TOPIC`` unless configured),
keyed by the traced message's ids so that a query by key finds them. Admin tools
(``mqadmin queryMsgTraceById``, the dashboard) read them back.

A body is records separated by ``\x02``; a record is fields separated by ``\x01``,
its first field the record type. The layouts (RocketMQ 4.9's ``TraceDataEncoder``):

================  ============================================================================
type              fields after the type
================  ============================================================================
``Pub``           timestamp, region, group, topic, msgId, tags, keys, store host, body length,
                  cost ms, message type, [offset msgId], success, [client host]
``SubBefore``     timestamp, region, group, request id, msgId, retry times, keys
``SubAfter``      request id, msgId, cost ms, success, keys, [context code,
                  [timestamp, group]]
``EndTransaction``  timestamp, region, group, topic, msgId, tags, keys, store host,
                  message type, transaction id, transaction state, from a check
================  ============================================================================

(``SubAfter`` from clients before 4.9 lacks its timestamp and group.) Records that do
not parse are skipped, not fatal: the trace topic is written by every client version
and read by people looking for something else.

:func:`encode_trace_records` writes records as RocketMQ 4.9.4's client does
(``TraceDataEncoder.encoderFromContextBean``): a ``Pub`` with 14 fields (15 when it
names a client host), a ``SubAfter`` with 9, each record ended by ``\x02``. Booleans
are ``true`` / ``false``; a field the traced message lacks (tags, keys) is written as
Java writes a null, ``null``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "DEFAULT_TRACE_TOPIC",
    "FIELD_SEPARATOR",
    "NULL_FIELD",
    "RECORD_SEPARATOR",
    "ConsumeReturnType",
    "TraceMessageType",
    "TraceRecord",
    "decode_trace_body",
    "encode_trace_records",
]

#: Where traces go unless a client names another topic (``TopicValidator.RMQ_SYS_TRACE_TOPIC``).
DEFAULT_TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
#: How Java's encoder writes a missing field (``StringBuilder.append(null)``).
NULL_FIELD: Final = "null"

#: Between the fields of a record (Java's ``CONTENT_SPLITOR``).
FIELD_SEPARATOR: Final = "\x01"
#: Between records (Java's ``FIELD_SPLITOR``).
RECORD_SEPARATOR: Final = "\x02"


class TraceMessageType(enum.IntEnum):
    """A ``Pub`` or ``EndTransaction`` record's message type (Java's ``MessageType`` ordinal)."""

    NORMAL = 0  #: Normal_Msg
    TRANS_HALF = 1  #: Trans_Msg_Half: a transaction's half message
    TRANS_COMMIT = 2  #: Trans_msg_Commit: what EndTransaction records carry
    DELAY = 3  #: Delay_Msg: sent with a delay level


class ConsumeReturnType(enum.IntEnum):
    """A ``SubAfter`` record's context code: how the listener ended (Java's ordinal)."""

    SUCCESS = 0
    TIME_OUT = 1  #: it took longer than the consume timeout
    EXCEPTION = 2  #: it raised
    RETURN_NULL = 3  #: it returned no verdict
    FAILED = 4  #: it asked for a later retry (or to suspend the queue)


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One trace record; fields a type does not carry are left at their defaults.

    Attributes:
        type: ``Pub``, ``SubBefore``, ``SubAfter`` or ``EndTransaction``.
        msg_id: The traced message's client msgId.
        group: The producer or consumer group ("" when the record has none).
        timestamp: When it happened, epoch ms (0 when the record has none).
        cost_ms: How long the send or the consume took.
        success: Whether it succeeded.
        topic: The traced message's topic (Pub, EndTransaction).
        tags: Its tags.
        keys: Its keys (space-separated, as sent).
        store_host: The broker that stored it (Pub, EndTransaction).
        offset_msg_id: Its offset msgId (Pub from 4.x clients).
        region: The broker's region.
        request_id: Ties a SubBefore to its SubAfter.
        retry_times: Delivery attempts before this one (SubBefore).
        body_length: Body size, bytes (Pub).
        client_host: The sending client's host, when the record carries it.
        transaction_state: COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOW (EndTransaction).
        msg_type: A :class:`TraceMessageType` value (Pub, EndTransaction).
        context_code: A :class:`ConsumeReturnType` value (SubAfter).
        transaction_id: The transaction's id (EndTransaction).
        from_transaction_check: Whether the end answered a broker's check-back
            (EndTransaction).
    """

    type: str
    msg_id: str
    group: str = ""
    timestamp: int = 0
    cost_ms: int = 0
    success: bool = True
    topic: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    offset_msg_id: str = ""
    region: str = ""
    request_id: str = ""
    retry_times: int = 0
    body_length: int = 0
    client_host: str = ""
    transaction_state: str = ""
    msg_type: int = 0
    context_code: int = 0
    transaction_id: str = ""
    from_transaction_check: bool = False


def _is_true(text: str) -> bool:
    return text.strip().lower() == "true"  # Java's Boolean.parseBoolean


def _stored(f: list[str]) -> dict[str, Any]:
    """The fields a Pub and an EndTransaction record share, in the same places."""
    return {
        "group": f[3],
        "timestamp": int(f[1]),
        "region": f[2],
        "topic": f[4],
        "tags": f[6],
        "keys": f[7],
        "store_host": f[8],
    }


def _pub(f: list[str]) -> TraceRecord:
    # f[11] is the message type; 13 fields end with success, 14 with the offset msgId
    # and success, 15 or more add the client host.
    offset_msg_id, success, client = "", f[12], ""
    if len(f) >= 14:
        offset_msg_id, success = f[12], f[13]
    if len(f) >= 15:
        client = f[14]
    return TraceRecord(
        "Pub",
        f[5],
        **_stored(f),
        body_length=int(f[9]),
        cost_ms=int(f[10]),
        msg_type=int(f[11]),
        offset_msg_id=offset_msg_id,
        success=_is_true(success),
        client_host=client,
    )


def _sub_before(f: list[str]) -> TraceRecord:
    return TraceRecord(
        "SubBefore",
        f[5],
        group=f[3],
        timestamp=int(f[1]),
        region=f[2],
        request_id=f[4],
        retry_times=int(f[6]),
        keys=f[7],
    )


def _sub_after(f: list[str]) -> TraceRecord:
    timestamp, group = (int(f[7]), f[8]) if len(f) >= 9 else (0, "")
    return TraceRecord(
        "SubAfter",
        f[2],
        group=group,
        timestamp=timestamp,
        request_id=f[1],
        cost_ms=int(f[3]),
        success=_is_true(f[4]),
        keys=f[5],
        context_code=int(f[6]) if len(f) >= 7 else 0,
    )


def _end_transaction(f: list[str]) -> TraceRecord:
    return TraceRecord(
        "EndTransaction",
        f[5],
        **_stored(f),
        msg_type=int(f[9]),
        transaction_id=f[10],
        transaction_state=f[11],
        from_transaction_check=_is_true(f[12]),
    )


#: Record type -> (fewest fields, parser).
_PARSERS: Final = {
    "Pub": (13, _pub),
    "SubBefore": (8, _sub_before),
    "SubAfter": (6, _sub_after),
    "EndTransaction": (13, _end_transaction),
}


def decode_trace_body(body: bytes) -> list[TraceRecord]:
    """Every well-formed record of a trace message's body, in order.

    Args:
        body: The trace message's body (UTF-8).

    Returns:
        The records; malformed ones and unknown types are left out.
    """
    text = body.decode("utf-8", "replace")
    return list(_records(text.split(RECORD_SEPARATOR)))


def _records(chunks: Iterable[str]) -> Iterable[TraceRecord]:
    for chunk in chunks:
        fields = chunk.split(FIELD_SEPARATOR)
        known = _PARSERS.get(fields[0])
        if known is None or len(fields) < known[0]:
            continue
        try:
            yield known[1](fields)
        except ValueError:  # a number that is not one
            continue


def encode_trace_records(records: Iterable[TraceRecord]) -> bytes:
    """A trace message's body: the records as RocketMQ 4.9.4's client writes them.

    Each record carries the fields of its type (the table above); the others are not
    written. :func:`decode_trace_body` reads the body back into equal records.

    Args:
        records: ``Pub``, ``SubBefore``, ``SubAfter`` or ``EndTransaction`` records.

    Returns:
        The body (UTF-8), every record ended by :data:`RECORD_SEPARATOR`.

    Raises:
        ValueError: A record's type is unknown, or a field holds a separator (the
            layout has no escape for them).
    """
    return "".join(_encode(record) for record in records).encode()


def _java(flag: bool) -> str:
    return "true" if flag else "false"  # Java's String.valueOf(boolean)


def _fields(r: TraceRecord) -> list[object]:
    if r.type == "Pub":
        fields: list[object] = [
            r.type, r.timestamp, r.region, r.group, r.topic, r.msg_id, r.tags, r.keys,
            r.store_host, r.body_length, r.cost_ms, r.msg_type, r.offset_msg_id,
            _java(r.success),
        ]  # fmt: skip
        # 4.9.4 writes 14 fields; a 15th, the client host, only when there is one
        # (older clients wrote it; readers accept both).
        return [*fields, r.client_host] if r.client_host else fields
    if r.type == "SubBefore":
        return [
            r.type, r.timestamp, r.region, r.group, r.request_id, r.msg_id, r.retry_times,
            r.keys,
        ]  # fmt: skip
    if r.type == "SubAfter":
        return [
            r.type, r.request_id, r.msg_id, r.cost_ms, _java(r.success), r.keys,
            r.context_code, r.timestamp, r.group,
        ]  # fmt: skip
    if r.type == "EndTransaction":
        return [
            r.type, r.timestamp, r.region, r.group, r.topic, r.msg_id, r.tags, r.keys,
            r.store_host, r.msg_type, r.transaction_id, r.transaction_state,
            _java(r.from_transaction_check),
        ]  # fmt: skip
    raise ValueError(f"unknown trace record type {r.type!r}")


def _encode(record: TraceRecord) -> str:
    fields = _fields(record)
    text = FIELD_SEPARATOR.join(map(str, fields))
    if RECORD_SEPARATOR in text or text.count(FIELD_SEPARATOR) != len(fields) - 1:
        raise ValueError(f"a field of this {record.type} record holds a separator: {record!r}")
    return text + RECORD_SEPARATOR
