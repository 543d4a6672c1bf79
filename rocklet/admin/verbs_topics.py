"""Topic verbs of ``rocklet admin``: updateTopicPerm, topicClusterList, allocateMQ."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from rocklet.admin.format import Output, Table
from rocklet.admin.tool import AdminTool, TargetError
from rocklet.client.allocate import allocate_averagely
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.headers.admin import CreateTopicRequestHeader

__all__ = ["TOPIC_VERBS"]


async def update_topic_perm(tool: AdminTool, args: argparse.Namespace) -> Output:
    """updateTopicPerm: change a topic's permission on a broker or a cluster's masters.

    The queue counts and system flag are kept from the topic's route, as mqadmin does.
    """
    addrs = await tool.targets(args.clusterName, args.brokerAddr)
    route = await tool.admin.topic_route(args.topic)
    names = {b.master_addr: b.broker_name for b in route.broker_datas}
    queues = {q.broker_name: q for q in route.queue_datas}
    notes: list[str] = []
    data: list[dict[str, Any]] = []
    for addr in addrs:
        queue = queues.get(names.get(addr, ""))
        if queue is None:
            raise TargetError(f"topic {args.topic!r} has no route data on broker {addr}")
        if queue.perm == args.perm:
            notes.append(f"new perm equals to the old one! ({addr})")
            data.append({"brokerAddr": addr, "oldPerm": queue.perm, "perm": args.perm})
            continue
        header = CreateTopicRequestHeader(
            topic=args.topic,
            default_topic="TBW102",
            read_queue_nums=queue.read_queue_nums,
            write_queue_nums=queue.write_queue_nums,
            perm=args.perm,
            topic_sys_flag=queue.topic_sys_flag,
        )
        await tool.create_topic([addr], header)
        notes.append(f"update topic perm from {queue.perm} to {args.perm} in {addr} success.")
        data.append({"brokerAddr": addr, "oldPerm": queue.perm, "perm": args.perm})
    return Output(data, notes=notes)


async def topic_cluster_list(tool: AdminTool, args: argparse.Namespace) -> Output:
    """topicClusterList: the clusters that serve a topic."""
    route = await tool.admin.topic_route(args.topic)
    brokers = {b.broker_name for b in route.broker_datas}
    info = await tool.admin.cluster_info()
    clusters = sorted(c for c, names in info.cluster_addr_table.items() if brokers & set(names))
    return Output(clusters, [Table(("Cluster Name",), [(c,) for c in clusters])])


def _mq_text(mq: MessageQueue) -> str:
    return f"{mq.broker_name}:{mq.queue_id}"


async def allocate_mq(tool: AdminTool, args: argparse.Namespace) -> Output:
    """allocateMQ: which queues each client of a list gets (AllocateMessageQueueAveragely)."""
    route = await tool.admin.topic_route(args.topic)
    mqs = sorted(
        MessageQueue(args.topic, q.broker_name, i)
        for q in route.queue_datas
        for i in range(q.read_queue_nums)
    )
    ips = [ip.strip() for ip in args.ipList.split(",") if ip.strip()]
    result = {ip: allocate_averagely("aa", ip, mqs, ips) for ip in ips}
    rows: list[Sequence[object]] = [
        (ip, " ".join(_mq_text(mq) for mq in got) or None) for ip, got in result.items()
    ]
    data = {"result": {ip: [mq.to_dict() for mq in got] for ip, got in result.items()}}
    return Output(data, [Table(("Client", "Queues (broker:queueId)"), rows)])


#: This module's verbs, by mqadmin name.
TOPIC_VERBS = {
    "updateTopicPerm": update_topic_perm,
    "topicClusterList": topic_cluster_list,
    "allocateMQ": allocate_mq,
}
