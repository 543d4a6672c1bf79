"""Message verbs of ``rocklet admin``: look, read, send and time.

queryCq, queryMsgByUniqueKey, printMsg, printMsgByQueue, consumeMessage, sendMessage,
checkMsgSendRT, sendMsgStatus and DecodeMessageId (which reads only its argument).
Reads are pulls as ``TOOLS_CONSUMER`` (the group mqadmin pulls with), which commit
nothing; sends go through an SDK producer on the admin's client instance.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from rocklet.admin.format import Output, Table, fmt_ms, message_data, message_table
from rocklet.admin.tool import TOOLS_CONSUMER_GROUP, AdminTool, TargetError
from rocklet.admin.verbs_consumers import parse_time
from rocklet.client.errors import ClientError
from rocklet.client.message import Message, MessageExt, SendResult
from rocklet.client.producer import Producer
from rocklet.client.pull_api import PullStatus
from rocklet.protocol.bodies.maintenance import ConsumeMessageDirectlyResult
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.headers.consumer import ConsumeMessageDirectlyResultRequestHeader
from rocklet.protocol.message_id import parse_client_msg_id

__all__ = ["MESSAGE_VERBS"]

#: Messages per pull while reading a queue (mqadmin's printMsg pulls 32).
_PULL_BATCH = 32


async def query_cq(tool: AdminTool, args: argparse.Namespace) -> Output:
    """queryCq: raw consume-queue entries of a queue from an index on."""
    addr = args.broker
    if not addr:
        route = await tool.admin.topic_route(args.topic)
        addrs = [b.master_addr for b in route.broker_datas if b.master_addr]
        if not addrs:
            raise TargetError(f"topic {args.topic!r} has no master broker")
        addr = addrs[0]
    # An index out of the queue's range raises QueueIndexError: one line, exit 1.
    body = await tool.admin.query_consume_queue(
        addr, args.topic, args.queue, args.index, args.count, args.consumer
    )
    rows: list[Sequence[object]] = [
        (
            args.index + i,
            e.physic_offset,
            e.physic_size,
            e.tags_code,
            e.eval,
            e.msg,
            e.extend_data_json,
            e.bit_map,
        )
        for i, e in enumerate(body.queue_data or ())
    ]
    headers = ("idx", "Physic Offset", "Physic Size", "Tags Code", "Eval", "Msg", "Ext", "BitMap")
    notes = [f"max: {body.max_queue_index}, min: {body.min_queue_index}"]
    if body.subscription_data is not None:
        notes.insert(0, f"Subscription data: {json.dumps(body.subscription_data.to_dict())}")
    if body.filter_data is not None:
        notes.insert(0, f"Filter data: {body.filter_data}")
    data = {"brokerAddr": addr, **json.loads(body.to_json())}
    return Output(data, [Table(headers, rows)], notes)


async def query_msg_by_unique_key(tool: AdminTool, args: argparse.Namespace) -> Output:
    """queryMsgByUniqueKey: a message by client msgId; with -g and -d, consume it directly.

    ``-a`` changes nothing, as in mqadmin: RocketMQ's unique-key query
    (``MQAdminImpl.queryMessage``) keeps only the earliest stored match, so mqadmin's
    "show all" loop has one message to print.
    """
    msg = await tool.admin.query_by_unique_key(args.topic, args.msgId)
    if msg is None:
        raise TargetError(f"no message of topic {args.topic!r} has client msgId {args.msgId}")
    if not (args.consumerGroup and args.clientId):
        return Output([message_data(msg)], [message_table(msg)])
    header = ConsumeMessageDirectlyResultRequestHeader(
        args.consumerGroup, args.clientId, msg.offset_msg_id, msg.broker_name or None
    )
    answer = await tool.call(msg.store_addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, header)
    result = json.loads(ConsumeMessageDirectlyResult.from_json(answer.body).to_json())
    return Output(result, [Table(("Key", "Value"), sorted(result.items()))])


async def _queues(
    tool: AdminTool, topic: str, broker: str | None
) -> list[tuple[str, MessageQueue]]:
    """``(master addr, queue)`` of every read queue of a topic, optionally of one broker."""
    route = await tool.admin.topic_route(topic)
    masters = {b.broker_name: b.master_addr for b in route.broker_datas}
    found = [
        (addr, MessageQueue(topic, q.broker_name, i))
        for q in route.queue_datas
        if (addr := masters.get(q.broker_name)) and broker in (None, q.broker_name)
        for i in range(q.read_queue_nums)
    ]
    if not found:
        raise TargetError(f"topic {topic!r} has no readable queue on {broker or 'any broker'}")
    return sorted(found, key=lambda p: p[1])


async def _range(
    tool: AdminTool, addr: str, mq: MessageQueue, begin: str | None, end: str | None
) -> tuple[int, int]:
    low = await tool.queue_offset(addr, mq, "min")
    high = await tool.queue_offset(addr, mq, "max")
    if begin:
        low = await tool.queue_offset(addr, mq, "search", parse_time(begin))
    if end:
        high = await tool.queue_offset(addr, mq, "search", parse_time(end))
    return low, high


async def _pages(
    tool: AdminTool, addr: str, mq: MessageQueue, low: int, high: int, expr: str, group: str
) -> AsyncIterator[list[MessageExt]]:
    """The messages of ``mq`` in ``[low, high)`` matching ``expr``, one pull at a time.

    A pull with nothing matching moves on (mqadmin's printMsgByQueue stops there, which
    hides what a tag filter would find further on); the end of the queue or an offset
    the broker refuses ends the read.
    """
    offset = low
    while offset < high:
        result = await tool.pull(addr, mq, offset, _PULL_BATCH, expr, group)
        if result.status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL):
            return
        yield [m for m in result.messages if m.queue_offset < high]
        if result.next_begin_offset <= offset:
            return
        offset = result.next_begin_offset


async def _read(
    tool: AdminTool,
    addr: str,
    mq: MessageQueue,
    low: int,
    high: int,
    expr: str,
    group: str,
    limit: int,
) -> list[MessageExt]:
    found: list[MessageExt] = []
    async for page in _pages(tool, addr, mq, low, high, expr, group):
        found += page
        if len(found) >= limit:
            break
    return found[:limit]


def _rows(msgs: list[MessageExt], with_body: bool, charset: str) -> list[Sequence[object]]:
    return [
        (
            m.broker_name,
            m.queue_id,
            m.queue_offset,
            m.msg_id,
            m.tags,
            " ".join(m.keys) or None,
            fmt_ms(m.store_timestamp),
            m.body.decode(charset, "replace") if with_body else "NOT PRINT BODY",
        )
        for m in msgs
    ]


_MSG_HEADERS = ("Broker Name", "QID", "Offset", "Msg ID", "Tags", "Keys", "Store Time", "Body")


async def print_msg(tool: AdminTool, args: argparse.Namespace) -> Output:
    """printMsg: every message of a topic (optionally a time range and a tag expression)."""
    ranges: list[dict[str, Any]] = []
    msgs: list[MessageExt] = []
    for addr, mq in await _queues(tool, args.topic, None):
        low, high = await _range(tool, addr, mq, args.beginTimestamp, args.endTimestamp)
        ranges.append({**mq.to_dict(), "minOffset": low, "maxOffset": high})
        expr = args.subExpression
        msgs += await _read(tool, addr, mq, low, high, expr, TOOLS_CONSUMER_GROUP, 1 << 62)
    range_rows: list[Sequence[object]] = [
        (r["brokerName"], r["queueId"], r["minOffset"], r["maxOffset"]) for r in ranges
    ]
    tables = [
        Table(("Broker Name", "QID", "Min Offset", "Max Offset"), range_rows),
        Table(_MSG_HEADERS, _rows(msgs, args.printBody, args.charsetName)),
    ]
    data = {"queues": ranges, "messages": [message_data(m) for m in msgs]}
    return Output(data, tables, [f"{len(msgs)} message(s)"])


async def print_msg_by_queue(tool: AdminTool, args: argparse.Namespace) -> Output:
    """printMsgByQueue: one queue's messages (-p), or its message count per tag (-f)."""
    queues = await _queues(tool, args.topic, args.brokerName)
    found = [(a, mq) for a, mq in queues if mq.queue_id == args.queueId]
    if not found:
        raise TargetError(f"{args.brokerName} has no queue {args.queueId} of {args.topic}")
    ((addr, mq),) = found
    low, high = await _range(tool, addr, mq, args.beginTimestamp, args.endTimestamp)
    msgs: list[MessageExt] = []
    tags: Counter[str] = Counter()
    read = 0
    async for page in _pages(tool, addr, mq, low, high, args.subExpression, TOOLS_CONSUMER_GROUP):
        read += len(page)
        if args.calculate:
            tags.update(m.tags for m in page if m.tags and m.tags.strip())
        if args.printMsg:
            msgs += page
    data: dict[str, Any] = {**mq.to_dict(), "minOffset": low, "maxOffset": high, "read": read}
    tables = []
    if args.printMsg:
        data["messages"] = [message_data(m) for m in msgs]
        tables.append(Table(_MSG_HEADERS, _rows(msgs, args.printBody, args.charsetName)))
    if args.calculate:
        # Most frequent first, as mqadmin sorts them; ties by name so reruns agree.
        counts = sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))
        data["tagCounts"] = dict(counts)
        tables.append(Table(("Tag", "Count"), counts))
    note = f"{read} message(s) read in offsets [{low}, {high})"
    if not (args.printMsg or args.calculate):
        note += "; -p true prints them, -f true counts them by tag"
    return Output(data, tables, [note])


