"""The real RocketMQ 4.9.4 ``mqadmin`` against Rocklet and RocketMQ 4.9.4: cluster, topics,
groups, offsets and the name server.

One ``mqadmin`` JVM per system runs every verb (see mqadmin.py), on the session's shared
system, seeded once per system (admin_seed.py). Each test runs verbs and checks what
they printed, with the same expectations on both systems: the RocketMQ runs prove them.
Tests that change state use topics and groups of their own, so they do not depend on
their order; the one that changes the name server's write perms of the broker restores
them.

``mqadmin`` exits 0 and prints a stack trace when a verb fails, so the tests judge the
printed text: rows, "success" lines, the ``CODE: N`` of a refusal.
"""

from __future__ import annotations

import json
import re

from rocklet.broker.rocketmq_keys import ROCKETMQ_NAMESRV_KEYS
from tests.java.admin_seed import (
    BROKER,
    CLUSTER,
    OFFLINE,
    ONLINE,
    PRODUCER_GROUP,
    QUEUES,
    TOPIC,
    Seeded,
    assert_topic_status,
    progress_rows,
    retry_topic,
    settled,
)
from tests.java.javatier import tier_marks
from tests.java.mqadmin import normalise

pytestmark = tier_marks()

# --- cluster and topics --------------------------------------------------------------------------


def test_cluster_list_shows_the_broker(seeded: Seeded) -> None:
    output = seeded.run("clusterList")
    lines = output.splitlines()
    assert lines[0].split()[:5] == ["#Cluster", "Name", "#Broker", "Name", "#BID"], output
    rows = [line.split() for line in lines[1:] if line.strip()]
    assert len(rows) == 1, output
    assert rows[0][:5] == [CLUSTER, BROKER, "0", seeded.system.broker, "V4_9_4"], output


