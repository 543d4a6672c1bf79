"""Client and offset verbs of ``rocklet admin``.

producerConnection, consumerConnection, getConsumerConfig, resetOffsetByTime,
skipAccumulatedMessage and cloneGroupOffset. Client versions are printed as mqadmin
prints them, ``MQVersion.getVersionDesc`` (``V4_9_4``).

Resetting offsets goes the way mqadmin goes: first INVOKE_BROKER_TO_RESET_OFFSET, which
has each broker move the offsets and tell the online consumers; when a broker answers
CONSUMER_NOT_ONLINE, the admin does the work itself (read the group's offsets, search
the offset of the time in each queue, commit it) and prints the six-column rollback
table.
"""

from __future__ import annotations

import argparse
import datetime
import time
from collections.abc import Sequence
from typing import Any

from rocklet.admin.format import Output, Table
from rocklet.admin.tool import AdminTool, TargetError
from rocklet.client.errors import BrokerError
from rocklet.protocol.bodies.consumer import ResetOffsetBody
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.running import ConsumerConnection, ProducerConnection
from rocklet.protocol.bodies.stats import ConsumeStats, TopicStatsTable
from rocklet.protocol.bodies.subscription_group import SubscriptionGroupWrapper
from rocklet.protocol.codes import LanguageCode, RequestCode, ResponseCode
from rocklet.protocol.headers.admin import (
    GetConsumerConnectionListRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
)
from rocklet.protocol.headers.consumer import GetConsumeStatsRequestHeader, ResetOffsetRequestHeader
from rocklet.protocol.version import version_desc

__all__ = ["CONSUMER_VERBS", "parse_time"]

#: ``UtilAll.YYYY_MM_DD_HH_MM_SS_SSS``, the date form mqadmin's time flags take.
_TIME_FORMAT = "%Y-%m-%d#%H:%M:%S:%f"


def parse_time(text: str) -> int:
    """A time flag as epoch ms: ``now`` (-1), epoch milliseconds or ``yyyy-MM-dd#HH:mm:ss:SSS``.

    Raises:
        TargetError: None of these forms.
    """
    text = text.strip()
    if text == "now":
        return -1
    try:
        return int(text)
    except ValueError:
        pass
    try:
        stamp = datetime.datetime.strptime(text, _TIME_FORMAT)
    except ValueError:
        raise TargetError(
            f"bad time {text!r}: use now, epoch milliseconds or yyyy-MM-dd#HH:mm:ss:SSS"
        ) from None
    return int(stamp.timestamp() * 1000)


def _connection_rows(conns: Sequence[Any]) -> list[Sequence[object]]:
    ordered = sorted(conns, key=lambda c: c.client_id)
    return [
        (f"{i:04d}", c.client_id, c.client_addr, c.language, version_desc(c.version))
        for i, c in enumerate(ordered, 1)
    ]


def _connection_data(conns: Sequence[Any]) -> list[dict[str, Any]]:
    return [c.to_dict() for c in sorted(conns, key=lambda c: c.client_id)]


_CONN_HEADERS = ("#", "Client ID", "Client Addr", "Language", "Version")


async def producer_connection(tool: AdminTool, args: argparse.Namespace) -> Output:
    """producerConnection: a producer group's connections on the topic's brokers."""
    route = await tool.admin.topic_route(args.topic)
    header = GetProducerConnectionListRequestHeader(args.producerGroup)
    conns: dict[str, Any] = {}
    for b in route.broker_datas:
        if b.master_addr is None:
            continue
        answer = await tool.call(b.master_addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, header)
        for c in ProducerConnection.from_json(answer.body).connection_set:
            conns[c.client_id] = c
    found = list(conns.values())
    return Output(_connection_data(found), [Table(_CONN_HEADERS, _connection_rows(found))])


