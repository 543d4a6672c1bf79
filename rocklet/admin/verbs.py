"""What each ``rocklet admin`` verb does: mqadmin's commands over :class:`AdminTool`.

Every verb takes the parsed arguments and returns an :class:`~rocklet.admin.format.Output`
(JSON-ready data plus tables); failures are raised as :class:`~rocklet.client.errors.ClientError`
and turned into one line on standard error by :mod:`rocklet.admin`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable, Sequence

from rocklet.admin.format import Output, Table, fmt_ms, message_data, message_table
from rocklet.admin.groups import consumer_progress, consumer_status
from rocklet.admin.tool import AdminTool, TargetError
from rocklet.admin.verbs_acl import ACL_VERBS
from rocklet.admin.verbs_broker import BROKER_VERBS
from rocklet.admin.verbs_consumers import CONSUMER_VERBS
from rocklet.admin.verbs_export import EXPORT_VERBS
from rocklet.admin.verbs_messages import MESSAGE_VERBS
from rocklet.admin.verbs_monitor import MONITOR_VERBS
from rocklet.admin.verbs_namesrv import NAMESRV_VERBS
from rocklet.admin.verbs_running import RUNNING_VERBS
from rocklet.admin.verbs_topics import TOPIC_VERBS
from rocklet.admin.verbs_trace import TRACE_VERBS
from rocklet.client.errors import ClientError, NoRouteError
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.route import Perm
from rocklet.protocol.bodies.subscription_group import SubscriptionGroupConfig
from rocklet.protocol.headers.admin import CreateTopicRequestHeader
from rocklet.protocol.message_id import parse_offset_msg_id
from rocklet.protocol.names import DLQ_PREFIX, RETRY_PREFIX, is_retry_topic
from rocklet.store_report import finding_rows, heading, summary_rows, verdict

__all__ = ["VERBS", "Verb"]

#: A verb's implementation.
Verb = Callable[[AdminTool, argparse.Namespace], Awaitable[Output]]


def _perm_text(perm: int) -> str:
    return ("R" if perm & Perm.READ else "-") + ("W" if perm & Perm.WRITE else "-")


def _done(action: str, addrs: Sequence[str], data: dict[str, object]) -> Output:
    return Output({**data, "brokers": list(addrs)}, notes=[f"{action} {a} success." for a in addrs])


# -- topics ---------------------------------------------------------------------------


async def update_topic(tool: AdminTool, args: argparse.Namespace) -> Output:
    """updateTopic: create or update a topic on a broker (-b) or every master of -c."""
    addrs = await tool.targets(args.clusterName, args.brokerAddr)
    header = CreateTopicRequestHeader(
        topic=args.topic,
        default_topic="TBW102",
        read_queue_nums=args.readQueueNums,
        write_queue_nums=args.writeQueueNums,
        perm=args.perm,
        order=args.order,
    )
    await tool.create_topic(addrs, header)
    config = {
        "topicName": args.topic,
        "readQueueNums": args.readQueueNums,
        "writeQueueNums": args.writeQueueNums,
        "perm": args.perm,
        "order": args.order,
    }
    return _done("create topic to", addrs, config)


async def delete_topic(tool: AdminTool, args: argparse.Namespace) -> Output:
    """deleteTopic: delete a topic from a cluster's brokers and the name servers."""
    if args.topic not in await tool.admin.list_topics():
        raise NoRouteError(args.topic)
    await tool.targets(args.clusterName, None)  # a clear error for an unknown cluster
    await tool.admin.delete_topic(args.topic, cluster=args.clusterName)
    return Output(
        {"topic": args.topic, "cluster": args.clusterName},
        notes=[f"delete topic [{args.topic}] from cluster [{args.clusterName}] success."],
    )


async def topic_list(tool: AdminTool, args: argparse.Namespace) -> Output:
    """topicList: every topic; with -c, with the cluster that serves it."""
    if not args.clusterModel:
        topics = await tool.admin.list_topics()
        return Output(topics, [Table(("Topic",), [(t,) for t in topics])])
    info = await tool.admin.cluster_info()
    pairs = [
        (cluster, topic)
        for cluster in sorted(info.cluster_addr_table)
        for topic in await tool.topics_of_cluster(cluster)
    ]
    data = [{"cluster": c, "topic": t} for c, t in pairs]
    return Output(data, [Table(("Cluster Name", "Topic"), list(pairs))])