def test_topic_list_has_the_seeded_and_system_topics(seeded: Seeded) -> None:
    names = set(seeded.run("topicList").split())
    expected = {TOPIC, f"%RETRY%{ONLINE}", f"%RETRY%{OFFLINE}", "TBW102", CLUSTER, BROKER}
    expected |= {"SCHEDULE_TOPIC_XXXX", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC"}
    assert expected <= names, names


def test_topic_route_lists_the_queues_and_the_broker(seeded: Seeded) -> None:
    output = seeded.run("topicRoute", "-t", TOPIC)
    assert normalise(output) == (
        "{\n"
        '\t"brokerDatas":[\n'
        "\t\t{\n"
        '\t\t\t"brokerAddrs":{0:"<addr>"\n'
        "\t\t\t},\n"
        f'\t\t\t"brokerName":"{BROKER}",\n'
        f'\t\t\t"cluster":"{CLUSTER}"\n'
        "\t\t}\n"
        "\t],\n"
        '\t"filterServerTable":{},\n'
        '\t"queueDatas":[\n'
        "\t\t{\n"
        f'\t\t\t"brokerName":"{BROKER}",\n'
        '\t\t\t"perm":6,\n'
        '\t\t\t"readQueueNums":4,\n'
        '\t\t\t"topicSysFlag":0,\n'
        '\t\t\t"writeQueueNums":4\n'
        "\t\t}\n"
        "\t]\n"
        "}\n"
    )
    assert f'{{0:"{seeded.system.broker}"' in output


def test_topic_status_shows_each_queues_offsets(seeded: Seeded) -> None:
    assert_topic_status(seeded)


def test_topic_cluster_list_names_the_cluster(seeded: Seeded) -> None:
    assert seeded.run("topicClusterList", "-t", TOPIC).split() == [CLUSTER]


def _route_queue(seeded: Seeded, topic: str) -> dict[str, int]:
    output = seeded.run("topicRoute", "-t", topic)
    fields = re.findall(r'"(perm|readQueueNums|writeQueueNums)":(\d+)', output)
    assert len(fields) == 3, output
    return {k: int(v) for k, v in fields}


def test_update_topic_creates_it_on_the_broker_and_in_the_route(seeded: Seeded) -> None:
    output = seeded.run("updateTopic", "-b", seeded.system.broker, "-t", "AdmNew", "-r", "3",
                        "-w", "3")  # fmt: skip
    assert output.splitlines() == [
        f"create topic to {seeded.system.broker} success.",
        "TopicConfig [topicName=AdmNew, readQueueNums=3, writeQueueNums=3, perm=RW-, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]",
    ]
    assert _route_queue(seeded, "AdmNew") == {"perm": 6, "readQueueNums": 3, "writeQueueNums": 3}
    # By cluster, as an ordered topic: the name server keeps its order conf.
    output = seeded.run("updateTopic", "-c", CLUSTER, "-t", "AdmOrdered", "-r", "2", "-w", "2",
                        "-o", "true")  # fmt: skip
    assert f"create topic to {seeded.system.broker} success." in output, output
    assert f"set cluster orderConf. isOrder=true, orderConf=[{BROKER}:2]" in output, output
    got = seeded.run("updateOrderConf", "-t", "AdmOrdered", "-m", "get")
    assert got.strip() == f"get orderConf success. topic=[AdmOrdered], orderConf=[{BROKER}:2]"


def test_update_topic_perm_changes_the_routes_perm(seeded: Seeded) -> None:
    seeded.run("updateTopic", "-c", CLUSTER, "-t", "AdmPerm", "-r", "2", "-w", "2")
    # By broker, an unchanged perm is refused by the tool itself (it reads the route).
    same = seeded.run("updateTopicPerm", "-b", seeded.system.broker, "-t", "AdmPerm", "-p", "6")
    assert same.strip() == "new perm equals to the old one!"
    output = seeded.run("updateTopicPerm", "-c", CLUSTER, "-t", "AdmPerm", "-p", "4")
    assert output.strip() == f"update topic perm from 6 to 4 in {seeded.system.broker} success."
    assert _route_queue(seeded, "AdmPerm")["perm"] == 4


def test_delete_topic_then_its_route_is_code_17(seeded: Seeded) -> None:
    seeded.run("updateTopic", "-c", CLUSTER, "-t", "AdmDel", "-r", "2", "-w", "2")
    assert _route_queue(seeded, "AdmDel")["perm"] == 6
    output = seeded.run("deleteTopic", "-c", CLUSTER, "-t", "AdmDel")
    assert output.splitlines() == [
        f"delete topic [AdmDel] from cluster [{CLUSTER}] success.",
        "delete topic [AdmDel] from NameServer success.",
    ]
    route = seeded.run("topicRoute", "-t", "AdmDel")
    assert "CODE: 17  DESC: No topic route info in name server for the topic: AdmDel" in route
    # RocketMQ's name server adds the FAQ hint to that remark (before the client's own).
    assert (
        "for the topic: AdmDel\nSee http://rocketmq.apache.org/docs/faq/ for further details."
        in route
    ), route


# --- groups ---------------------------------------------------------------------------------------


def test_update_get_and_delete_a_subscription_group(seeded: Seeded) -> None:
    group = "AdmSub"
    output = seeded.run("updateSubGroup", "-c", CLUSTER, "-g", group, "-r", "3")
    lines = output.splitlines()
    assert lines[0] == f"create subscription group to {seeded.system.broker} success.", output
    assert lines[1].startswith(f"SubscriptionGroupConfig [groupName={group}, consumeEnable=true")
    assert "retryMaxTimes=3" in lines[1], output
    config = seeded.run("getConsumerConfig", "-g", group)
    pairs = dict(
        (f[0], f[2]) for f in (line.split() for line in config.splitlines()) if len(f) == 3
    )
    assert config.startswith(f"============================={CLUSTER}:{BROKER}===="), config
    assert pairs["groupName"] == group and pairs["retryMaxTimes"] == "3", config
    assert pairs["consumeEnable"] == "true", config
    deleted = seeded.run("deleteSubGroup", "-c", CLUSTER, "-g", group)
    assert deleted.splitlines() == [
        f"delete subscription group [{group}] from broker [{seeded.system.broker}] in cluster"
        f" [{CLUSTER}] success.",
        f"delete topic [%RETRY%{group}] from cluster [{CLUSTER}] success.",
        f"delete topic [%RETRY%{group}] from NameServer success.",
        f"delete topic [%DLQ%{group}] from cluster [{CLUSTER}] success.",
        f"delete topic [%DLQ%{group}] from NameServer success.",
    ]
    assert seeded.run("getConsumerConfig", "-g", group).strip() == ""


def test_consumer_progress_of_the_online_group(seeded: Seeded) -> None:
    output = seeded.run("consumerProgress", "-g", ONLINE)
    assert settled(output), output
    assert "Diff Total: 0" in output.splitlines(), output
    assert re.search(r"^Consume TPS: \d+\.\d\d$", output, re.M), output
    summary = seeded.run("consumerProgress")
    row = next((line.split() for line in summary.splitlines() if line.startswith(ONLINE)), None)
    assert row == [ONLINE, "1", "V4_9_4", "PUSH", "CLUSTERING", "0", "0"], summary


def test_consumer_progress_of_the_offline_group(seeded: Seeded) -> None:
    output = seeded.run("consumerProgress", "-g", OFFLINE)
    assert settled(output), output
    assert "Diff Total: 0" in output.splitlines(), output


def test_consumer_connection_online_offline_and_unknown(seeded: Seeded) -> None:
    output = seeded.run("consumerConnection", "-g", ONLINE)
    lines = output.splitlines()
    assert lines[0].split() == ["#ClientId", "#ClientAddr", "#Language", "#Version"], output
    client = lines[1].split()
    assert re.fullmatch(rf"[\d.]+@{ONLINE}_\d+", client[0]), output
    assert client[2:] == ["JAVA", "V4_9_4"], output
    subscription = output.split("Below is subscription:")[1].splitlines()
    assert sorted(line.split() for line in subscription[2:4]) == [
        [f"%RETRY%{ONLINE}", "*"],
        [TOPIC, "*"],
    ], output
    for line in ("ConsumeType: CONSUME_PASSIVELY", "MessageModel: CLUSTERING",
                 "ConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET"):  # fmt: skip
        assert line in lines, output
    offline = seeded.run("consumerConnection", "-g", OFFLINE)
    assert f"CODE: 206  DESC: the consumer group[{OFFLINE}] not online" in offline, offline
    unknown = seeded.run("consumerConnection", "-g", "AdmNoSuchGroup")
    assert "CODE: 17  DESC: No topic route info in name server for the topic: %RETRY%" in unknown


def test_producer_connection_of_the_online_producer(seeded: Seeded) -> None:
    # The producer's heartbeat reaches the broker once it has a route (within seconds).
    output = seeded.wait_output(
        lambda out: out.startswith("0001"), "the producer's connection",
        "producerConnection", "-g", PRODUCER_GROUP, "-t", TOPIC,
    )  # fmt: skip
    row = output.split()
    assert re.fullmatch(rf"[\d.]+@{PRODUCER_GROUP}_\d+", row[1]), output
    assert row[3:] == ["JAVA", "V4_9_4"], output
    unknown = seeded.run("producerConnection", "-g", "AdmNoSuchProducer", "-t", TOPIC)
    assert "CODE: 1  DESC: the producer group[AdmNoSuchProducer] not exist" in unknown, unknown


def test_consumer_status_of_the_online_group(seeded: Seeded) -> None:
    output = seeded.run("consumerStatus", "-g", ONLINE)
    lines = output.splitlines()
    assert lines[0].split() == ["#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile"]
    row = lines[1].split()
    assert row[0] == "1" and row[2] == "V4_9_4", output
    assert re.fullmatch(rf"[\d.]+@{ONLINE}_\d+", row[1]), output
    assert "Same subscription in the same group of consumer" in lines, output
    assert "Rebalance OK" in lines, output
    # Its running info, written by the tool: the subscription and the four queues.
    info = (seeded.admin.home / row[3]).read_text()
    assert f"{TOPIC}" in info and "CONSUME_FROM_FIRST_OFFSET" in info, info
    offline = seeded.run("consumerStatus", "-g", OFFLINE)
    assert "CODE: 206" in offline, offline


def test_allocate_mq_splits_the_queues_between_clients(seeded: Seeded) -> None:
    output = seeded.run("allocateMQ", "-t", TOPIC, "-i", "10.0.0.1,10.0.0.2")
    result = json.loads(output)["result"]
    assert sorted(result) == ["10.0.0.1", "10.0.0.2"], output
    queues = [q["queueId"] for mqs in result.values() for q in mqs]
    assert sorted(queues) == list(range(QUEUES)), output
    assert [len(mqs) for mqs in result.values()] == [2, 2], output
    assert all(
        q["topic"] == TOPIC and q["brokerName"] == BROKER for m in result.values() for q in m
    )


def test_clone_group_offset_copies_the_offsets(seeded: Seeded) -> None:
    retry_topic(seeded, "AdmClone")
    output = seeded.run("cloneGroupOffset", "-s", OFFLINE, "-d", "AdmClone", "-t", TOPIC)
    assert output.strip() == (
        f"clone group offset success. srcGroup[{OFFLINE}], destGroup=[AdmClone], topic[{TOPIC}]"
    )
    progress = seeded.run("consumerProgress", "-g", "AdmClone")
    assert settled(progress), progress


def test_reset_offset_by_time_of_an_offline_group(seeded: Seeded) -> None:
    retry_topic(seeded, "AdmReset")
    seeded.run("cloneGroupOffset", "-s", OFFLINE, "-d", "AdmReset", "-t", TOPIC)
    output = seeded.run("resetOffsetByTime", "-g", "AdmReset", "-t", TOPIC, "-s", "0")
    # No consumer of the group online: the broker answers 206 and the tool falls back to
    # rolling the offsets back itself, with its own table.
    lines = output.splitlines()
    assert lines[0].startswith("rollback consumer offset by specified consumerGroup[AdmReset]")
    assert lines[1].split() == ["#brokerName", "#queueId", "#brokerOffset", "#consumerOffset",
                                "#timestampOffset", "#rollbackOffset"], output  # fmt: skip
    rows = sorted(line.split() for line in lines[2:] if line.strip())
    assert rows == [[BROKER, str(q), "2", "2", "0", "0"] for q in range(QUEUES)], output
    progress = seeded.run("consumerProgress", "-g", "AdmReset")
    after = progress_rows(progress)
    assert {k: v for k, v in after.items() if k[0] == TOPIC} == {
        (TOPIC, q): (2, 0) for q in range(QUEUES)
    }, progress


# --- name server kv config ------------------------------------------------------------------------


def test_kv_config_update_and_delete(seeded: Seeded) -> None:
    # No getKvConfig verb in 4.9.4: the order conf namespace is read by updateOrderConf get.
    put = seeded.run("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "AdmKv", "-v",
                     f"{BROKER}:7")  # fmt: skip
    assert put.strip() == "create or update kv config to namespace success."
    got = seeded.run("updateOrderConf", "-t", "AdmKv", "-m", "get")
    assert got.strip() == f"get orderConf success. topic=[AdmKv], orderConf=[{BROKER}:7]"
    deleted = seeded.run("deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "AdmKv")
    assert deleted.strip() == "delete kv config from namespace success."
    gone = seeded.run("updateOrderConf", "-t", "AdmKv", "-m", "get")
    assert "CODE: 22" in gone, gone


def test_update_order_conf_put_get_delete(seeded: Seeded) -> None:
    put = seeded.run("updateOrderConf", "-t", "AdmOrder", "-v", f"{BROKER}:4", "-m", "put")
    assert put.strip() == f"update orderConf success. topic=[AdmOrder], orderConf=[{BROKER}:4]"
    got = seeded.run("updateOrderConf", "-t", "AdmOrder", "-m", "get")
    assert got.strip() == f"get orderConf success. topic=[AdmOrder], orderConf=[{BROKER}:4]"
    deleted = seeded.run("updateOrderConf", "-t", "AdmOrder", "-m", "delete")
    assert deleted.strip() == "delete orderConf success. topic=[AdmOrder]"
    assert "CODE: 22" in seeded.run("updateOrderConf", "-t", "AdmOrder", "-m", "get")


# --- the name server ------------------------------------------------------------------------------


def test_get_namesrv_config_shows_the_keys_and_the_port(seeded: Seeded) -> None:
    output = seeded.run("getNamesrvConfig")
    lines = output.splitlines()
    assert lines[0] == f"============{seeded.system.namesrv}============", output
    rows = [line.partition("=  ") for line in lines[1:] if line.strip()]
    assert all(sep for _, sep, _ in rows), output
    shown = {key.strip(): value for key, _, value in rows}
    # Every key of 4.9.4 but the paths: this name server has no -c file, Rocklet's then
    # has no configStorePath (see broker/namesrv/configuration.py), and rocketmqHome is
    # the environment's; test_mqadmin_namesrv checks them with a -c file.
    expected = ROCKETMQ_NAMESRV_KEYS - {"configStorePath", "rocketmqHome"}
    assert not expected - set(shown), sorted(expected - set(shown))
    assert shown["listenPort"] == seeded.system.namesrv.rsplit(":", 1)[1], output
    assert shown["orderMessageEnable"] == "false", output


def test_wipe_then_add_write_perm_of_the_broker(seeded: Seeded) -> None:
    # Both count every topic of the broker in the name server: every topic listed.
    count = len(seeded.run("topicList").split())
    where = f"of broker[{BROKER}] in name server[{seeded.system.namesrv}]"
    try:
        wiped = seeded.run("wipeWritePerm", "-b", BROKER)
        assert wiped == f"wipe write perm {where} OK, {count}\n"
        assert _route_queue(seeded, TOPIC)["perm"] == 4
    finally:
        added = seeded.run("addWritePerm", "-b", BROKER)
    assert added == f"add write perm {where} OK, {count}\n"
    assert _route_queue(seeded, TOPIC)["perm"] == 6
