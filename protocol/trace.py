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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["FIELD_SEPARATOR", "RECORD_SEPARATOR", "TraceRecord", "decode_trace_body"]

#: Between the fields of a record (Java's ``CONTENT_SPLITOR``).
FIELD_SEPARATOR: Final = "\x01"
#: Between records (Java's ``FIELD_SPLITOR``).
RECORD_SEPARATOR: Final = "\x02"


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


def _is_true(text: str) -> bool:
    return text.strip().lower() == "true"  # Java's Boolean.parseBoolean


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
        group=f[3],
        timestamp=int(f[1]),
        region=f[2],
        topic=f[4],
        tags=f[6],
        keys=f[7],
        store_host=f[8],
        body_length=int(f[9]),
        cost_ms=int(f[10]),
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
    )


def _end_transaction(f: list[str]) -> TraceRecord:
    return TraceRecord(
        "EndTransaction",
        f[5],
        group=f[3],
        timestamp=int(f[1]),
        region=f[2],
        topic=f[4],
        tags=f[6],
        keys=f[7],
        store_host=f[8],
        transaction_state=f[11],
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
