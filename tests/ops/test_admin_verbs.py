"""``rocklet admin``'s second set of verbs against a real Rocklet name server and broker.

Each test drives the verbs in-process through :func:`rocklet.admin.run_admin_async`
(the code the command runs) and checks both the printed result and the broker's or
name server's state afterwards.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from rocklet.client.pull_consumer import PullConsumer
from rocklet.client.push_consumer import PushConsumer
from rocklet.protocol.bodies.queue import MessageQueue
from tests.cluster import running_cluster
from tests.ops.test_admin_cli import admin, admin_json


async def test_topic_perm_cluster_list_allocation_and_order_conf(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        addr = cluster.broker.addr
        code, _, err = await admin(cluster, "updateTopic", "-b", addr, "-t", "Perm", "-r", "4")
        assert code == 0, err
        code, out, err = await admin(
            cluster, "updateTopicPerm", "-b", addr, "-t", "Perm", "-p", "4"
        )
        assert (code, out) == (0, f"update topic perm from 6 to 4 in {addr} success.\n"), err
        topic = cluster.broker.ctx.topics.find("Perm")
        assert topic is not None and topic.perm == 4
        code, out, _ = await admin(
            cluster, "updateTopicPerm", "-c", "DefaultCluster", "-t", "Perm", "-p", "4"
        )
        assert code == 0 and out.startswith("new perm equals to the old one!")
        with pytest.raises(SystemExit) as bad_usage:  # argparse: exit 2
            await admin(cluster, "updateTopicPerm", "-b", addr, "-t", "Perm", "-p", "5")
        assert bad_usage.value.code == 2

        assert await admin_json(cluster, "topicClusterList", "-t", "Perm") == ["DefaultCluster"]
        allocation = await admin_json(cluster, "allocateMQ", "-t", "Perm", "-i", "c1,c2,c3")
        got = {ip: [q["queueId"] for q in qs] for ip, qs in allocation["result"].items()}
        assert got == {"c1": [0, 1], "c2": [2], "c3": [3]}

        code, out, _ = await admin(
            cluster, "updateOrderConf", "-t", "Perm", "-m", "put", "-v", "broker-a:4"
        )
        assert code == 0 and "update orderConf success" in out
        got_conf = await admin_json(cluster, "updateOrderConf", "-t", "Perm", "-m", "get")
        assert got_conf == {"topic": "Perm", "orderConf": "broker-a:4"}
        code, _, _ = await admin(cluster, "updateOrderConf", "-t", "Perm", "-m", "delete")
        assert code == 0
        code, _, err = await admin(cluster, "updateOrderConf", "-t", "Perm", "-m", "get")
        assert code == 1 and "has no order conf" in err
        code, out, _ = await admin(cluster, "updateKvConfig", "-s", "NS", "-k", "K", "-v", "V")
        assert (code, out) == (0, "create or update kv config to namespace success.\n")
        assert cluster.namesrv.kv.get("NS", "K") == "V"  # the KV store is the name server's
        code, out, _ = await admin(cluster, "deleteKvConfig", "-s", "NS", "-k", "K")
        assert (code, out) == (0, "delete kv config from namespace success.\n")
        assert cluster.namesrv.kv.get("NS", "K") is None


async def test_offsets_reset_skip_clone_and_consumer_config(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        addr = cluster.broker.addr
        code, _, _ = await admin(
            cluster, "updateTopic", "-b", addr, "-t", "Offs", "-r", "1", "-w", "1"
        )
        assert code == 0
        async with Producer("AdminPG", cluster.namesrv_addr) as producer:
            sent = [await producer.send(Message("Offs", f"m{i}".encode())) for i in range(5)]
        mq = MessageQueue("Offs", "broker-a", 0)
        for group in ("Src", "Dst"):
            code, _, _ = await admin(cluster, "updateSubGroup", "-b", addr, "-g", group)
            assert code == 0
        code, _, _ = await admin(
            cluster, "updateTopic", "-b", addr, "-t", "Offs2", "-r", "1", "-w", "1"
        )
        assert code == 0
        async with Producer("AdminPG", cluster.namesrv_addr) as producer:
            await producer.send(Message("Offs2", b"other"))
        async with PullConsumer("Src", cluster.namesrv_addr) as consumer:
            await consumer.pull(mq, 0, 1)  # learns the route
            await consumer.commit(mq, 2)
            other = MessageQueue("Offs2", "broker-a", 0)
            await consumer.pull(other, 0, 1)
            await consumer.commit(other, 1)
        # Nobody of Src is online: the broker answers CONSUMER_NOT_ONLINE, the admin
        # falls back to committing the offsets itself (six columns).
        code, out, err = await admin(
            cluster, "resetOffsetByTime", "-g", "Src", "-t", "Offs", "-s", "now"
        )
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].startswith("rollback consumer offset by specified consumerGroup[Src]")
        assert lines[1].split() == [
            "#brokerName",
            "#queueId",
            "#brokerOffset",
            "#consumerOffset",
            "#timestampOffset",
            "#rollbackOffset",
        ]
        assert lines[2].split() == ["broker-a", "0", "5", "2", "5", "5"]
        assert cluster.broker.ctx.offsets.query("Src", "Offs", 0) == 5

        # Time 0 is before the first store: back to the first message's offset.
        reset = await admin_json(cluster, "resetOffsetByTime", "-g", "Src", "-t", "Offs", "-s", "0")
        assert reset["queues"][0]["rollbackOffset"] == sent[0].queue_offset == 0
        assert cluster.broker.ctx.offsets.query("Src", "Offs", 0) == 0
        skipped = await admin_json(cluster, "skipAccumulatedMessage", "-g", "Src", "-t", "Offs")
        assert [q["rollbackOffset"] for q in skipped["queues"]] == [5]
        assert cluster.broker.ctx.offsets.query("Src", "Offs", 0) == 5

        code, out, _ = await admin(
            cluster, "cloneGroupOffset", "-s", "Src", "-d", "Dst", "-t", "Offs"
        )
        assert code == 0 and out.startswith("clone group offset success. srcGroup[Src]")
        assert cluster.broker.ctx.offsets.query("Dst", "Offs", 0) == 5
        # As mqadmin: every topic's offsets of the source group, -t only names brokers.
        assert cluster.broker.ctx.offsets.query("Dst", "Offs2", 0) == 1
        cloned = await admin_json(
            cluster, "cloneGroupOffset", "-s", "Src", "-d", "Dst", "-t", "Offs"
        )
        assert {(q["topic"], q["queueId"], q["offset"]) for q in cloned["queues"]} == {
            ("Offs", 0, 5),
            ("Offs2", 0, 1),
        }

        (config,) = await admin_json(cluster, "getConsumerConfig", "-g", "Dst")
        assert (config["addr"], config["config"]["groupName"]) == (addr, "Dst")
        code, _, err = await admin(cluster, "getConsumerConfig", "-g", "Nobody")
        assert code == 1 and "not configured on any master" in err


async def test_message_verbs_send_print_consume_and_unique_key(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        addr = cluster.broker.addr
        code, _, _ = await admin(
            cluster, "updateTopic", "-b", addr, "-t", "Msgs", "-r", "2", "-w", "2"
        )
        assert code == 0
        sent = await admin_json(
            cluster,
            "sendMessage",
            "-t",
            "Msgs",
            "-p",
            "hello",
            "-k",
            "k1 k2",
            "-c",
            "TagA",
            "-b",
            "broker-a",
            "-i",
            "1",
        )
        assert (sent["sendStatus"], sent["queueId"], sent["queueOffset"]) == ("SEND_OK", 1, 0)
        code, out, _ = await admin(
            cluster, "sendMessage", "-t", "Msgs", "-p", "second", "-c", "TagB"
        )
        assert code == 0 and "SEND_OK" in out

        found = await admin_json(cluster, "queryMsgByUniqueKey", "-i", sent["msgId"], "-t", "Msgs")
        assert [(m["body"], m["tags"], m["keys"]) for m in found] == [
            ("hello", "TagA", ["k1", "k2"])
        ]

        printed = await admin_json(cluster, "printMsg", "-t", "Msgs", "-s", "TagA")
        assert [m["body"] for m in printed["messages"]] == ["hello"]
        code, out, _ = await admin(cluster, "printMsg", "-t", "Msgs", "-d", "true")
        assert code == 0 and "hello" in out and "second" in out and out.endswith("2 message(s)\n")

        one = await admin_json(
            cluster,
            "consumeMessage",
            "-t",
            "Msgs",
            "-b",
            "broker-a",
            "-i",
            "1",
            "-o",
            "0",
            "-c",
            "1",
        )
        assert [m["body"] for m in one] == ["hello"]
        code, out, _ = await admin(cluster, "consumeMessage", "-t", "Msgs")
        assert code == 0 and out.endswith("Consume ok\n") and "second" in out

        rt = await admin_json(cluster, "checkMsgSendRT", "-t", "Msgs", "-a", "4", "-s", "16")
        assert [(s["queueId"], s["ok"]) for s in rt["sends"]] == [
            (0, True),
            (1, True),
            (0, True),
            (1, True),
        ]
        status = await admin_json(cluster, "sendMsgStatus", "-b", "broker-a", "-c", "2", "-s", "8")
        assert [s["sendStatus"] for s in status] == ["SEND_OK", "SEND_OK"]
        # one message to queue 1, then checkMsgSendRT's 4 round the two queues
        stats = await admin_json(cluster, "topicStatus", "-t", "Msgs")
        assert sum(q["maxOffset"] for q in stats) == 6
        code, _, err = await admin(
            cluster, "sendMessage", "-t", "Msgs", "-p", "x", "-b", "broker-a"
        )
        assert code == 1 and "-b and -i go together" in err

        # clusterRT streams a row per broker and round (mqadmin's runs until stopped).
        before = await admin_json(cluster, "topicStatus", "-t", "broker-a")
        code, out, _ = await admin(
            cluster, "clusterRT", "-a", "3", "-s", "8", "-i", "0", "--rounds", "2"
        )
        lines = out.splitlines()
        assert code == 0 and lines[0].split() == [
            "#Cluster",
            "Name",
            "#Broker",
            "Name",
            "#RT",
            "#successCount",
            "#failCount",
        ], out
        rows = [line.split() for line in lines[1:]]
        assert [(r[0], r[1], r[3], r[4]) for r in rows] == [
            ("DefaultCluster", "broker-a", "3", "0")
        ] * 2, out
        assert all(float(r[2]) >= 0 for r in rows)
        # Its six sends went to the broker's own topic.
        after = await admin_json(cluster, "topicStatus", "-t", "broker-a")
        assert sum(q["maxOffset"] for q in after) - sum(q["maxOffset"] for q in before) == 6


async def test_broker_and_name_server_config_and_stats(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        addr = cluster.broker.addr
        config = await admin_json(cluster, "getBrokerConfig", "-b", addr)
        assert config["brokerName"] == "broker-a"
        by_cluster = await admin_json(cluster, "getBrokerConfig", "-c", "DefaultCluster")
        assert by_cluster["brokerClusterName"] == "DefaultCluster"
        code, out, err = await admin(
            cluster, "updateBrokerConfig", "-b", addr, "-k", "brokerPermission", "-v", "6"
        )
        assert (code, out) == (0, f"update broker config success, {addr}\n"), err

        async with Producer("StatsPG", cluster.namesrv_addr) as producer:
            await producer.send(Message("Stats", b"x"))
            (conn,) = await admin_json(
                cluster, "producerConnection", "-g", "StatsPG", "-t", "Stats"
            )
            assert conn["clientId"] == producer.instance.client_id
            code, out, _ = await admin(
                cluster, "producerConnection", "-g", "StatsPG", "-t", "Stats"
            )
            assert code == 0 and out.splitlines()[1].split()[-1] == "V4_9_4"  # getVersionDesc
        (row,) = await admin_json(cluster, "statsAll", "-t", "Stats")
        assert (row["topic"], row["outMsg24Hour"]) == ("Stats", "NO_CONSUMER")
        code, out, _ = await admin(cluster, "statsAll", "-t", "Stats")
        assert code == 0 and out.splitlines()[0].split()[:2] == ["#Topic", "#Consumer"]
        assert (row["group"], row["accumulation"]) == (None, 0)  # no group consumes it


async def test_server_side_verbs_perm_namesrv_config_consume_stats_and_clean_ups(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path) as cluster:
        addr = cluster.broker.addr
        code, _, _ = await admin(
            cluster, "updateTopic", "-b", addr, "-t", "Srv", "-r", "1", "-w", "1"
        )
        assert code == 0
        async with Producer("SrvPG", cluster.namesrv_addr) as producer:
            await producer.send(Message("Srv", b"x"))
            producers = await admin_json(cluster, "producer", "-b", addr)
            assert producer.instance.client_id in {p["clientId"] for p in producers["SrvPG"]}

        code, out, err = await admin(cluster, "wipeWritePerm", "-b", "broker-a")
        assert code == 0 and re.fullmatch(
            r"wipe write perm of broker\[broker-a\] in name server\[.+\] OK, \d+\n", out
        ), out
        route = await admin_json(cluster, "topicRoute", "-t", "Srv")
        assert [q["perm"] for q in route["queueDatas"]] == [4]
        code, out, _ = await admin(cluster, "addWritePerm", "-b", "broker-a")
        assert code == 0 and "OK" in out
        route = await admin_json(cluster, "topicRoute", "-t", "Srv")
        assert [q["perm"] for q in route["queueDatas"]] == [6]

        ns_config = await admin_json(cluster, "getNamesrvConfig")
        assert cluster.namesrv_addr in ns_config
        code, out, err = await admin(
            cluster, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"
        )
        assert code == 0 and "update name server config success!" in out, err
        ns_config = await admin_json(cluster, "getNamesrvConfig")
        assert ns_config[cluster.namesrv_addr]["orderMessageEnable"] == "true"

        code, _, _ = await admin(cluster, "updateSubGroup", "-b", addr, "-g", "SrvG")
        async with PullConsumer("SrvG", cluster.namesrv_addr) as consumer:
            await consumer.pull(MessageQueue("Srv", "broker-a", 0), 0, 1)
            await consumer.commit(MessageQueue("Srv", "broker-a", 0), 0)
        stats = await admin_json(cluster, "brokerConsumeStats", "-b", addr)
        lag = [(q["topic"], q["group"], q["diff"]) for q in stats["queues"]]
        assert ("Srv", "SrvG", 1) in lag
        code, out, _ = await admin(cluster, "brokerConsumeStats", "-b", addr, "-l", "1")
        assert code == 0 and "Diff Total:" in out

        async def listener(_msgs: list[MessageExt]) -> ConsumeResult:
            return ConsumeResult.SUCCESS

        online = PushConsumer("SrvG", cluster.namesrv_addr)
        online.subscribe("Srv", "TagA || TagB", listener)
        await online.start()
        try:
            conns = await admin_json(cluster, "consumerConnection", "-g", "SrvG")
            assert conns["subscriptions"]["Srv"] == "TagA || TagB"
            assert len(conns["connections"]) == 1
            assert conns["messageModel"] == "CLUSTERING"
        finally:
            await online.shutdown()

        cq = await admin_json(cluster, "queryCq", "-t", "Srv", "-q", "0", "-i", "0", "-c", "5")
        assert (cq["maxQueueIndex"], len(cq["queueData"])) == (1, 1)

        for verb in ("cleanExpiredCQ", "deleteExpiredCommitLog", "cleanUnusedTopic"):
            code, out, err = await admin(cluster, verb, "-b", addr)
            assert (code, out) == (0, "success\n"), (verb, err)

        code, out, err = await admin(
            cluster, "updateBrokerConfig", "-b", addr, "-k", "brokerPermission", "-v", "4"
        )
        assert code == 0, err
        config = await admin_json(cluster, "getBrokerConfig", "-b", addr)
        assert config["brokerPermission"] == "4"
