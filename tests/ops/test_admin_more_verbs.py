"""``rocklet admin``: deleteSubGroup's retry and DLQ topics, printMsgByQueue, DecodeMessageId,
queryMsgTraceById and startMonitoring.

Against a real name server and broker on loopback, through the same entry point the
command runs (:func:`tests.ops.test_admin_cli.admin`).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from rocklet.client.push_consumer import PushConsumer
from tests.cluster import running_cluster
from tests.ops.test_admin_cli import TIMEOUT, admin, admin_json

CLUSTER = "DefaultCluster"


async def test_delete_sub_group_by_cluster_also_deletes_its_retry_and_dlq_topics(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path) as cluster:
        topics = cluster.broker.ctx.topics
        for group in ("Gone", "Kept"):
            code, _, err = await admin(cluster, "updateSubGroup", "-c", CLUSTER, "-g", group)
            assert code == 0, err
            for topic in (f"%RETRY%{group}", f"%DLQ%{group}"):
                code, _, err = await admin(cluster, "updateTopic", "-c", CLUSTER, "-t", topic)
                assert code == 0, err
        assert {"%RETRY%Gone", "%DLQ%Gone"} <= set(await admin_json(cluster, "topicList"))

        code, out, err = await admin(cluster, "deleteSubGroup", "-c", CLUSTER, "-g", "Gone")
        addr = cluster.broker.addr
        assert code == 0, err
        assert out.splitlines() == [
            f"delete subscription group [Gone] from broker [{addr}] in cluster [{CLUSTER}]"
            " success.",
            f"delete topic [%RETRY%Gone] from cluster [{CLUSTER}] success.",
            "delete topic [%RETRY%Gone] from NameServer success.",
            f"delete topic [%DLQ%Gone] from cluster [{CLUSTER}] success.",
            "delete topic [%DLQ%Gone] from NameServer success.",
        ]
        assert topics.find("%RETRY%Gone") is None and topics.find("%DLQ%Gone") is None
        listed = set(await admin_json(cluster, "topicList"))
        assert not {"%RETRY%Gone", "%DLQ%Gone"} & listed
        assert cluster.broker.ctx.groups.find("Gone", create=False) is None

        # -b names one broker and, as in mqadmin, leaves the group's topics alone.
        done = await admin_json(cluster, "deleteSubGroup", "-b", addr, "-g", "Kept")
        assert done == {
            "groupName": "Kept",
            "removeOffset": False,
            "brokers": [addr],
            "deletedTopics": [],
        }
        assert topics.find("%RETRY%Kept") is not None and topics.find("%DLQ%Kept") is not None
        assert cluster.broker.ctx.groups.find("Kept", create=False) is None


async def test_print_msg_by_queue_prints_and_counts_one_queues_messages(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        code, _, err = await admin(
            cluster, "updateTopic", "-c", CLUSTER, "-t", "ByQueue", "-r", "1", "-w", "1"
        )
        assert code == 0, err
        tags = ["TagA", "TagB", "TagA", None, "TagA", "TagC", "TagB"]
        # More than one pull's worth (32), so the read goes on past the first page.
        tags = tags * 6 + ["TagZ"]
        async with Producer("ByQueuePG", cluster.namesrv_addr) as producer:
            sent = [
                await producer.send(Message("ByQueue", f"m{i}".encode(), tags=tag))
                for i, tag in enumerate(tags)
            ]
        assert {r.message_queue.queue_id for r in sent} == {0}
        queue = ("-t", "ByQueue", "-a", "broker-a", "-i", "0")

        counted = await admin_json(cluster, "printMsgByQueue", *queue, "-f", "true")
        assert counted["read"] == len(tags) and "messages" not in counted
        assert list(counted["tagCounts"].items()) == [
            ("TagA", 18),
            ("TagB", 12),
            ("TagC", 6),
            ("TagZ", 1),
        ]
        code, out, _ = await admin(cluster, "printMsgByQueue", *queue, "-f", "true")
        assert (
            code == 0 and out.splitlines()[-1] == f"{len(tags)} message(s) read in offsets [0, 43)"
        )

        # A tag filter reads past pulls with nothing matching.
        last = await admin_json(cluster, "printMsgByQueue", *queue, "-s", "TagZ", "-p", "true")
        assert [m["queueOffset"] for m in last["messages"]] == [len(tags) - 1]
        only_c = await admin_json(
            cluster, "printMsgByQueue", *queue, "-s", "TagC", "-p", "true", "-d", "true"
        )
        assert [m["body"] for m in only_c["messages"]] == [
            f"m{i}" for i, t in enumerate(tags) if t == "TagC"
        ]
        code, out, _ = await admin(cluster, "printMsgByQueue", *queue, "-p", "true")
        assert code == 0 and "NOT PRINT BODY" in out and "m0" not in out

        # -b and -e bound the store times: before every message, nothing is read.
        code, out, _ = await admin(cluster, "printMsgByQueue", *queue, "-e", "1")
        assert code == 0 and out.splitlines()[-1].startswith("0 message(s) read")

        code, _, err = await admin(
            cluster, "printMsgByQueue", "-t", "ByQueue", "-a", "broker-a", "-i", "5"
        )
        assert code == 1 and "broker-a has no queue 5 of ByQueue" in err


async def test_decode_message_id_reads_the_senders_ip_pid_and_time(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        before = int(time.time() * 1000)
        async with Producer("DecodePG", cluster.namesrv_addr) as producer:
            result = await producer.send(Message("Decoded", b"x"))
        after = int(time.time() * 1000)
        decoded = await admin_json(cluster, "DecodeMessageId", "-i", result.msg_id)
        assert decoded["pid"] == os.getpid() & 0xFFFF
        # The id's time is when its producer (its id generator) was made.
        assert before - 1 <= decoded["timestamp"] <= after + 1
        code, out, _ = await admin(cluster, "DecodeMessageId", "-i", result.msg_id)
        assert code == 0 and out.splitlines()[0] == f"ip={decoded['ip']}"

    # It reads only its argument: no name server is asked.
    code, out, _ = await admin(None, "DecodeMessageId", "-i", "7F0000010ABC" + "0" * 20)
    assert code == 0 and out.splitlines()[:2] == ["ip=127.0.0.1", "pid=2748"]
    code, _, err = await admin(None, "DecodeMessageId", "-i", "not-hex")
    assert code == 1 and "32 hex digits" in err


async def test_query_msg_trace_by_id_shows_sends_and_consumes(tmp_path: Path) -> None:
    msg_id, other = "0A0000010001000000000000000A0001", "0A0000010001000000000000000A0002"
    F, R = "\x01", "\x02"
    records = [
        ["Pub", "1764331200123", "Region", "PG", "Orders", msg_id, "TagA", "k", "127.0.0.1:10911",
         "5", "3", "0", "7F00000100002A9F0000000000000C8A", "true"],
        ["SubBefore", "1764331200200", "Region", "CG", "req", msg_id, "0", "k"],
        ["SubAfter", "req", msg_id, "7", "false", "k", "1", "1764331200207", "CG"],
        ["SubAfter", "req2", other, "1", "true", "k", "0", "1764331200208", "CG"],
    ]  # fmt: skip
    body = "".join(F.join(r) + R for r in records).encode()
    async with running_cluster(tmp_path) as cluster:
        code, _, err = await admin(cluster, "updateTopic", "-c", CLUSTER, "-t", "Traces")
        assert code == 0, err
        async with Producer("TracePG", cluster.namesrv_addr) as producer:
            await producer.send(Message("Traces", body, keys=[msg_id, other]))
        argv = ("queryMsgTraceById", "-i", msg_id, "-t", "Traces")
        code, out, err = await admin(cluster, *argv)
        assert code == 0, err
        rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["Pub"], ["Sub"])]
        assert [(r[0], r[1], r[-2], r[-1]) for r in rows] == [
            ("Pub", "PG", "3ms", "success"),
            ("Sub", "CG", "7ms", "failed"),
        ], out
        found = await admin_json(cluster, *argv)
        assert [r["type"] for r in found] == ["Pub", "SubBefore", "SubAfter"]
        assert {r["clientHost"] for r in found} == {"127.0.0.1"}  # the trace's sender
        code, out, _ = await admin(cluster, "queryMsgTraceById", "-i", "AB" * 16, "-t", "Traces")
        assert code == 0 and out.strip() == f"no trace of {'AB' * 16} in Traces"


async def test_start_monitoring_reports_each_groups_backlog(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        code, _, err = await admin(
            cluster, "updateTopic", "-c", CLUSTER, "-t", "Watched", "-r", "1", "-w", "1"
        )
        assert code == 0, err
        got: asyncio.Queue[MessageExt] = asyncio.Queue()

        async def listener(msgs: list[MessageExt]) -> ConsumeResult:
            for m in msgs:
                got.put_nowait(m)
            return ConsumeResult.SUCCESS

        async with Producer("WatchPG", cluster.namesrv_addr) as producer:
            consumer = PushConsumer("Watchers", cluster.namesrv_addr, consume_from="first")
            consumer.subscribe("Watched", "*", listener)
            await consumer.start()
            try:
                for i in range(3):
                    await producer.send(Message("Watched", f"early {i}".encode()))
                consumed = [await asyncio.wait_for(got.get(), TIMEOUT) for _ in range(3)]
            finally:
                await consumer.shutdown()  # commits offset 3
            late = [await producer.send(Message("Watched", f"late {i}".encode())) for i in range(4)]

        newest = await admin_json(
            cluster, "queryMsgByOffset", "-t", "Watched", "-b", "broker-a", "-i", "0", "-o", "6"
        )
        assert newest["msgId"] == late[-1].msg_id
        code, out, err = await admin(cluster, "startMonitoring", "--rounds", "1", "--json")
        assert code == 0, err
        (record,) = [json.loads(line) for line in out.splitlines()]
        assert (record["round"], record["consumerGroup"], record["problems"]) == (
            1,
            "Watchers",
            [],
        )
        # The group's retry topic is one of its topics too (nothing to retry here).
        assert record["undone"] == [
            {
                "consumerGroup": "Watchers",
                "topic": "%RETRY%Watchers",
                "undoneMsgsTotal": 0,
                "undoneMsgsSingleMQ": 0,
                "undoneMsgsDelayTimeMills": 0,
            },
            {
                "consumerGroup": "Watchers",
                "topic": "Watched",
                "undoneMsgsTotal": 4,
                "undoneMsgsSingleMQ": 4,
                # How far behind in store time: the newest message against the last consumed.
                "undoneMsgsDelayTimeMills": newest["storeTimestamp"] - consumed[-1].store_timestamp,
            },
        ]
        code, out, _ = await admin(cluster, "startMonitoring", "--rounds", "2", "-i", "0")
        lines = out.splitlines()
        assert code == 0 and lines[0] == "round 1: 1 consumer group(s)", out
        rows = [line.split()[:4] for line in lines if line.startswith("Watchers ")]
        assert [r for r in rows if r[1] == "Watched"] == [["Watchers", "Watched", "4", "4"]] * 2
        assert lines[-2].startswith("round 2 took ") and lines[-1] == "", out