async def topic_route(tool: AdminTool, args: argparse.Namespace) -> Output:
    """topicRoute: the name server's route of a topic."""
    route = await tool.admin.topic_route(args.topic)
    brokers = Table(
        ("Cluster Name", "Broker Name", "BID", "Addr"),
        [
            (b.cluster, b.broker_name, bid, addr)
            for b in route.broker_datas
            for bid, addr in sorted(b.broker_addrs.items())
        ],
    )
    queues = Table(
        ("Broker Name", "Read Queues", "Write Queues", "Perm", "Sys Flag"),
        [
            (
                q.broker_name,
                q.read_queue_nums,
                q.write_queue_nums,
                _perm_text(q.perm),
                q.topic_sys_flag,
            )
            for q in route.queue_datas
        ],
    )
    return Output(json.loads(route.to_json()), [brokers, queues])


async def topic_status(tool: AdminTool, args: argparse.Namespace) -> Output:
    """topicStatus: min and max offset and last store time of every queue."""
    stats = await tool.admin.topic_stats(args.topic)
    rows: list[Sequence[object]] = [
        (mq.broker_name, mq.queue_id, o.min_offset, o.max_offset, fmt_ms(o.last_update_timestamp))
        for mq, o in stats.items()
    ]
    data = [
        {
            "brokerName": mq.broker_name,
            "queueId": mq.queue_id,
            "minOffset": o.min_offset,
            "maxOffset": o.max_offset,
            "lastUpdateTimestamp": o.last_update_timestamp,
        }
        for mq, o in stats.items()
    ]
    headers = ("Broker Name", "QID", "Min Offset", "Max Offset", "Last Updated")
    return Output(data, [Table(headers, rows)])


# -- subscription groups ----------------------------------------------------------------


async def update_sub_group(tool: AdminTool, args: argparse.Namespace) -> Output:
    """updateSubGroup: create or update a consumer group's config on brokers."""
    addrs = await tool.targets(args.clusterName, args.brokerAddr)
    config = SubscriptionGroupConfig(
        group_name=args.groupName,
        consume_enable=args.consumeEnable,
        consume_from_min_enable=args.consumeFromMinEnable,
        consume_broadcast_enable=args.consumeBroadcastEnable,
        retry_queue_nums=args.retryQueueNums,
        retry_max_times=args.retryMaxTimes,
        broker_id=args.brokerId,
        which_broker_when_consume_slowly=args.whichBrokerWhenConsumeSlowly,
        notify_consumer_ids_changed_enable=args.notifyConsumerIdsChanged,
    )
    await tool.update_group(addrs, config)
    return _done("create subscription group to", addrs, config.to_dict())


async def delete_sub_group(tool: AdminTool, args: argparse.Namespace) -> Output:
    """deleteSubGroup: forget a consumer group (and, with -r true, its offsets).

    With ``-c``, as mqadmin, the group's retry and dead-letter topics go too (from the
    cluster's brokers and the name servers); ``-b`` leaves them. A topic that cannot be
    deleted is reported and does not undo the group's deletion.
    """
    group, cluster = args.groupName, args.clusterName
    addrs = await tool.targets(cluster, args.brokerAddr)
    await tool.delete_group(addrs, group, args.removeOffset)
    where = "" if args.brokerAddr else f" in cluster [{cluster}]"
    notes = [
        f"delete subscription group [{group}] from broker [{a}]{where} success." for a in addrs
    ]
    deleted: list[str] = []
    if not args.brokerAddr:
        for topic in (RETRY_PREFIX + group, DLQ_PREFIX + group):
            try:
                await tool.admin.delete_topic(topic, cluster=cluster)
            except ClientError as exc:
                notes.append(f"could not delete topic [{topic}]: {exc}")
                continue
            deleted.append(topic)
            notes.append(f"delete topic [{topic}] from cluster [{cluster}] success.")
            notes.append(f"delete topic [{topic}] from NameServer success.")
    data = {
        "groupName": group,
        "removeOffset": args.removeOffset,
        "brokers": addrs,
        "deletedTopics": deleted,
    }
    return Output(data, notes=notes)


# -- messages -----------------------------------------------------------------------------


