"""Verbs about what a group's members hold: ``consumer`` and ``getConsumerStatus``.

``consumer`` (mqadmin's ``ConsumerSubCommand``) asks every online member for its
running info, as ``consumerStatus`` does and with its code
(:func:`~rocklet.admin.groups.running_members`), but writes each member's report to a
file instead of printing it: ``<DIR>/<now-ms>/<clientId>``, ``DIR`` being ``-f`` or
the working directory (mqadmin's only choice). The file holds the tables
``consumerStatus`` prints for that member, its stacks last with ``-s``. The verb prints
one row per member (index, client id, version, file) and the checks of
:mod:`~rocklet.admin.running_analysis`. A client id is made a safe file name first
(characters other than letters, digits and ``@._:#-`` become ``_``): it comes from the
wire and must not name a path outside the folder. With ``-i`` the one member's report
is printed, as ``consumerStatus -i`` prints it.

``getConsumerStatus`` (``GetConsumerStatusCommand``) prints the offsets of a topic
each online member holds in memory (INVOKE_BROKER_TO_GET_CONSUMER_STATUS, see
:meth:`~rocklet.client.admin.Admin.consume_status`), one row per member and queue.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from rocklet.admin.format import Output, Table
from rocklet.admin.groups import (
    RunningMember,
    member_tables,
    running_members,
    status_output,
)
from rocklet.admin.running_analysis import analyse
from rocklet.admin.tool import AdminTool, TargetError
from rocklet.protocol.version import version_desc

__all__ = ["RUNNING_VERBS", "consumer", "get_consumer_status", "report_file_name"]

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9@._:#-]")


def report_file_name(client_id: str) -> str:
    """A client id as a file name that stays in its folder.

    Args:
        client_id: The id (from the broker's connection list).

    Returns:
        The id with every character but letters, digits and ``@._:#-`` replaced by
        ``_``; ``.``, ``..`` and the empty id get a leading ``_``.
    """
    name = _UNSAFE.sub("_", client_id)
    return f"_{name}" if name in ("", ".", "..") else name


def _report_text(member: RunningMember) -> str:
    return "\n\n".join(t.render() for t in member_tables(member)) + "\n"


def _write_reports(folder: Path, reports: Sequence[tuple[str, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in reports:
        (folder / name).write_text(text, encoding="utf-8")


async def consumer(tool: AdminTool, args: argparse.Namespace) -> Output:
    """consumer: each member's running info written to a file, then the group's checks."""
    group = args.consumerGroup
    if args.clientId:
        one = await running_members(tool, group, client_id=args.clientId, jstack=args.jstack)
        return status_output(one, analysed=False)
    members = await running_members(tool, group, jstack=args.jstack)
    now_ms = int(time.time() * 1000)
    folder = Path(args.dir or ".") / str(now_ms)
    reports: list[tuple[str, str]] = []
    for member in members:
        name = report_file_name(member.client_id)
        if any(name == taken for taken, _ in reports):  # two ids made the same name
            name = f"{name}-{len(reports) + 1}"
        reports.append((name, _report_text(member)))
    try:
        await asyncio.to_thread(_write_reports, folder, reports)
    except OSError as exc:
        raise TargetError(f"cannot write the reports under {folder}: {exc}") from exc
    rows: list[Sequence[object]] = []
    listed: list[dict[str, Any]] = []
    for index, (member, (name, _)) in enumerate(zip(members, reports, strict=True), 1):
        version = None if member.version is None else version_desc(member.version)
        path = str(folder / name)
        rows.append((f"{index:03d}", member.client_id, version, path))
        listed.append(
            {"index": index, "clientId": member.client_id, "version": version, "file": path}
        )
    analysis = analyse(members, now_ms) if members else None
    headers = ("Index", "ClientId", "Version", "ConsumerRunningInfoFile")
    data = {
        "dir": str(folder),
        "members": listed,
        "analysis": None if analysis is None else analysis.to_dict(),
    }
    notes = [] if analysis is None else analysis.notes()
    return Output(data, [Table(headers, rows)], notes)


async def get_consumer_status(tool: AdminTool, args: argparse.Namespace) -> Output:
    """getConsumerStatus: the offsets of a topic each online member holds in memory."""
    origin = args.originClientId or ""
    table = await tool.admin.consume_status(args.topic, args.group, origin or None)
    rows: list[Sequence[object]] = []
    data: dict[str, list[dict[str, Any]]] = {}
    for client_id, offsets in table.items():
        data[client_id] = []
        for mq, offset in offsets.items():
            rows.append((client_id, mq.broker_name, mq.queue_id, offset))
            data[client_id].append({**mq.to_dict(), "offset": offset})
    title = (
        f"get consumer status from client. group={args.group}, topic={args.topic}, "
        f"originClientId={origin}"
    )
    headers = ("clientId", "brokerName", "queueId", "offset")
    return Output(
        {"group": args.group, "topic": args.topic, "originClientId": origin, "consumerTable": data},
        [Table(headers, rows, title)],
    )


#: This module's verbs, by mqadmin name.
RUNNING_VERBS = {
    "consumer": consumer,
    "getConsumerStatus": get_consumer_status,
}
