"""Broker verbs of ``rocklet admin``: configuration, statistics, producers, clean-ups.

getBrokerConfig, updateBrokerConfig, statsAll, brokerConsumeStats, producer,
cleanExpiredCQ, deleteExpiredCommitLog and cleanUnusedTopic, with mqadmin's flags.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from rocklet.admin.format import Output, Table, fmt_ms
from rocklet.admin.tool import AdminTool, TargetError
from rocklet.client.errors import ClientError
from rocklet.protocol.bodies.broker_stats import BrokerStatsData, ConsumeStatsList
from rocklet.protocol.bodies.cluster import GroupList
from rocklet.protocol.bodies.maintenance import ProducerTableInfo
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.headers.admin import QueryTopicConsumeByWhoRequestHeader
from rocklet.protocol.headers.stats import (
    GetConsumeStatsInBrokerHeader,
    ViewBrokerStatsDataRequestHeader,
)
from rocklet.protocol.names import DLQ_PREFIX, RETRY_PREFIX
from rocklet.protocol.properties_text import format_properties, parse_properties

__all__ = ["BROKER_VERBS", "view_stats"]


def read_properties(body: bytes) -> dict[str, str]:
    """A GET_BROKER_CONFIG / GET_NAMESRV_CONFIG body (``MixAll.string2Properties``), sorted."""
    return dict(sorted(parse_properties(body.decode("utf-8", "replace")).items()))


def properties_body(key: str, value: str) -> bytes:
    """The body of UPDATE_BROKER_CONFIG / UPDATE_NAMESRV_CONFIG setting one key."""
    return format_properties({key: value}).encode("utf-8")


def _per_addr(data: dict[str, Any], tables: list[Table]) -> Output:
    """One broker: its data; several: keyed by address (as brokerStatus prints them)."""
    return Output(next(iter(data.values())) if len(data) == 1 else data, tables)


async def get_broker_config(tool: AdminTool, args: argparse.Namespace) -> Output:
    """getBrokerConfig: a broker's configuration, or every broker's of a cluster."""
    if args.brokerAddr:
        addrs = [(args.brokerAddr, args.brokerAddr)]
    elif args.clusterName:
        brokers = await tool.cluster_brokers(args.clusterName)
        addrs = [(f"{name} (id {bid}) {addr}", addr) for name, bid, addr in brokers]
    else:
        raise TargetError("name a broker with -b or a cluster with -c")
    data: dict[str, dict[str, str]] = {}
    tables = []
    for title, addr in addrs:
        answer = await tool.call(addr, RequestCode.GET_BROKER_CONFIG)
        data[addr] = read_properties(answer.body)
        shown = title if len(addrs) > 1 else None
        tables.append(Table(("Key", "Value"), list(data[addr].items()), shown))
    return _per_addr(data, tables)


async def update_broker_config(tool: AdminTool, args: argparse.Namespace) -> Output:
    """updateBrokerConfig: set one key on a broker, or on every master of a cluster."""
    addrs = await tool.targets(args.clusterName, args.brokerAddr)
    body = properties_body(args.key, args.value)
    for addr in addrs:
        await tool.call(addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)
    return Output(
        {"key": args.key, "value": args.value, "brokers": addrs},
        notes=[f"update broker config success, {addr}" for addr in addrs],
    )


# -- statistics --------------------------------------------------------------------------


async def view_stats(tool: AdminTool, addr: str, name: str, key: str) -> tuple[float, int]:
    """A statistic's per-minute TPS and its last-24-hour count (0 when unavailable).

    Args:
        tool: The admin tool.
        addr: The broker's ``host:port``.
        name: The statistic (``TOPIC_PUT_NUMS``, ``GROUP_GET_NUMS``...).
        key: Its key (a topic, ``topic@group``).

    Returns:
        The last minute's messages per second, and the count of the widest window
        that saw any (day, hour, minute), as mqadmin's statsAll and exportMetrics read
        them; ``(0.0, 0)`` when the broker has no such statistic.
    """
    header = ViewBrokerStatsDataRequestHeader(name, key)
    try:
        answer = await tool.call(addr, RequestCode.VIEW_BROKER_STATS_DATA, header)
    except ClientError:
        return 0.0, 0  # no such statistic yet, or an older broker: mqadmin shows zeros
    data = BrokerStatsData.from_json(answer.body)
    # StatsAllSubCommand.compute24HourSum: the widest window that saw anything.
    windows = (data.stats_day, data.stats_hour, data.stats_minute)
    total = next((w.sum for w in windows if w.sum), 0)
    return data.stats_minute.tps, total


async def _topic_rows(tool: AdminTool, topic: str, active_only: bool) -> list[list[Any]]:
    route = await tool.admin.topic_route(topic)
    masters = [a for b in route.broker_datas if (a := b.master_addr) is not None]
    in_tps, in_day = 0.0, 0
    for addr in masters:
        tps, day = await view_stats(tool, addr, "TOPIC_PUT_NUMS", topic)
        in_tps, in_day = in_tps + tps, in_day + day
    groups: tuple[str, ...] = ()
    if masters:
        header = QueryTopicConsumeByWhoRequestHeader(topic)
        try:
            answer = await tool.call(masters[0], RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, header)
            groups = tuple(sorted(GroupList.from_json(answer.body).group_list))
        except ClientError:
            groups = ()
    rows: list[list[Any]] = []
    for group in groups:
        out_tps, out_day = 0.0, 0
        for addr in masters:
            tps, day = await view_stats(tool, addr, "GROUP_GET_NUMS", f"{topic}@{group}")
            out_tps, out_day = out_tps + tps, out_day + day
        try:
            accumulation = max(0, (await tool.admin.consume_stats(group, topic)).total_diff)
        except ClientError:
            accumulation = 0
        if not active_only or in_day > 0 or out_day > 0:
            rows.append([topic, group, accumulation, in_tps, out_tps, in_day, out_day])
    if not groups and (not active_only or in_day > 0):
        rows.append([topic, None, 0, in_tps, None, in_day, "NO_CONSUMER"])
    return rows


async def stats_all(tool: AdminTool, args: argparse.Namespace) -> Output:
    """statsAll: per topic and consumer group, lag, TPS in and out, and 24-hour counts."""
    rows: list[list[Any]] = []
    for topic in await tool.admin.list_topics():
        if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
            continue
        if args.topic and topic != args.topic:
            continue
        try:
            rows += await _topic_rows(tool, topic, args.activeTopic)
        except ClientError:
            continue  # a topic deleted meanwhile: skipped, as mqadmin does
    keys = ("topic", "group", "accumulation", "inTps", "outTps", "inMsg24Hour", "outMsg24Hour")
    data = [dict(zip(keys, r, strict=True)) for r in rows]
    shown: list[Sequence[object]] = [
        [t, g, a, f"{i:.2f}", None if o is None else f"{o:.2f}", d, od]
        for t, g, a, i, o, d, od in rows
    ]
    headers = (
        "Topic",
        "Consumer Group",
        "Accumulation",
        "InTPS",
        "OutTPS",
        "InMsg24Hour",
        "OutMsg24Hour",
    )
    return Output(data, [Table(headers, shown)])


async def broker_consume_stats(tool: AdminTool, args: argparse.Namespace) -> Output:
    """brokerConsumeStats: every group's offsets and lag on one broker."""
    header = GetConsumeStatsInBrokerHeader(args.order)
    answer = await tool.call(args.brokerAddr, RequestCode.GET_BROKER_CONSUME_STATS, header)
    body = ConsumeStatsList.from_json(answer.body)
    rows: list[Sequence[object]] = []
    data: list[dict[str, Any]] = []
    groups = [(g, s) for entry in body.consume_stats_list for g, ss in entry.items() for s in ss]
    for group, stats in groups:
        for mq, w in sorted(stats.offset_table.items()):
            diff = w.broker_offset - w.consumer_offset
            if diff < args.level:
                continue
            rows.append(
                (
                    mq.topic,
                    group,
                    mq.broker_name,
                    mq.queue_id,
                    w.broker_offset,
                    w.consumer_offset,
                    diff,
                    fmt_ms(w.last_timestamp),
                )
            )
            data.append(
                {
                    "topic": mq.topic,
                    "group": group,
                    "brokerName": mq.broker_name,
                    "queueId": mq.queue_id,
                    "brokerOffset": w.broker_offset,
                    "consumerOffset": w.consumer_offset,
                    "diff": diff,
                    "lastTimestamp": w.last_timestamp,
                }
            )
    headers = (
        "Topic",
        "Group",
        "Broker Name",
        "QID",
        "Broker Offset",
        "Consumer Offset",
        "Diff",
        "LastTime",
    )
    return Output(
        {"brokerAddr": args.brokerAddr, "totalDiff": body.total_diff, "queues": data},
        [Table(headers, rows)],
        [f"Diff Total: {body.total_diff}"],
    )