async def consumer_connection(tool: AdminTool, args: argparse.Namespace) -> Output:
    """consumerConnection: a consumer group's connections, subscriptions and settings."""
    if args.brokerAddr:
        header = GetConsumerConnectionListRequestHeader(args.consumerGroup)
        answer = await tool.call(args.brokerAddr, RequestCode.GET_CONSUMER_CONNECTION_LIST, header)
        cc = ConsumerConnection.from_json(answer.body)
    else:
        cc = await tool.admin.consumer_connections(args.consumerGroup)
    subs = sorted(cc.subscription_table.items())
    sub_rows: list[Sequence[object]] = [
        (f"{i:03d}", topic, s.sub_string) for i, (topic, s) in enumerate(subs, 1)
    ]
    data = {
        "connections": _connection_data(cc.connection_set),
        "subscriptions": {topic: s.sub_string for topic, s in subs},
        "consumeType": cc.consume_type.name,
        "messageModel": cc.message_model.name,
        "consumeFromWhere": cc.consume_from_where.name,
    }
    tables = [
        Table(_CONN_HEADERS, _connection_rows(cc.connection_set)),
        Table(("#", "Topic", "SubExpression"), sub_rows, "Below is subscription:"),
    ]
    notes = [
        f"ConsumeType: {cc.consume_type.name}",
        f"MessageModel: {cc.message_model.name}",
        f"ConsumeFromWhere: {cc.consume_from_where.name}",
    ]
    return Output(data, tables, notes)


async def get_consumer_config(tool: AdminTool, args: argparse.Namespace) -> Output:
    """getConsumerConfig: a consumer group's configuration on every master that has it."""
    info = await tool.admin.cluster_info()
    data: list[dict[str, Any]] = []
    tables: list[Table] = []
    for cluster in sorted(info.cluster_addr_table):
        for name in sorted(info.cluster_addr_table[cluster]):
            addr = info.broker_addr_table[name].master_addr
            if addr is None:
                continue
            answer = await tool.call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            table = SubscriptionGroupWrapper.from_json(answer.body).subscription_group_table
            config = table.get(args.groupName)
            if config is None:
                continue
            fields = config.to_dict()
            data.append({"cluster": cluster, "brokerName": name, "addr": addr, "config": fields})
            title = f"{cluster}/{name} ({addr})"
            tables.append(Table(("Key", "Value"), sorted(fields.items()), title))
    if not data:
        raise TargetError(f"consumer group {args.groupName!r} is not configured on any master")
    return Output(data, tables)


# -- offsets -------------------------------------------------------------------------------


async def _reset_online(
    tool: AdminTool, group: str, topic: str, stamp: int, force: bool, as_cpp: bool
) -> dict[MessageQueue, int]:
    """INVOKE_BROKER_TO_RESET_OFFSET on every broker of the topic (CONSUMER_NOT_ONLINE raises)."""
    route = await tool.admin.topic_route(topic)
    header = ResetOffsetRequestHeader(topic, group, stamp, force)
    table: dict[MessageQueue, int] = {}
    for b in route.broker_datas:
        if b.master_addr is None:
            continue
        answer = await tool.call(
            b.master_addr,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
            header,
            # mqadmin's -c: the broker then tells the clients in the C++ body format.
            language=LanguageCode.CPP.name if as_cpp else None,
        )
        table.update(ResetOffsetBody.from_json(answer.body).offset_table)
    return dict(sorted(table.items()))


async def _reset_offline(
    tool: AdminTool, group: str, topic: str, stamp: int, force: bool
) -> list[dict[str, Any]]:
    """Mqadmin's old path: read the group's offsets, search, commit; one rollback row per queue."""
    route = await tool.admin.topic_route(topic)
    read_nums = {q.broker_name: q.read_queue_nums for q in route.queue_datas}
    rows: list[dict[str, Any]] = []
    for b in route.broker_datas:
        addr = b.master_addr
        if addr is None:
            continue
        answer = await tool.call(
            addr, RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader(group, None)
        )
        offsets = {
            mq: (w.broker_offset, w.consumer_offset)
            for mq, w in ConsumeStats.from_json(answer.body).offset_table.items()
            if mq.topic == topic
        }
        if not offsets:  # never consumed here: from the queue's minimum
            stats_answer = await tool.call(
                addr, RequestCode.GET_TOPIC_STATS_INFO, GetTopicStatsInfoRequestHeader(topic)
            )
            stats = TopicStatsTable.from_json(stats_answer.body).offset_table
            for qid in range(read_nums.get(b.broker_name, 0)):
                mq = MessageQueue(topic, b.broker_name, qid)
                if mq in stats:
                    offsets[mq] = (stats[mq].max_offset, stats[mq].min_offset)
        for mq, (broker_offset, consumer_offset) in sorted(offsets.items()):
            found = await tool.queue_offset(addr, mq, "max" if stamp == -1 else "search", stamp)
            rollback = consumer_offset
            if force or found <= consumer_offset:
                rollback = found
                await tool.commit_offset(addr, group, mq, found)
            rows.append(
                {
                    "brokerName": mq.broker_name,
                    "queueId": mq.queue_id,
                    "brokerOffset": broker_offset,
                    "consumerOffset": consumer_offset,
                    "timestampOffset": found,
                    "rollbackOffset": rollback,
                }
            )
    return rows


