"""``rocklet admin``: each verb against a real name server and broker, tables and JSON.

Verbs run in-process through :func:`rocklet.admin.run_admin_async` (the same code the
command runs, with the output captured); two subprocess runs check the entry point's
exit codes.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

from rocklet.admin.run import run_admin_async
from rocklet.cli import build_parser
from rocklet.client.consume_result import ConsumeResult
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from rocklet.client.push_consumer import PushConsumer
from tests.cluster import Cluster, running_cluster

TIMEOUT = 15.0


async def admin(cluster: Cluster | None, *argv: str) -> tuple[int, str, str]:
    ns = [] if cluster is None else ["-n", cluster.namesrv_addr]
    args = build_parser().parse_args(["admin", *argv, *ns])
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.wait_for(run_admin_async(args, out, err, environ={}), TIMEOUT)
    return code, out.getvalue(), err.getvalue()


async def admin_json(cluster: Cluster, *argv: str) -> Any:
    code, out, err = await admin(cluster, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


async def test_topic_verbs_create_list_route_status_and_delete(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        addr = cluster.broker.addr
        registered = asyncio.create_task(cluster.broker.next_registration())
        await asyncio.sleep(0)  # let it start waiting before the topic table changes
        code, out, _ = await admin(
            cluster, "updateTopic", "-c", "DefaultCluster", "-t", "Orders", "-r", "3", "-w", "3"
        )
        assert code == 0 and out == f"create topic to {addr} success.\n"
        assert cluster.broker.ctx.topics.find("Orders") is not None
        await asyncio.wait_for(registered, TIMEOUT)  # the change re-registers at once
        assert "Orders" in await admin_json(cluster, "topicList")
        listed = await admin_json(cluster, "topicList", "-c")
        assert {"cluster": "DefaultCluster", "topic": "Orders"} in listed
        route = await admin_json(cluster, "topicRoute", "-t", "Orders")
        assert [q["readQueueNums"] for q in route["queueDatas"]] == [3]
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": addr}
        code, out, _ = await admin(cluster, "topicStatus", "-t", "Orders")
        lines = out.splitlines()
        assert code == 0 and lines[0].split() == [
            "#Broker",
            "Name",
            "#QID",
            "#Min",
            "Offset",
            "#Max",
            "Offset",
            "#Last",
            "Updated",
        ]
        assert [ln.split()[:4] for ln in lines[1:]] == [
            ["broker-a", str(q), "0", "0"] for q in range(3)
        ]

        code, out, _ = await admin(cluster, "deleteTopic", "-c", "DefaultCluster", "-t", "Orders")
        assert code == 0 and "success" in out
        assert cluster.broker.ctx.topics.find("Orders") is None
        code, out, err = await admin(cluster, "topicRoute", "-t", "Orders")
        assert (code, out) == (1, "")
        assert err == (
            "rocklet admin topicRoute: topic 'Orders' does not exist "
            "(the name server has no route for it)\n"
        )
        code, _, err = await admin(cluster, "deleteTopic", "-c", "DefaultCluster", "-t", "Orders")
        assert code == 1 and "'Orders' does not exist" in err


async def test_message_lookups_by_key_id_unique_key_and_offset(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        async with Producer("AdminPG", cluster.namesrv_addr) as producer:
            results = [
                await producer.send(Message("Lookup", f"body-{i}".encode(), keys=(f"k{i}",)))
                for i in range(3)
            ]
        found = await admin_json(cluster, "queryMsgByKey", "-t", "Lookup", "-k", "k1")
        assert [(m["body"], m["msgId"]) for m in found] == [("body-1", results[1].msg_id)]

        by_id = await admin_json(cluster, "queryMsgById", "-i", results[2].offset_msg_id)
        assert [m["body"] for m in by_id] == ["body-2"]
        by_uniq = await admin_json(cluster, "queryMsgById", "-i", results[0].msg_id, "-t", "Lookup")
        assert [m["offsetMsgId"] for m in by_uniq] == [results[0].offset_msg_id]

        mq = results[1].message_queue
        code, out, _ = await admin(
            cluster,
            "queryMsgByOffset",
            "-t",
            "Lookup",
            "-b",
            mq.broker_name,
            "-i",
            str(mq.queue_id),
            "-o",
            str(results[1].queue_offset),
        )
        assert (
            code == 0 and "body-1" in out and f"Queue Offset       {results[1].queue_offset}" in out
        )
        code, _, err = await admin(
            cluster,
            "queryMsgByOffset",
            "-t",
            "Lookup",
            "-b",
            mq.broker_name,
            "-i",
            str(mq.queue_id),
            "-o",
            "99",
        )
        assert code == 1 and "no message at offset 99" in err
        code, _, err = await admin(cluster, "queryMsgById", "-i", "not-an-id")
        assert code == 1 and "32 hex digits" in err


async def test_group_verbs_progress_and_running_status(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        addr, groups = cluster.broker.addr, cluster.broker.ctx.groups
        code, out, _ = await admin(
            cluster, "updateSubGroup", "-b", addr, "-g", "Billing", "-r", "5", "-s", "false"
        )
        assert code == 0 and out == f"create subscription group to {addr} success.\n"
        config = groups.find("Billing", create=False)
        assert config is not None and config.retry_max_times == 5 and not config.consume_enable
        # Unless given, as mqadmin 4.9.4 writes them (the config's own default is true).
        assert not config.consume_broadcast_enable and not config.consume_from_min_enable
        code, _, _ = await admin(cluster, "deleteSubGroup", "-c", "DefaultCluster", "-g", "Billing")
        assert code == 0 and groups.find("Billing", create=False) is None

        got: asyncio.Queue[MessageExt] = asyncio.Queue()

        async def listener(msgs: list[MessageExt]) -> ConsumeResult:
            for m in msgs:
                got.put_nowait(m)
            return ConsumeResult.SUCCESS

        async with Producer("AdminPG", cluster.namesrv_addr) as producer:
            for i in range(3):
                await producer.send(Message("Progress", f"m{i}".encode()))
            consumer = PushConsumer("Readers", cluster.namesrv_addr, consume_from="first")
            consumer.subscribe("Progress", "*", listener)
            await consumer.start()
            try:
                for _ in range(3):
                    await asyncio.wait_for(got.get(), TIMEOUT)
                (member,) = await admin_json(cluster, "consumerStatus", "-g", "Readers")
                assert member["properties"]["messageModel"] == "CLUSTERING"
                queues = {(q["topic"], q["queueId"]) for q in member["processQueues"]}
                assert {("Progress", q) for q in range(4)} <= queues
                assert all(not q["droped"] for q in member["processQueues"])
                progress = await admin_json(
                    cluster, "consumerProgress", "-g", "Readers", "-s", "true"
                )
                assert {q["clientIp"] for q in progress["queues"]} != {None}
            finally:
                await consumer.shutdown()  # commits the offsets
            for i in range(2):
                await producer.send(Message("Progress", f"late{i}".encode()))

        progress = await admin_json(cluster, "consumerProgress", "-g", "Readers")
        assert progress["diffTotal"] == 2
        per_queue = {q["queueId"]: q for q in progress["queues"] if q["topic"] == "Progress"}
        assert sum(q["diff"] for q in per_queue.values()) == 2
        assert all(q["brokerOffset"] - q["consumerOffset"] == q["diff"] for q in per_queue.values())
        code, out, _ = await admin(cluster, "consumerProgress", "-g", "Readers")
        assert code == 0 and out.rstrip().endswith("Diff Total: 2")
        summary = await admin_json(cluster, "consumerProgress")
        assert {"group": "Readers", "count": 0, "diffTotal": 2}.items() <= next(
            g for g in summary if g["group"] == "Readers"
        ).items()
        code, _, err = await admin(cluster, "consumerProgress", "-g", "Nobody")
        assert code == 1 and "consumer group 'Nobody' is unknown" in err
        code, _, err = await admin(cluster, "consumerStatus", "-g", "Readers")
        assert code == 1 and "CONSUMER_NOT_ONLINE" in err


async def test_cluster_list_broker_status_and_clear_errors(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        addr = cluster.broker.addr
        (row,) = await admin_json(cluster, "clusterList")
        assert (row["cluster"], row["brokerName"], row["addr"], row["reachable"]) == (
            "DefaultCluster",
            "broker-a",
            addr,
            True,
        )
        code, out, _ = await admin(cluster, "clusterList")
        cells = out.splitlines()[1].split()
        assert code == 0 and cells[:5] == ["DefaultCluster", "broker-a", "0", addr, "V4_9_4"]
        assert all(re.fullmatch(r"\d+\.\d\d", tps) for tps in cells[5:7]), out  # as mqadmin
        status = await admin_json(cluster, "brokerStatus", "-b", addr)
        assert status["brokerVersionDesc"] == "V4_9_4"
        by_cluster = await admin_json(cluster, "brokerStatus", "-c", "DefaultCluster")
        assert by_cluster["brokerVersionDesc"] == "V4_9_4"  # one broker: not keyed by address
        code, _, err = await admin(cluster, "brokerStatus", "-c", "Elsewhere")
        assert code == 1 and "cluster 'Elsewhere' is unknown" in err
        code, _, err = await admin(cluster, "updateTopic", "-t", "NoTarget")
        assert code == 1 and "name a broker with -b or a cluster with -c" in err

        # NAMESRV_ADDR stands in for -n, as for mqadmin.
        args = build_parser().parse_args(["admin", "topicList"])
        out_io, err_io = io.StringIO(), io.StringIO()
        env = {"NAMESRV_ADDR": cluster.namesrv_addr}
        assert await run_admin_async(args, out_io, err_io, environ=env) == 0
        assert "TBW102" in out_io.getvalue().split()

    code, out, err = await admin(None, "clusterList", "-n", "127.0.0.1:1")
    assert (code, out) == (1, "")
    assert err.startswith("rocklet admin clusterList: cannot reach the name server at 127.0.0.1:1")


async def run_command(*argv: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rocklet",
        "admin",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_command_exits_0_on_success_1_on_failure_2_on_bad_usage(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        code, out, _ = await run_command("topicRoute", "-t", "TBW102", "-n", cluster.namesrv_addr)
        assert code == 0 and out.startswith("#Cluster Name")
        code, out, err = await run_command("topicRoute", "-t", "Nope", "-n", cluster.namesrv_addr)
        assert (code, out) == (1, "") and "'Nope' does not exist" in err
    code, _, err = await run_command("topicRoute")
    assert code == 2 and "-t/--topic" in err
