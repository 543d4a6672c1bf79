"""queryMsgTraceById of ``rocklet admin``: a message's trace records, found by its id.

Clients with message trace on send a record for each send (``Pub``), each consume
(``SubBefore`` and ``SubAfter``) and each transaction end to the trace topic, keyed by
the traced message's client msgId (:mod:`rocklet.protocol.trace`). The verb queries
that topic by key, as mqadmin does (at most 64 trace messages per broker), and shows:

- the sends: producer group, the sending client's host, time, cost and status;
- the consumes (from ``SubAfter``), one table per consumer group;
- transaction ends (mqadmin leaves these out).

With ``--json`` every record of the message is printed, ``SubBefore`` included.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
from collections.abc import Sequence
from typing import Any, Final

from rocklet.admin.format import Output, Table
from rocklet.admin.tool import AdminTool
from rocklet.client.message import MessageExt
from rocklet.protocol.trace import TraceRecord, decode_trace_body

__all__ = ["TRACE_VERBS"]

#: Trace messages asked of each broker (mqadmin's figure).
_MAX_TRACE_MESSAGES: Final = 64


def _when(epoch_ms: int) -> str:
    if epoch_ms <= 0:
        return "-"
    return datetime.datetime.fromtimestamp(epoch_ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def _found(msg_id: str, traces: Sequence[MessageExt]) -> list[tuple[TraceRecord, str]]:
    """The records about ``msg_id``, each with the host of the client that sent it."""
    return [
        (record, record.client_host or trace.born_host[0])
        for trace in traces
        for record in decode_trace_body(trace.body)
        if record.msg_id == msg_id
    ]


def _row(kind: str, record: TraceRecord, host: str) -> tuple[object, ...]:
    status = "success" if record.success else "failed"
    return (kind, record.group, host, _when(record.timestamp), f"{record.cost_ms}ms", status)


def _record_data(record: TraceRecord, host: str) -> dict[str, Any]:
    """A record as JSON, its fields named in camelCase as the rest of the output."""
    fields = dataclasses.asdict(record)
    data = {_camel(name): value for name, value in fields.items()}
    return data | {"clientHost": host}


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


async def query_msg_trace_by_id(tool: AdminTool, args: argparse.Namespace) -> Output:
    """queryMsgTraceById: the sends, consumes and transaction ends traced for a msgId."""
    msg_id = args.msgId.strip()
    traces = await tool.admin.query_by_key(args.traceTopic, msg_id, max_num=_MAX_TRACE_MESSAGES)
    found = _found(msg_id, traces)
    tables = []
    pubs = [_row("Pub", r, host) for r, host in found if r.type == "Pub"]
    if pubs:
        pub_headers = ("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes")
        tables.append(Table((*pub_headers, "#Status"), pubs))
    by_group: dict[str, list[tuple[object, ...]]] = {}
    for record, host in found:
        if record.type == "SubAfter":
            by_group.setdefault(record.group, []).append(_row("Sub", record, host))
    for group in sorted(by_group):
        sub_headers = ("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes")
        tables.append(Table((*sub_headers, "#Status"), by_group[group]))
    ends = [
        ("EndTransaction", r.group, host, _when(r.timestamp), r.transaction_state)
        for r, host in found
        if r.type == "EndTransaction"
    ]
    if ends:
        end_headers = ("#Type", "#ProducerGroup", "#ClientHost", "#Time", "#State")
        tables.append(Table(end_headers, ends))
    data = [_record_data(record, host) for record, host in found]
    notes = [] if found else [f"no trace of {msg_id} in {args.traceTopic}"]
    return Output(data, tables, notes)


#: This module's verbs, by mqadmin name.
TRACE_VERBS = {"queryMsgTraceById": query_msg_trace_by_id}