async def query_msg_by_key(tool: AdminTool, args: argparse.Namespace) -> Output:
    """queryMsgByKey: messages of a topic carrying a key."""
    found = await tool.admin.query_by_key(args.topic, args.msgKey, max_num=args.maxNum)
    rows: list[Sequence[object]] = [
        (m.msg_id, m.broker_name, m.queue_id, m.queue_offset, fmt_ms(m.store_timestamp))
        for m in found
    ]
    table = Table(("Message ID", "Broker Name", "QID", "Offset", "Store Time"), rows)
    return Output([message_data(m) for m in found], [table], [f"{len(found)} message(s)"])


async def query_msg_by_id(tool: AdminTool, args: argparse.Namespace) -> Output:
    """queryMsgById: messages by offset msgId; with -t, by client msgId (UNIQ_KEY) first."""
    messages = []
    for msg_id in [i.strip() for i in args.msgId.split(",") if i.strip()]:
        msg = None
        if args.topic:
            msg = await tool.admin.query_by_unique_key(args.topic, msg_id)
        if msg is None:
            parse_offset_msg_id(msg_id)  # MessageFormatError for what is not an id at all
            try:
                msg = await tool.admin.view_message(msg_id)
            except ClientError as exc:
                hint = "" if args.topic else " (a client msgId needs -t TOPIC)"
                raise TargetError(f"message {msg_id} not found: {exc}{hint}") from exc
        messages.append(msg)
    return Output([message_data(m) for m in messages], [message_table(m) for m in messages])


async def query_msg_by_offset(tool: AdminTool, args: argparse.Namespace) -> Output:
    """queryMsgByOffset: the message at one queue offset."""
    mq = MessageQueue(args.topic, args.brokerName, args.queueId)
    msg = await tool.message_at(mq, args.offset)
    if msg is None:
        raise TargetError(
            f"no message at offset {args.offset} of {args.topic}/{args.brokerName}/{args.queueId}"
        )
    return Output(message_data(msg), [message_table(msg)])


# -- cluster and brokers ----------------------------------------------------------------


def _first(tps: str | None) -> str | None:
    """The 10-second rate of a runtime ``*Tps`` value, with mqadmin's two decimals."""
    if not tps:
        return None
    try:
        return f"{float(tps.split()[0]):.2f}"
    except ValueError:  # not a number: shown as the broker sent it
        return tps.split()[0]


def _replication(kv: dict[str, str]) -> str | None:
    """The clusterList cell for a broker's HA side (docs/replication.md's ``ha*`` keys)."""
    if "haConnectedSlaves" in kv:
        n = int(kv["haConnectedSlaves"])
        if n == 0:
            return "no slave"
        return (
            f"{n} slave{'s' if n > 1 else ''}, max lag {kv.get('haMaxLagBytes')} B "
            f"{kv.get('haMaxLagSeconds')} s"
        )
    if "haConnected" in kv:
        if kv.get("haDiverged", "false") != "false":
            return "diverged (see haDiverged)"
        state = "" if kv["haConnected"] == "true" else "disconnected, "
        return f"{state}lag {kv.get('haLagBytes')} B {kv.get('haLagSeconds')} s"
    return None  # not a Rocklet broker, or one from before replication


async def _broker_row(
    tool: AdminTool, cluster: str, name: str, bid: int, addr: str
) -> tuple[Sequence[object], dict[str, object]]:
    try:
        kv = await tool.runtime_info(addr)
    except ClientError:
        kv = {}  # listed anyway, as mqadmin does for a broker that is down
    ratio = kv.get("commitLogDiskRatio")
    # -1 means the commitlog directory does not exist yet (nothing stored).
    disk = f"{float(ratio) * 100:.1f}%" if ratio and float(ratio) >= 0 else None
    row = (
        cluster,
        name,
        bid,
        addr,
        kv.get("brokerVersionDesc"),
        _first(kv.get("putTps")),
        _first(kv.get("getTransferedTps")),
        disk,
        kv.get("commitLogMaxOffset"),
        _replication(kv),
    )
    data: dict[str, object] = {
        "cluster": cluster,
        "brokerName": name,
        "brokerId": bid,
        "addr": addr,
        "reachable": bool(kv),
        "replication": _replication(kv),
        "runtime": kv,
    }
    return row, data


