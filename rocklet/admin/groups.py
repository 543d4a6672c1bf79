"""The consumer-group verbs of ``rocklet admin``: consumerProgress and consumerStatus.

``consumerProgress`` without ``-g`` finds the groups as mqadmin does, from the
``%RETRY%<group>`` topics the name server knows (every group that ever consumed in
clustering mode has one).

``consumerStatus`` prints each member's running info; with ``-s`` each member adds
its stacks (a Java client's threads; a Rocklet client's threads and asyncio tasks),
printed after its running info. :func:`running_members` and :func:`member_tables`
are shared with the ``consumer`` verb (:mod:`rocklet.admin.verbs_running`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rocklet.admin.format import Output, Table, fmt_ms
from rocklet.admin.running_analysis import analyse
from rocklet.admin.tool import AdminTool
from rocklet.client.errors import ClientError
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.running import ConsumerRunningInfo, ProcessQueueInfo
from rocklet.protocol.names import RETRY_PREFIX, is_retry_topic

__all__ = [
    "RunningMember",
    "consumer_progress",
    "consumer_status",
    "member_data",
    "member_tables",
    "running_members",
    "status_output",
]


def _mq(mq: MessageQueue) -> dict[str, Any]:
    return {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}


async def _queue_owners(tool: AdminTool, group: str) -> dict[MessageQueue, str]:
    """Which client consumes each queue, from every online member's running info."""
    owners: dict[MessageQueue, str] = {}
    conns = await tool.admin.consumer_connections(group)
    for conn in conns.connection_set:
        info = await tool.admin.consumer_running_info(group, conn.client_id)
        for mq in info.mq_table:
            owners[mq] = conn.client_addr or conn.client_id
    return owners


async def consumer_progress(tool: AdminTool, args: argparse.Namespace) -> Output:
    """consumerProgress: a group's offsets and lag per queue, or a summary of every group."""
    if not args.groupName:
        return await _all_groups(tool)
    stats = await tool.admin.consume_stats(args.groupName)
    owners = await _queue_owners(tool, args.groupName) if args.showClientIP else {}
    rows: list[Sequence[object]] = []
    queues: list[dict[str, Any]] = []
    for mq, w in stats.offset_table.items():
        diff = w.broker_offset - w.consumer_offset
        rows.append(
            (
                mq.topic,
                mq.broker_name,
                mq.queue_id,
                w.broker_offset,
                w.consumer_offset,
                owners.get(mq),
                diff,
                fmt_ms(w.last_timestamp),
            )
        )
        queues.append(
            {
                **_mq(mq),
                "brokerOffset": w.broker_offset,
                "consumerOffset": w.consumer_offset,
                "clientIp": owners.get(mq),
                "diff": diff,
                "lastTimestamp": w.last_timestamp,
            }
        )
    headers = (
        "Topic",
        "Broker Name",
        "QID",
        "Broker Offset",
        "Consumer Offset",
        "Client IP",
        "Diff",
        "LastTime",
    )
    data = {
        "group": args.groupName,
        "consumeTps": stats.consume_tps,
        "diffTotal": stats.total_diff,
        "queues": queues,
    }
    notes = [f"Consume TPS: {stats.consume_tps:.2f}", f"Diff Total: {stats.total_diff}"]
    return Output(data, [Table(headers, rows)], notes)


async def _all_groups(tool: AdminTool) -> Output:
    topics = await tool.admin.list_topics()
    groups = sorted(t[len(RETRY_PREFIX) :] for t in topics if is_retry_topic(t))
    rows: list[Sequence[object]] = []
    data: list[dict[str, Any]] = []
    for group in groups:
        count, ctype, model = 0, None, None
        try:
            conns = await tool.admin.consumer_connections(group)
            count = len(conns.connection_set)
            ctype, model = conns.consume_type.name, conns.message_model.name
        except ClientError:
            pass  # offline: no members, as mqadmin prints it
        try:
            stats = await tool.admin.consume_stats(group)
            tps, diff = stats.consume_tps, stats.total_diff
        except ClientError:
            tps, diff = 0.0, 0
        rows.append((group, count, ctype, model, f"{tps:.2f}", diff))
        data.append(
            {
                "group": group,
                "count": count,
                "consumeType": ctype,
                "messageModel": model,
                "consumeTps": tps,
                "diffTotal": diff,
            }
        )
    headers = ("Group", "Count", "Type", "Model", "TPS", "Diff Total")
    return Output(data, [Table(headers, rows)])


def _pq(info: ProcessQueueInfo) -> dict[str, Any]:
    return {
        "commitOffset": info.commit_offset,
        "cachedMsgMinOffset": info.cached_msg_min_offset,
        "cachedMsgMaxOffset": info.cached_msg_max_offset,
        "cachedMsgCount": info.cached_msg_count,
        "cachedMsgSizeInMiB": info.cached_msg_size_in_mib,
        "transactionMsgCount": info.transaction_msg_count,
        "locked": info.locked,
        "tryUnlockTimes": info.try_unlock_times,
        "lastLockTimestamp": info.last_lock_timestamp,
        "droped": info.dropped,  # RocketMQ's spelling of the field
        "lastPullTimestamp": info.last_pull_timestamp,
        "lastConsumeTimestamp": info.last_consume_timestamp,
    }