def month_time_ms(ms_in_month: int, now_ms: int) -> int:
    """When a client msgId was made, from its milliseconds since the start of a month.

    As mqadmin reads it: the month is this one in this host's time zone, or the one
    before when that would put the id at or after ``now_ms``.
    """
    now = datetime.datetime.fromtimestamp(now_ms / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if start.timestamp() * 1000 + ms_in_month >= now_ms:
        start = (start - datetime.timedelta(days=1)).replace(day=1)
    return round(start.timestamp() * 1000) + ms_in_month


async def decode_message_id(_tool: AdminTool, args: argparse.Namespace) -> Output:
    """DecodeMessageId: the sender's IP, pid and the time a client msgId was made."""
    try:
        parts = parse_client_msg_id(args.messageId.strip())
    except MessageFormatError as exc:
        raise TargetError(str(exc)) from None
    made = month_time_ms(parts.ms_in_month, int(time.time() * 1000))
    date = datetime.datetime.fromtimestamp(made / 1000).strftime("%Y-%m-%d#%H:%M:%S:")
    date += f"{made % 1000:03d}"
    data = {"ip": parts.ip, "pid": parts.pid, "date": date, "timestamp": made}
    return Output(data, notes=[f"ip={parts.ip}", f"pid={parts.pid}", f"date={date}"])


async def consume_message(tool: AdminTool, args: argparse.Namespace) -> Output:
    """consumeMessage: read up to -c messages of a queue, a broker or a whole topic."""
    if args.queueId is not None and not args.brokerName:
        raise TargetError("-i needs the queue's broker: -b BROKER_NAME")
    queues = await _queues(tool, args.topic, args.brokerName)
    if args.queueId is not None:
        queues = [(a, mq) for a, mq in queues if mq.queue_id == args.queueId]
        if not queues:
            raise TargetError(f"{args.brokerName} has no queue {args.queueId} of {args.topic}")
    msgs: list[MessageExt] = []
    for addr, mq in queues:
        if len(msgs) >= args.MessageNumber:
            break
        low, high = await _range(tool, addr, mq, args.beginTimestamp, args.endTimestamp)
        if args.offset is not None and len(queues) == 1:
            low = args.offset
        left = args.MessageNumber - len(msgs)
        msgs += await _read(tool, addr, mq, low, high, "*", args.consumerGroup, left)
    table = Table(_MSG_HEADERS, _rows(msgs, True, "utf-8"))
    return Output([message_data(m) for m in msgs], [table], ["Consume ok"])


# -- sending -----------------------------------------------------------------------------


@asynccontextmanager
async def _producer(tool: AdminTool, group: str) -> AsyncIterator[Producer]:
    producer = Producer(group, tool.namesrv_addrs[0], instance=tool.instance)
    await producer.start()
    try:
        yield producer
    finally:
        await producer.close()


def _sent(result: SendResult) -> dict[str, Any]:
    return {
        "sendStatus": result.status.name,
        "msgId": result.msg_id,
        "offsetMsgId": result.offset_msg_id,
        "brokerName": result.message_queue.broker_name,
        "queueId": result.message_queue.queue_id,
        "queueOffset": result.queue_offset,
    }


async def send_message(tool: AdminTool, args: argparse.Namespace) -> Output:
    """sendMessage: send one message (to a chosen queue with -b and -i)."""
    if (args.broker is None) != (args.qid is None):
        raise TargetError("-b and -i go together (a broker name and one of its queue ids)")
    keys = tuple(k for k in (args.key or "").split(" ") if k)
    msg = Message(args.topic, args.body.encode("utf-8"), tags=args.tags, keys=keys)
    async with _producer(tool, f"PID_ADMIN_{time.time_ns()}") as producer:
        if args.broker is None:
            result = await producer.send(msg)
        else:
            target = MessageQueue(args.topic, args.broker, args.qid)
            result = await producer.send_orderly(msg, target, lambda _qs, _m, mq: mq)
    data = _sent(result)
    row = (data["brokerName"], data["queueId"], data["sendStatus"], data["msgId"])
    return Output(data, [Table(("Broker Name", "QID", "Send Result", "MsgId"), [row])])


async def check_msg_send_rt(tool: AdminTool, args: argparse.Namespace) -> Output:
    """checkMsgSendRT: send -a messages of -s bytes round the queues and time each."""
    body = b"a" * args.size
    rows: list[Sequence[object]] = []
    data: list[dict[str, Any]] = []
    elapsed = 0.0
    picked: list[MessageQueue] = []

    def by_index(qs: Sequence[MessageQueue], _m: Message, n: int) -> MessageQueue:
        picked.append(qs[n % len(qs)])  # remembered for the row: the send may fail
        return picked[-1]

    async with _producer(tool, f"PID_ADMIN_{time.time_ns()}") as producer:
        for i in range(args.amount):
            picked.clear()
            start = time.perf_counter()
            try:
                await producer.send_orderly(Message(args.topic, body), i, by_index)
                ok = True
            except ClientError:
                ok = False
            rt_ms = (time.perf_counter() - start) * 1000
            if i:  # the first send also fetches the route: left out of the average
                elapsed += rt_ms
            mq = picked[-1] if picked else None
            row = (mq and mq.broker_name, mq and mq.queue_id, ok, f"{rt_ms:.0f}")
            rows.append(row)
            data.append(dict(zip(("brokerName", "queueId", "ok", "rtMs"), row, strict=True)))
    avg = elapsed / (args.amount - 1) if args.amount > 1 else 0.0
    headers = ("Broker Name", "QID", "Send Result", "RT")
    return Output({"sends": data, "avgRtMs": avg}, [Table(headers, rows)], [f"Avg RT: {avg:.2f}"])


async def send_msg_status(tool: AdminTool, args: argparse.Namespace) -> Output:
    """sendMsgStatus: send -c messages to the broker's own topic and time each."""
    rows: list[Sequence[object]] = []
    data: list[dict[str, Any]] = []
    async with _producer(tool, "PID_SMSC") as producer:
        await producer.send(Message(args.brokerName, b"a" * 16))  # warms the route up
        for _ in range(args.count):
            start = time.perf_counter()
            result = await producer.send(Message(args.brokerName, b"a" * args.messageSize))
            rt_ms = round((time.perf_counter() - start) * 1000)
            sent = {"rtMs": rt_ms, **_sent(result)}
            data.append(sent)
            rows.append(tuple(sent.values()))
    headers = ("RT ms", "Send Status", "MsgId", "OffsetMsgId", "Broker Name", "QID", "Offset")
    return Output(data, [Table(headers, rows)])


async def cluster_rt(tool: AdminTool, args: argparse.Namespace) -> Output:
    """clusterRT: every -i seconds, time -a sends to each broker's own topic, per cluster.

    Like mqadmin it runs until stopped (Ctrl-C), printing a row per broker and round
    as it goes; ``--rounds N`` stops after N rounds (Rocklet's; mqadmin has no end).
    """
    info = await tool.admin.cluster_info()
    clusters = [args.clusterName] if args.clusterName else sorted(info.cluster_addr_table)
    out = args.stream
    body = b"a" * args.size
    rounds: list[dict[str, Any]] = []
    if not args.json:
        out.write(f"{'#Cluster Name':<24}  {'#Broker Name':<24}  #RT   #successCount  #failCount\n")
    async with _producer(tool, f"PID_CLUSTER_RT_{time.time_ns()}") as producer:
        done = 0
        while not args.rounds or done < args.rounds:
            if done:
                await asyncio.sleep(args.interval)
            for cluster in clusters:
                names = info.cluster_addr_table.get(cluster)
                if names is None:
                    out.write(f"cluster [{cluster}] not exist\n")
                    continue
                for name in sorted(names):
                    row = await _time_sends(producer, Message(name, body), args.amount)
                    rounds.append(
                        {"round": done + 1, "clusterName": cluster, "brokerName": name, **row}
                    )
                    if args.json:
                        out.write(json.dumps(rounds[-1]) + "\n")
                    else:
                        out.write(
                            f"{cluster:<24}  {name:<24}  {row['rtMs']:<8.2f}  "
                            f"{row['successCount']:<16}  {row['failCount']:<16}\n"
                        )
                    out.flush()
            done += 1
    return Output(rounds, streamed=True)


async def _time_sends(producer: Producer, msg: Message, amount: int) -> dict[str, Any]:
    """Send ``msg`` ``amount`` times; the mean RT leaves out the first (route lookup)."""
    ok = failed = 0
    elapsed = 0.0
    for i in range(amount):
        start = time.perf_counter()
        try:
            await producer.send(msg)
            ok += 1
        except ClientError:
            failed += 1
        if i:
            elapsed += (time.perf_counter() - start) * 1000
    return {
        "rtMs": elapsed / (amount - 1) if amount > 1 else 0.0,
        "successCount": ok,
        "failCount": failed,
    }


#: This module's verbs, by mqadmin name.
MESSAGE_VERBS = {
    "queryCq": query_cq,
    "queryMsgByUniqueKey": query_msg_by_unique_key,
    "printMsg": print_msg,
    "printMsgByQueue": print_msg_by_queue,
    "DecodeMessageId": decode_message_id,
    "consumeMessage": consume_message,
    "sendMessage": send_message,
    "checkMsgSendRT": check_msg_send_rt,
    "sendMsgStatus": send_msg_status,
    "clusterRT": cluster_rt,
}