async def cluster_list(tool: AdminTool, args: argparse.Namespace) -> Output:
    """clusterList: every broker by cluster: version, TPS, disk use, replication lag."""
    info = await tool.admin.cluster_info()
    if args.clusterName and args.clusterName not in info.cluster_addr_table:
        raise TargetError(f"cluster {args.clusterName!r} is unknown to the name server")
    rows: list[Sequence[object]] = []
    data: list[dict[str, object]] = []
    for cluster in sorted(info.cluster_addr_table):
        if args.clusterName and cluster != args.clusterName:
            continue
        for name in sorted(info.cluster_addr_table[cluster]):
            for bid, addr in sorted(info.broker_addr_table[name].broker_addrs.items()):
                row, entry = await _broker_row(tool, cluster, name, bid, addr)
                rows.append(row)
                data.append(entry)
    headers = (
        "Cluster Name",
        "Broker Name",
        "BID",
        "Addr",
        "Version",
        "InTPS",
        "OutTPS",
        "Disk Used",
        "CommitLog Max Offset",
        "Replication",
    )
    return Output(data, [Table(headers, rows)])


async def broker_status(tool: AdminTool, args: argparse.Namespace) -> Output:
    """brokerStatus: a broker's (or a cluster's brokers') runtime info."""
    addrs = await tool.targets(args.clusterName, args.brokerAddr)
    data: dict[str, dict[str, str]] = {}
    tables = []
    for addr in addrs:
        kv = await tool.runtime_info(addr)
        data[addr] = kv
        title = addr if len(addrs) > 1 else None
        tables.append(Table(("Key", "Value"), sorted(kv.items()), title))
    return Output(data if len(addrs) > 1 else data[addrs[0]], tables)


async def store_check(tool: AdminTool, args: argparse.Namespace) -> Output:
    """storeCheck: a broker's check of its own store files (Rocklet only)."""
    addrs = await tool.targets(args.clusterName, args.brokerAddr)
    reports = {addr: await tool.store_check(addr) for addr in addrs}
    tables: list[Table] = []
    notes: list[str] = []
    for addr, report in reports.items():
        title = f"{heading(report)} at {addr}"
        tables.append(Table(("Figure", "Value"), summary_rows(report), title))
        if report["findings"]:
            headers = ("Severity", "Area", "File", "Offset", "What")
            tables.append(Table(headers, finding_rows(report)))
        notes.append(verdict(report) if len(addrs) == 1 else f"{addr}: {verdict(report)}")
    ok = all(report["ok"] for report in reports.values())
    data = reports[addrs[0]] if len(addrs) == 1 else reports
    return Output(data, tables, notes, exit_code=0 if ok else 1)


async def _group_guard(verb: Verb, tool: AdminTool, args: argparse.Namespace) -> Output:
    try:
        return await verb(tool, args)
    except NoRouteError as exc:
        if not is_retry_topic(exc.topic):
            raise
        group = exc.topic[len(RETRY_PREFIX) :]
        raise TargetError(
            f"consumer group {group!r} is unknown: it has never consumed "
            f"(the name server has no {exc.topic} topic)"
        ) from exc


async def _consumer_progress(tool: AdminTool, args: argparse.Namespace) -> Output:
    return await _group_guard(consumer_progress, tool, args)


async def _consumer_status(tool: AdminTool, args: argparse.Namespace) -> Output:
    return await _group_guard(consumer_status, tool, args)


async def _consumer(tool: AdminTool, args: argparse.Namespace) -> Output:
    return await _group_guard(RUNNING_VERBS["consumer"], tool, args)


#: Verb name (mqadmin's) to implementation.
VERBS: dict[str, Verb] = {
    "updateTopic": update_topic,
    "deleteTopic": delete_topic,
    "topicList": topic_list,
    "topicRoute": topic_route,
    "topicStatus": topic_status,
    "updateSubGroup": update_sub_group,
    "deleteSubGroup": delete_sub_group,
    "consumerProgress": _consumer_progress,
    "consumerStatus": _consumer_status,
    "queryMsgByKey": query_msg_by_key,
    "queryMsgById": query_msg_by_id,
    "queryMsgByOffset": query_msg_by_offset,
    "clusterList": cluster_list,
    "brokerStatus": broker_status,
    "storeCheck": store_check,
    **TOPIC_VERBS,
    **CONSUMER_VERBS,
    **RUNNING_VERBS,
    "consumer": _consumer,
    **BROKER_VERBS,
    **NAMESRV_VERBS,
    **MESSAGE_VERBS,
    **ACL_VERBS,
    **EXPORT_VERBS,
    **TRACE_VERBS,
    **MONITOR_VERBS,
}