def _running_data(client_id: str, info: ConsumerRunningInfo) -> dict[str, Any]:
    return {
        "clientId": client_id,
        "properties": dict(info.properties),
        "subscriptions": [
            {"topic": s.topic, "subString": s.sub_string, "subVersion": s.sub_version}
            for s in info.subscription_set
        ],
        "processQueues": [{**_mq(mq), **_pq(pq)} for mq, pq in sorted(info.mq_table.items())],
        "status": {
            topic: {
                "pullRT": st.pull_rt,
                "pullTPS": st.pull_tps,
                "consumeRT": st.consume_rt,
                "consumeOKTPS": st.consume_ok_tps,
                "consumeFailedTPS": st.consume_failed_tps,
                "consumeFailedMsgs": st.consume_failed_msgs,
            }
            for topic, st in sorted(info.status_table.items())
        },
    }


def _running_tables(client_id: str, info: ConsumerRunningInfo) -> list[Table]:
    props = Table(("Property", "Value"), sorted(info.properties.items()), f"Consumer {client_id}")
    subs = Table(
        ("Topic", "Expression", "Version"),
        [(s.topic, s.sub_string, s.sub_version) for s in info.subscription_set],
    )
    pq_rows: list[Sequence[object]] = [
        (
            mq.topic,
            mq.broker_name,
            mq.queue_id,
            pq.commit_offset,
            pq.cached_msg_min_offset,
            pq.cached_msg_max_offset,
            pq.cached_msg_count,
            pq.cached_msg_size_in_mib,
            pq.locked,
            pq.dropped,
            fmt_ms(pq.last_pull_timestamp),
            fmt_ms(pq.last_consume_timestamp),
        )
        for mq, pq in sorted(info.mq_table.items())
    ]
    pqs = Table(
        (
            "Topic",
            "Broker Name",
            "QID",
            "Commit Offset",
            "Cached Min",
            "Cached Max",
            "Cached Count",
            "Cached MiB",
            "Locked",
            "Dropped",
            "Last Pull",
            "Last Consume",
        ),
        pq_rows,
    )
    status = Table(
        ("Topic", "Pull RT", "Pull TPS", "Consume RT", "OK TPS", "Failed TPS", "Failed Msgs"),
        [
            (
                t,
                f"{s.pull_rt:.2f}",
                f"{s.pull_tps:.2f}",
                f"{s.consume_rt:.2f}",
                f"{s.consume_ok_tps:.2f}",
                f"{s.consume_failed_tps:.2f}",
                s.consume_failed_msgs,
            )
            for t, s in sorted(info.status_table.items())
        ],
    )
    return [props, subs, pqs, status]


@dataclass(frozen=True, slots=True)
class RunningMember:
    """One member of a group and what it reported.

    Attributes:
        client_id: Its client id.
        version: Its client version ordinal; ``None`` when named by ``-i`` (not listed).
        info: Its running info (``jstack`` set when asked for).
    """

    client_id: str
    version: int | None
    info: ConsumerRunningInfo


async def running_members(
    tool: AdminTool,
    group: str,
    *,
    client_id: str | None = None,
    broker_addr: str | None = None,
    jstack: bool = False,
) -> list[RunningMember]:
    """The running info of one member, or of every online member by client id.

    Args:
        tool: The admin tool.
        group: Consumer group.
        client_id: Only this member (not looked up in the connection list).
        broker_addr: Ask this broker (connections and relays) instead of the
            brokers of the group's retry topic.
        jstack: Ask each member for its stacks too.

    Returns:
        The members, sorted by client id.
    """
    if client_id:
        listed: list[tuple[str, int | None]] = [(client_id, None)]
    else:
        conns = await tool.admin.consumer_connections(group, broker_addr=broker_addr)
        listed = sorted((c.client_id, c.version) for c in conns.connection_set)
    members: list[RunningMember] = []
    for cid, version in listed:
        info = await tool.admin.consumer_running_info(
            group, cid, jstack=jstack, broker_addr=broker_addr
        )
        members.append(RunningMember(cid, version, info))
    return members


def member_data(member: RunningMember) -> dict[str, Any]:
    """A member's running info as JSON-ready data (``jstack`` only when it sent one)."""
    data = _running_data(member.client_id, member.info)
    if member.info.jstack is not None:
        data["jstack"] = member.info.jstack
    return data


def member_tables(member: RunningMember) -> list[Table]:
    """A member's running info as tables, its stacks last (one line per row)."""
    tables = _running_tables(member.client_id, member.info)
    if member.info.jstack is not None:
        # The header prints as "#Consumer jstack#", the section name mqadmin uses.
        lines = member.info.jstack.splitlines()
        tables.append(Table(("Consumer jstack#",), [(line,) for line in lines]))
    return tables


def status_output(members: list[RunningMember], *, analysed: bool) -> Output:
    """What consumerStatus prints of these members: each one's tables in turn.

    Args:
        members: The members.
        analysed: End with the checks of :mod:`rocklet.admin.running_analysis` (every
            member was listed, as mqadmin does without ``-i``).
    """
    data: list[dict[str, Any]] = [member_data(m) for m in members]
    tables = [t for m in members for t in member_tables(m)]
    notes = analyse(members, int(time.time() * 1000)).notes() if analysed and members else []
    return Output(data, tables, notes)


async def consumer_status(tool: AdminTool, args: argparse.Namespace) -> Output:
    """consumerStatus: each member's running info, with every ProcessQueue's snapshot."""
    members = await running_members(
        tool,
        args.consumerGroup,
        client_id=args.clientId,
        broker_addr=args.brokerAddr,
        jstack=args.jstack,
    )
    return status_output(members, analysed=not args.clientId)