async def _reset(
    tool: AdminTool, group: str, topic: str, stamp_text: str, force: bool, as_cpp: bool
) -> Output:
    stamp = parse_time(stamp_text)
    # "now" goes out as -1 (each queue's end, as mqadmin sends it) and is shown as the
    # time it stands for; an explicit -1 (skipAccumulatedMessage) is shown as given.
    shown = int(time.time() * 1000) if stamp_text.strip() == "now" else stamp
    what = f"group[{group}], topic[{topic}], force[{str(force).lower()}]"
    when = f"timestamp(string)[{stamp_text}], timestamp(long)[{shown}]"
    try:
        table = await _reset_online(tool, group, topic, stamp, force, as_cpp)
    except BrokerError as exc:
        if exc.response_code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
    else:
        rows: list[Sequence[object]] = [(mq.broker_name, mq.queue_id, o) for mq, o in table.items()]
        data = [
            {"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": o}
            for mq, o in table.items()
        ]
        title = f"rollback consumer offset by specified {what}, {when}"
        headers = ("brokerName", "queueId", "offset")
        output = {"online": True, "timestamp": shown, "queues": data}
        return Output(output, [Table(headers, rows, title)])
    found = await _reset_offline(tool, group, topic, stamp, force)
    title = f"rollback consumer offset by specified consumer{what[0].upper()}{what[1:]}, {when}"
    rollback_headers = (
        "brokerName",
        "queueId",
        "brokerOffset",
        "consumerOffset",
        "timestampOffset",
        "rollbackOffset",
    )
    rows = [tuple(r.values()) for r in found]
    output = {"online": False, "timestamp": shown, "queues": found}
    return Output(output, [Table(rollback_headers, rows, title)])


async def reset_offset_by_time(tool: AdminTool, args: argparse.Namespace) -> Output:
    """resetOffsetByTime: move a group's offsets on a topic to a store time."""
    return await _reset(tool, args.group, args.topic, args.timestamp, args.force, args.cplus)


async def skip_accumulated_message(tool: AdminTool, args: argparse.Namespace) -> Output:
    """skipAccumulatedMessage: move a group's offsets on a topic to the end."""
    return await _reset(tool, args.group, args.topic, "-1", args.force, False)


async def clone_group_offset(tool: AdminTool, args: argparse.Namespace) -> Output:
    """cloneGroupOffset: give a group every committed offset another group has.

    As mqadmin 4.9.4's ``CloneGroupOffsetCommand``: the source group's offsets on every
    topic it consumes (``examineConsumeStats(srcGroup)``, its retry topic included),
    each written for the destination group to the broker of that name in ``-t``'s
    route (master, else a slave, as ``selectBrokerAddr``). ``-t`` only locates the
    brokers. A queue whose broker is not in that route is skipped and named in a note
    (mqadmin sends it to a null address and fails there, after the earlier queues).
    """
    stats = await tool.admin.consume_stats(args.srcGroup)
    route = await tool.admin.topic_route(args.topic)
    addrs = {
        b.broker_name: b.master_addr or b.broker_addrs[min(b.broker_addrs)]
        for b in route.broker_datas
        if b.broker_addrs
    }
    copied: list[dict[str, Any]] = []
    notes: list[str] = []
    for mq, w in stats.offset_table.items():
        if w.consumer_offset < 0:
            continue
        addr = addrs.get(mq.broker_name)
        if addr is None:
            where = f"{mq.topic} queue {mq.queue_id} of {mq.broker_name}"
            notes.append(f"skipped {where}: the broker is not in {args.topic}'s route")
            continue
        await tool.commit_offset(addr, args.destGroup, mq, w.consumer_offset)
        copied.append({**mq.to_dict(), "offset": w.consumer_offset})
    notes.append(
        f"clone group offset success. srcGroup[{args.srcGroup}], "
        f"destGroup=[{args.destGroup}], topic[{args.topic}]"
    )
    return Output(
        {"srcGroup": args.srcGroup, "destGroup": args.destGroup, "queues": copied}, notes=notes
    )


#: This module's verbs, by mqadmin name.
CONSUMER_VERBS = {
    "producerConnection": producer_connection,
    "consumerConnection": consumer_connection,
    "getConsumerConfig": get_consumer_config,
    "resetOffsetByTime": reset_offset_by_time,
    "skipAccumulatedMessage": skip_accumulated_message,
    "cloneGroupOffset": clone_group_offset,
}
