"""How ``rocklet admin`` prints: aligned tables for people, one JSON document for scripts.

Each verb returns an :class:`Output`: the data as plain JSON values (printed with
``--json``) and the same facts as :class:`Table` objects (printed otherwise). Tables
follow mqadmin's look: ``#``-prefixed headers and left-aligned, space-padded columns.
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from rocklet.client.message import MessageExt

__all__ = ["Output", "Table", "fmt_ms", "message_data", "message_table", "print_output"]

#: Longest body shown in a table (the JSON output carries it whole).
_BODY_PREVIEW = 200


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"  # as Java prints them
    return str(value)


@dataclass(slots=True)
class Table:
    """Rows under headers, optionally titled.

    Attributes:
        headers: Column names (printed with a ``#`` prefix).
        rows: Cell values; ``None`` prints as ``-``.
        title: A line printed above the table.
    """

    headers: Sequence[str]
    rows: Sequence[Sequence[object]]
    title: str | None = None

    def render(self) -> str:
        """The table as text lines (no trailing newline)."""
        cells = [[f"#{h}" for h in self.headers]]
        cells += [[_cell(v) for v in row] for row in self.rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.headers))]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in cells
        ]
        if self.title:
            lines.insert(0, self.title)
        return "\n".join(lines)


@dataclass(slots=True)
class Output:
    """What a verb found.

    Attributes:
        data: JSON-ready data (``--json``).
        tables: The same, as tables.
        notes: Lines printed after the tables (totals, hints).
        exit_code: The command's exit status once printed (1: it found problems).
        streamed: The verb printed its rows as they came (to ``args.stream``):
            nothing is left to print.
    """

    data: Any
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    exit_code: int = 0
    streamed: bool = False


def print_output(output: Output, out: TextIO, *, as_json: bool) -> None:
    """Write an output as JSON or as tables.

    Args:
        output: What to print.
        out: Where to write.
        as_json: Print ``output.data`` as indented JSON instead of the tables.
    """
    if output.streamed:
        return
    if as_json:
        out.write(json.dumps(output.data, indent=2, ensure_ascii=False) + "\n")
        return
    blocks = [t.render() for t in output.tables]
    if output.notes:
        blocks.append("\n".join(output.notes))
    out.write("\n\n".join(blocks) + ("\n" if blocks else ""))


def fmt_ms(epoch_ms: int) -> str | None:
    """An epoch-ms timestamp as local ``YYYY-MM-DD HH:MM:SS.mmm``; ``None`` for 0 or less."""
    if epoch_ms <= 0:
        return None
    stamp = datetime.datetime.fromtimestamp(epoch_ms / 1000)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.") + f"{epoch_ms % 1000:03d}"


def _body(body: bytes) -> tuple[str, str]:
    try:
        return "utf-8", body.decode("utf-8")
    except UnicodeDecodeError:
        return "base64", base64.b64encode(body).decode("ascii")


def message_data(msg: MessageExt) -> dict[str, Any]:
    """A message as JSON-ready data (the body as UTF-8 text, else base64).

    Args:
        msg: The message.

    Returns:
        Its fields, named as RocketMQ's ``MessageExt`` getters.
    """
    encoding, body = _body(msg.body)
    return {
        "msgId": msg.msg_id,
        "offsetMsgId": msg.offset_msg_id,
        "topic": msg.topic,
        "tags": msg.tags,
        "keys": list(msg.keys),
        "brokerName": msg.broker_name,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset,
        "reconsumeTimes": msg.reconsume_times,
        "bornTimestamp": msg.born_timestamp,
        "storeTimestamp": msg.store_timestamp,
        "bornHost": f"{msg.born_host[0]}:{msg.born_host[1]}",
        "storeHost": msg.store_addr,
        "sysFlag": msg.sys_flag,
        "storeSize": msg.store_size,
        "properties": dict(msg.properties),
        "bodyEncoding": encoding,
        "body": body,
    }


def message_table(msg: MessageExt) -> Table:
    """A message as a two-column table, like mqadmin's ``queryMsgById`` print-out."""
    data = message_data(msg)
    body = data["body"]
    if len(body) > _BODY_PREVIEW:
        body = body[:_BODY_PREVIEW] + f"... ({len(msg.body)} bytes)"
    rows: list[Sequence[object]] = [
        ("Message ID", data["msgId"]),
        ("Offset Message ID", data["offsetMsgId"]),
        ("Topic", msg.topic),
        ("Tags", msg.tags),
        ("Keys", " ".join(msg.keys) or None),
        ("Broker Name", msg.broker_name or None),
        ("Queue ID", msg.queue_id),
        ("Queue Offset", msg.queue_offset),
        ("CommitLog Offset", msg.commit_log_offset),
        ("Reconsume Times", msg.reconsume_times),
        ("Born Timestamp", fmt_ms(msg.born_timestamp)),
        ("Store Timestamp", fmt_ms(msg.store_timestamp)),
        ("Born Host", data["bornHost"]),
        ("Store Host", data["storeHost"]),
        ("System Flag", msg.sys_flag),
        ("Properties", json.dumps(data["properties"], ensure_ascii=False, sort_keys=True)),
        (f"Body ({data['bodyEncoding']})", body),
    ]
    return Table(("Field", "Value"), rows)