async def producer(tool: AdminTool, args: argparse.Namespace) -> Output:
    """producer: every producer connected to a broker, by group."""
    answer = await tool.call(args.broker, RequestCode.GET_ALL_PRODUCER_INFO)
    table = ProducerTableInfo.from_json(answer.body).data
    data: dict[str, list[dict[str, Any]]] = {}
    rows: list[Sequence[object]] = []
    for group in sorted(table):
        data[group] = [i.to_dict() for i in table[group]]
        rows += [
            (
                group,
                i.client_id,
                i.remote_ip,
                i.language,
                i.version,  # ProducerInfo.toString: the number (version=%d), not its name
                fmt_ms(i.last_update_timestamp),
            )
            for i in table[group]
        ]
    headers = ("Producer Group", "Client ID", "Remote IP", "Language", "Version", "Last Update")
    return Output(data, [Table(headers, rows)])


async def _clean(tool: AdminTool, args: argparse.Namespace, code: int) -> Output:
    addrs = await tool.every_master(args.cluster, args.brokerAddr)
    for addr in addrs:
        await tool.call(addr, code)
    return Output({"brokers": addrs, "success": True}, notes=["success"])


async def clean_expired_cq(tool: AdminTool, args: argparse.Namespace) -> Output:
    """cleanExpiredCQ: drop consume queues whose messages are all gone from the commitlog."""
    return await _clean(tool, args, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)


async def delete_expired_commit_log(tool: AdminTool, args: argparse.Namespace) -> Output:
    """deleteExpiredCommitLog: delete expired commitlog files now."""
    return await _clean(tool, args, RequestCode.DELETE_EXPIRED_COMMITLOG)


async def clean_unused_topic(tool: AdminTool, args: argparse.Namespace) -> Output:
    """cleanUnusedTopic: drop the store files of topics the broker no longer has."""
    return await _clean(tool, args, RequestCode.CLEAN_UNUSED_TOPIC)


#: This module's verbs, by mqadmin name.
BROKER_VERBS = {
    "getBrokerConfig": get_broker_config,
    "updateBrokerConfig": update_broker_config,
    "statsAll": stats_all,
    "brokerConsumeStats": broker_consume_stats,
    "producer": producer,
    "cleanExpiredCQ": clean_expired_cq,
    "deleteExpiredCommitLog": delete_expired_commit_log,
    "cleanUnusedTopic": clean_unused_topic,
}
