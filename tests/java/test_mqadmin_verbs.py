"""The real RocketMQ 4.9.4 ``mqadmin`` against Rocklet and against RocketMQ 4.9.4.

One ``mqadmin`` JVM per system runs every verb (see mqadmin.py), on the session's shared
system (``admin_system``). Both systems are seeded the same way by the module's fixture:
a topic of 4 queues with 8 messages (keys, tags) sent by the Java client, push consumers
of two groups that stay online, a group whose consumer read everything and stopped, a
producer that stays online. Each test then runs verbs and checks what they printed, with
the same expectations on both systems: the RocketMQ runs prove them. Tests that change
state use topics and groups of their own, so they do not depend on their order; the one
that changes the name server's write perms of the broker restores them.

``mqadmin`` exits 0 and prints a stack trace when a verb fails, so the tests judge the
printed text: rows, "success" lines, the ``CODE: N`` of a refusal.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocklet.broker.rocketmq_keys import ROCKETMQ_NAMESRV_KEYS
from tests.java.javatier import (
    Event,
    JavaDriver,
    OutgoingMessage,
    System,
    java_clients,
    make_topic,
    tier_marks,
)
from tests.java.mqadmin import JavaProcess, MqAdmin, normalise

pytestmark = tier_marks()

TOPIC = "AdmT"
QUEUES = 4
COUNT = 8
#: The group whose push consumer stays online for the whole module.
ONLINE = "AdmG"
#: Another group online for the whole module, whose offsets a test resets.
RESET_ONLINE = "AdmResetOn"
#: The group whose consumer read every message and stopped before the tests.
OFFLINE = "AdmOff"
#: The group of a producer that stays online.
PRODUCER_GROUP = "AdmPG"
CLUSTER = "DefaultCluster"
BROKER = "broker-a"
#: Deliveries, a client's start, a state the broker reaches (offsets are committed every 5 s).
STEP_TIMEOUT_S = 60.0
#: Java's String.hashCode of the tags: a consume queue entry's tags code.
TAGS_CODE = {"TagA": 2598919, "TagB": 2598920}


def _message(i: int) -> OutgoingMessage:
    return OutgoingMessage(
        f"k{i} admKey", "TagA" if i % 2 == 0 else "TagB", {}, body=f"body {i}", queue=i % QUEUES
    )


@dataclass(frozen=True)
class Seeded:
    """A seeded system and the ``mqadmin`` to drive it.

    Attributes:
        system: The name server and broker.
        admin: ``mqadmin`` against its name server.
        sent: The ``sent`` events of the 8 messages (msgId, offsetMsgId, queueId, ...).
        online: The push consumers that stay online, by group.
    """

    system: System
    admin: MqAdmin
    sent: list[Event]
    online: dict[str, JavaProcess]

    def run(self, verb: str, *args: str) -> str:
        return self.admin.run(verb, *args)

    def wait_output(self, check: Callable[[str], bool], what: str, verb: str, *args: str) -> str:
        return self.admin.wait_output(check, what, verb, *args, timeout_s=STEP_TIMEOUT_S)


def _progress_rows(output: str) -> dict[tuple[str, int], tuple[int, int]]:
    """``consumerProgress -g``'s rows: (topic, queue) -> (broker offset, consumer offset)."""
    rows = {}
    for line in output.splitlines():
        f = line.split()
        if len(f) >= 6 and f[1] == BROKER and f[2].isdigit():
            rows[(f[0], int(f[2]))] = (int(f[3]), int(f[4]))
    return rows


def _settled(output: str) -> bool:
    """Every queue of the topic consumed and its offset committed to the broker."""
    rows = _progress_rows(output)
    return all(rows.get((TOPIC, q)) == (2, 2) for q in range(QUEUES))


@pytest.fixture(scope="module")
def seeded(
    java_driver: JavaDriver,
    admin_system: System,
    admin_tool: MqAdmin,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Seeded]:
    home = tmp_path_factory.mktemp(f"mqadmin-verbs-{admin_system.name}")
    messages = [_message(i) for i in range(COUNT)]

    async def produce() -> list[Event]:
        async with java_clients(java_driver, home / "clients", admin_system.namesrv) as c:
            return await c.produce("producer", TOPIC, messages)

    asyncio.run(make_topic(admin_system, TOPIC, QUEUES))
    namesrv = admin_system.namesrv
    # The clients' JVMs start while the messages are sent (the consumers start from the
    # first offset: they get all of them either way).
    consumers = {
        group: JavaProcess(
            java_driver, home / "java", group, "consume", namesrv, TOPIC, group, "timeout=600"
        )
        for group in (ONLINE, RESET_ONLINE, OFFLINE)
    }
    producer = JavaProcess(
        java_driver, home / "java", "producer-online", "tx", namesrv, PRODUCER_GROUP,
        "UNKNOW", "600",
    )  # fmt: skip
    try:
        sent = asyncio.run(produce())
        for consumer in consumers.values():
            consumer.wait_count("consumed", COUNT, STEP_TIMEOUT_S)
        producer.wait_event(("started",), STEP_TIMEOUT_S)
        online = {g: c for g, c in consumers.items() if g != OFFLINE}
        result = Seeded(admin_system, admin_tool, sent, online)
        # Every group consumed everything and the broker has their offsets (a client
        # commits them every 5 s); then one group goes offline.
        for group in consumers:
            result.wait_output(_settled, f"the offsets of {group}", "consumerProgress", "-g", group)
        assert consumers[OFFLINE].stop() == 0, consumers[OFFLINE].diagnostics()
        yield result
    finally:
        # The group whose offsets a test reset: its client would hold its shutdown 10 s.
        consumers.pop(RESET_ONLINE).kill()
        for child in (*consumers.values(), producer):
            child.stop()


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
    output = seeded.run("topicStatus", "-t", TOPIC)
    rows = [line.split()[:4] for line in output.splitlines()[1:] if line.strip()]
    assert sorted(rows) == [[BROKER, str(q), "0", "2"] for q in range(QUEUES)], output


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
    assert _settled(output), output
    assert "Diff Total: 0" in output.splitlines(), output
    assert re.search(r"^Consume TPS: \d+\.\d\d$", output, re.M), output
    summary = seeded.run("consumerProgress")
    row = next((line.split() for line in summary.splitlines() if line.startswith(ONLINE)), None)
    assert row == [ONLINE, "1", "V4_9_4", "PUSH", "CLUSTERING", "0", "0"], summary


def test_consumer_progress_of_the_offline_group(seeded: Seeded) -> None:
    output = seeded.run("consumerProgress", "-g", OFFLINE)
    assert _settled(output), output
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


def _retry_topic(seeded: Seeded, group: str) -> None:
    """The group's retry topic, which consumerProgress routes by (a consumer would make it)."""
    seeded.run("updateTopic", "-c", CLUSTER, "-t", f"%RETRY%{group}", "-r", "1", "-w", "1")


def test_clone_group_offset_copies_the_offsets(seeded: Seeded) -> None:
    _retry_topic(seeded, "AdmClone")
    output = seeded.run("cloneGroupOffset", "-s", OFFLINE, "-d", "AdmClone", "-t", TOPIC)
    assert output.strip() == (
        f"clone group offset success. srcGroup[{OFFLINE}], destGroup=[AdmClone], topic[{TOPIC}]"
    )
    progress = seeded.run("consumerProgress", "-g", "AdmClone")
    assert _settled(progress), progress


def test_reset_offset_by_time_of_an_offline_group(seeded: Seeded) -> None:
    _retry_topic(seeded, "AdmReset")
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
    after = _progress_rows(progress)
    assert {k: v for k, v in after.items() if k[0] == TOPIC} == {
        (TOPIC, q): (2, 0) for q in range(QUEUES)
    }, progress


# --- messages -------------------------------------------------------------------------------------


def _field(output: str, name: str) -> str:
    match = re.search(rf"^{name}:\s+(.*)$", output, re.M)
    assert match, output
    return match.group(1)


def test_query_msg_by_id(seeded: Seeded) -> None:
    first = seeded.sent[0]
    output = seeded.run("queryMsgById", "-i", first["offsetMsgId"])
    assert _field(output, "OffsetID") == first["offsetMsgId"]
    assert _field(output, "Topic") == TOPIC
    assert _field(output, "Tags") == "[TagA]"
    assert _field(output, "Keys") == "[k0 admKey]"
    assert (_field(output, "Queue ID"), _field(output, "Queue Offset")) == ("0", "0")
    assert _field(output, "Store Host") == seeded.system.broker
    assert f"MessageTrack [consumerGroup={ONLINE}, trackType=CONSUMED," in output, output
    assert f"MessageTrack [consumerGroup={OFFLINE}, trackType=NOT_ONLINE," in output, output
    beyond = first["offsetMsgId"][:16] + f"{10**9:016X}"
    missing_msg = seeded.run("queryMsgById", "-i", beyond)
    assert "CODE: 1  DESC: can not find message by the offset, 1000000000" in missing_msg


def test_query_msg_by_key_lists_hits_oldest_first(seeded: Seeded) -> None:
    output = seeded.run("queryMsgByKey", "-t", TOPIC, "-k", "admKey")
    lines = output.splitlines()
    assert lines[0].split() == ["#Message", "ID", "#QID", "#Offset"], output
    rows = [line.split() for line in lines[1:] if line.strip()]
    # RocketMQ sorts the index hits by commit log offset: the order they were sent.
    assert rows == [[e["msgId"], str(e["queueId"]), str(e["queueOffset"])] for e in seeded.sent]
    one = seeded.run("queryMsgByKey", "-t", TOPIC, "-k", "k3")
    assert [line.split()[0] for line in one.splitlines()[1:]] == [seeded.sent[3]["msgId"]]
    none = seeded.run("queryMsgByKey", "-t", TOPIC, "-k", "AdmNoSuchKey")
    assert "CODE: 208  DESC: query message by key finished, but no message." in none, none


def test_query_msg_by_unique_key(seeded: Seeded) -> None:
    second = seeded.sent[1]
    output = seeded.run("queryMsgByUniqueKey", "-i", second["msgId"], "-t", TOPIC)
    assert _field(output, "Topic") == TOPIC
    assert (_field(output, "Tags"), _field(output, "Keys")) == ("[TagB]", "[k1 admKey]")
    assert (_field(output, "Queue ID"), _field(output, "Queue Offset")) == ("1", "0")
    assert f"UNIQ_KEY={second['msgId']}" in _field(output, "Properties"), output


def test_query_msg_by_offset(seeded: Seeded) -> None:
    output = seeded.run("queryMsgByOffset", "-t", TOPIC, "-b", BROKER, "-i", "1", "-o", "1")
    assert (_field(output, "Queue ID"), _field(output, "Queue Offset")) == ("1", "1")
    assert _field(output, "Keys") == "[k5 admKey]"
    assert _field(output, "OffsetID") == seeded.sent[5]["offsetMsgId"]
    props = _field(output, "Properties")
    assert "MIN_OFFSET=0" in props and "MAX_OFFSET=2" in props, output


_MSG_LINE = re.compile(r"^MSGID: (\w+) MessageExt \[.*queueId=(\d+),.*queueOffset=(\d+),.*"
                       r"TAGS=(\w+)\}.* BODY: (.*)$", re.M)  # fmt: skip


def test_print_msg_dumps_every_queue(seeded: Seeded) -> None:
    output = seeded.run("printMsg", "-t", TOPIC, "-d", "true")
    ranges = re.findall(r"^minOffset=(\d+), maxOffset=(\d+), MessageQueue \[topic=(\w+), "
                        r"brokerName=([\w-]+), queueId=(\d+)\]$", output, re.M)  # fmt: skip
    assert sorted(ranges) == [("0", "2", TOPIC, BROKER, str(q)) for q in range(QUEUES)], output
    dumped = sorted((m[0], m[4]) for m in _MSG_LINE.findall(output))
    assert dumped == sorted((e["msgId"], f"body {e['line'] - 1}") for e in seeded.sent), output
    tagged = seeded.run("printMsg", "-t", TOPIC, "-d", "true", "-s", "TagB")
    assert sorted(m[4] for m in _MSG_LINE.findall(tagged)) == [f"body {i}" for i in (1, 3, 5, 7)]


def test_print_msg_by_queue_counts_the_tags(seeded: Seeded) -> None:
    output = seeded.run("printMsgByQueue", "-t", TOPIC, "-a", BROKER, "-i", "0", "-p", "true",
                        "-d", "true", "-f", "true")  # fmt: skip
    dumped = [(m[1], m[2], m[3], m[4]) for m in _MSG_LINE.findall(output)]
    assert dumped == [("0", "0", "TagA", "body 0"), ("0", "1", "TagA", "body 4")], output
    assert re.search(r"^Tag: TagA\s+Count: 2$", output, re.M), output


def test_consume_message_reads_a_queue_from_an_offset(seeded: Seeded) -> None:
    output = seeded.run("consumeMessage", "-t", TOPIC, "-b", BROKER, "-i", "1", "-o", "0",
                        "-c", "2")  # fmt: skip
    lines = output.splitlines()
    assert lines[0] == "Consume ok", output
    assert [(m[1], m[2], m[4]) for m in _MSG_LINE.findall(output)] == [
        ("1", "0", "body 1"),
        ("1", "1", "body 5"),
    ], output


def test_send_message_and_find_it_by_its_id(seeded: Seeded) -> None:
    seeded.run("updateTopic", "-c", CLUSTER, "-t", "AdmSend", "-r", "4", "-w", "4")
    output = seeded.run("sendMessage", "-t", "AdmSend", "-p", "hello", "-k", "sendKey", "-c",
                        "TagC", "-b", BROKER, "-i", "3")  # fmt: skip
    lines = output.splitlines()
    assert lines[0].split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#MsgId"], output
    row = lines[1].split()
    assert row[:3] == [BROKER, "3", "SEND_OK"], output
    found = seeded.run("queryMsgByUniqueKey", "-i", row[3], "-t", "AdmSend")
    assert (_field(found, "Tags"), _field(found, "Keys")) == ("[TagC]", "[sendKey]"), found
    assert (_field(found, "Queue ID"), _field(found, "Queue Offset")) == ("3", "0"), found


def test_check_msg_send_rt(seeded: Seeded) -> None:
    seeded.run("updateTopic", "-c", CLUSTER, "-t", "AdmRt", "-r", "4", "-w", "4")
    output = seeded.run("checkMsgSendRT", "-t", "AdmRt", "-a", "3", "-s", "128")
    lines = output.splitlines()
    assert lines[0].split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#RT"], output
    rows = [line.split() for line in lines[1:4]]
    assert [r[:3] for r in rows] == [[BROKER, str(q), "true"] for q in range(3)], output
    assert re.fullmatch(r"Avg RT: \d+\.\d\d", lines[4]), output


def test_send_msg_status(seeded: Seeded) -> None:
    output = seeded.run("sendMsgStatus", "-b", BROKER, "-s", "128", "-c", "3")
    lines = [line for line in output.splitlines() if line]
    assert len(lines) == 3, output
    for line in lines:
        assert re.match(r"rt=\d+ms, SendResult=SendResult \[sendStatus=SEND_OK, ", line), output
        assert f"messageQueue=MessageQueue [topic={BROKER}, brokerName={BROKER}," in line


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


# --- verbs on the broker's store and runtime ------------------------------------------------------


def _commit_log_offset(sent: Event) -> int:
    """Where the broker stored a message: the last 16 hex digits of its offset message id."""
    return int(sent["offsetMsgId"][16:], 16)


_CQ_ENTRY = re.compile(
    r"^idx: (\d+)\nConsumeQueueData\{physicOffset=(\d+), physicSize=(\d+), tagsCode=(-?\d+), "
    r"extendDataJson='null', bitMap='null', eval=false, msg='null'\}$",
    re.M,
)


def test_query_cq_lists_a_queues_entries(seeded: Seeded) -> None:
    output = seeded.run("queryCq", "-t", TOPIC, "-q", "1", "-i", "0", "-c", "3", "-b",
                        seeded.system.broker)  # fmt: skip
    assert output.startswith("Queue data: \nmax: 2, min: 0\n"), output
    # Queue 1 holds messages 1 and 5, of the same size: message 2 was stored right after 1.
    size = _commit_log_offset(seeded.sent[2]) - _commit_log_offset(seeded.sent[1])
    tags = str(TAGS_CODE["TagB"])
    assert _CQ_ENTRY.findall(output) == [
        ("0", str(_commit_log_offset(seeded.sent[1])), str(size), tags),
        ("1", str(_commit_log_offset(seeded.sent[5])), str(size), tags),
    ], output
    # With a group: its subscription first (the broker is found by the route).
    grouped = seeded.run("queryCq", "-t", TOPIC, "-q", "1", "-i", "1", "-c", "1", "-g", ONLINE)
    head, sep, rest = grouped.partition("\n======================================\n")
    assert head.startswith("Subscription data: \n") and sep, grouped
    subscription = json.loads(head.removeprefix("Subscription data: \n"))
    assert {k: v for k, v in subscription.items() if k != "subVersion"} == {
        "classFilterMode": False,
        "codeSet": [],
        "expressionType": "TAG",
        "subString": "*",
        "tagsSet": [],
        "topic": TOPIC,
    }, grouped
    assert rest.startswith("Filter data: \nnull\n"), grouped
    assert _CQ_ENTRY.findall(rest) == [
        ("1", str(_commit_log_offset(seeded.sent[5])), str(size), tags)
    ], grouped


def test_producer_lists_the_online_clients_of_the_broker(seeded: Seeded) -> None:
    def line(group: str, instance: str) -> re.Pattern[str]:
        return re.compile(
            rf"^producer group \({group}\) instance : clientId=[\d.]+@{instance}_\d+,"
            r"remoteIP=/[\d.]+:\d+, language=JAVA, version=401, lastUpdateTimestamp=\d+$",
            re.M,
        )

    online = line(PRODUCER_GROUP, PRODUCER_GROUP)
    # The producer's heartbeat reaches the broker once it has a route (within seconds).
    output = seeded.wait_output(
        lambda out: online.search(out) is not None, "the producer's heartbeat",
        "producer", "-b", seeded.system.broker,
    )  # fmt: skip
    assert len(online.findall(output)) == 1, output
    # Every client instance has an inner producer too: the producer's and the consumers'.
    for instance in (PRODUCER_GROUP, ONLINE, RESET_ONLINE):
        assert line("CLIENT_INNER_PRODUCER", instance).search(output), output


@pytest.mark.parametrize("verb", ["cleanExpiredCQ", "cleanUnusedTopic", "deleteExpiredCommitLog"])
def test_clean_verbs_succeed_and_keep_live_messages(seeded: Seeded, verb: str) -> None:
    assert seeded.run(verb, "-b", seeded.system.broker) == "success"
    assert seeded.run(verb, "-c", CLUSTER) == "success"
    # Nothing of the topic had expired: its queues and messages are all there.
    test_topic_status_shows_each_queues_offsets(seeded)
    output = seeded.run("queryMsgById", "-i", seeded.sent[7]["offsetMsgId"])
    assert _field(output, "Keys") == "[k7 admKey]", output


def _exported(output: str, directory: Path, name: str) -> Any:
    assert output.strip() == f"export {directory}/{name} success", output
    return json.loads((directory / name).read_text())


def test_export_metadata_and_metrics(seeded: Seeded, tmp_path: Path) -> None:
    meta = _exported(
        seeded.run("exportMetadata", "-c", CLUSTER, "-f", str(tmp_path / "meta")),
        tmp_path / "meta",
        "metadata.json",
    )
    assert set(meta) == {"exportTime", "topicConfigTable", "subscriptionGroupTable"}, meta
    topics, groups = meta["topicConfigTable"], meta["subscriptionGroupTable"]
    assert topics[TOPIC] == {
        "order": False,
        "perm": 6,
        "readQueueNums": QUEUES,
        "topicFilterType": "SINGLE_TAG",
        "topicName": TOPIC,
        "topicSysFlag": 0,
        "writeQueueNums": QUEUES,
    }, meta
    assert groups[ONLINE] == {
        "brokerId": 0,
        "consumeBroadcastEnable": True,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "groupName": ONLINE,
        "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": 16,
        "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1,
    }, meta
    # User topics only: no system, retry or cluster topic.
    system_topics = {"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRACE_TOPIC", CLUSTER, BROKER}
    assert not system_topics & set(topics), sorted(topics)
    assert not [t for t in topics if t.startswith("%")], sorted(topics)

    metrics = _exported(
        seeded.run("exportMetrics", "-c", CLUSTER, "-f", str(tmp_path / "metrics")),
        tmp_path / "metrics",
        "metrics.json",
    )
    one_day = {"normalOneDayInNum", "normalOneDayOutNum", "scheduleOneDayInNum",
               "transOneDayInNum"}  # fmt: skip
    assert set(metrics) == {"totalData", "evaluateReport"}, metrics
    assert set(metrics["totalData"]["totalOneDayNum"]) == one_day, metrics
    assert set(metrics["totalData"]["totalTps"]) == {
        "totalNormalInTps", "totalNormalOutTps", "totalScheduleInTps", "totalTransInTps",
    }, metrics  # fmt: skip
    report = metrics["evaluateReport"][BROKER]
    assert report["runtimeVersion"]["rocketmqVersion"] == "V4_9_4", metrics
    assert "JAVA%V4_9_4" in report["runtimeVersion"]["clientInfo"], metrics
    quota = report["runtimeQuota"]
    assert set(quota) == {"diskRatio", "topicSize", "tps", "groupSize", "oneDayNum",
                          "messageAverageSize"}, metrics  # fmt: skip
    assert set(quota["oneDayNum"]) == one_day, metrics
    assert set(quota["diskRatio"]) == {"commitLogDiskRatio", "consumeQueueDiskRatio"}, metrics
    # The same user topics and groups as the metadata (nothing changed in between).
    assert (quota["topicSize"], quota["groupSize"]) == (len(topics), len(groups)), metrics
    assert set(report["runtimeEnv"]) == {"cpuNum"}, metrics


def _client_id(seeded: Seeded, group: str) -> str:
    output = seeded.run("consumerConnection", "-g", group)
    client = output.splitlines()[1].split()[0]
    assert re.fullmatch(rf"[\d.]+@{group}_\d+", client), output
    return client


def test_query_msg_by_unique_key_consumes_it_on_a_client(seeded: Seeded) -> None:
    consumer = seeded.online[ONLINE]
    before = len(consumer.of("consumed"))
    second = seeded.sent[1]
    output = seeded.run("queryMsgByUniqueKey", "-i", second["msgId"], "-t", TOPIC, "-g", ONLINE,
                        "-d", _client_id(seeded, ONLINE))  # fmt: skip
    assert re.fullmatch(
        r"ConsumeMessageDirectlyResult \[order=false, autoCommit=true, consumeResult=CR_SUCCESS,"
        r" remark=null, spentTimeMills=\d+\]",
        output,
    ), output
    # The client's listener had it, once more: the message as the tool looked it up by
    # its offset id (a MessageExt, whose msgId is that id), not as a pull delivers it.
    consumer.wait_count("consumed", before + 1, STEP_TIMEOUT_S)
    direct = consumer.of("consumed")[before]
    assert (direct["msgId"], direct["offsetMsgId"], direct["keys"], direct["body"]) == (
        second["offsetMsgId"], second["offsetMsgId"], "k1 admKey", "body 1"
    ), consumer.diagnostics()  # fmt: skip
    assert (direct["queueId"], direct["queueOffset"]) == (1, 0), consumer.diagnostics()


_OFFSET_HEADER = ["#brokerName", "#queueId", "#offset"]


def _offset_rows(lines: list[str]) -> list[list[str]]:
    return sorted(line.split() for line in lines if line.strip())


def test_reset_offset_by_time_then_skip_of_an_online_group(seeded: Seeded) -> None:
    # The broker answers the offsets it tells the group's clients to take. (The 4.9.4
    # client then sleeps 10 s before it reads again: its re-reading is not waited for.)
    output = seeded.run("resetOffsetByTime", "-g", RESET_ONLINE, "-t", TOPIC, "-s", "0")
    lines = output.splitlines()
    assert lines[0] == (
        f"rollback consumer offset by specified group[{RESET_ONLINE}], topic[{TOPIC}], "
        "force[true], timestamp(string)[0], timestamp(long)[0]"
    ), output
    assert lines[1].split() == _OFFSET_HEADER, output
    assert _offset_rows(lines[2:]) == [[BROKER, str(q), "0"] for q in range(QUEUES)], output
    # Skipping the accumulated messages moves the group to the end of every queue.
    skipped = seeded.run("skipAccumulatedMessage", "-g", RESET_ONLINE, "-t", TOPIC)
    lines = skipped.splitlines()
    assert lines[0].split() == _OFFSET_HEADER, skipped
    assert _offset_rows(lines[1:]) == [[BROKER, str(q), "2"] for q in range(QUEUES)], skipped


def test_skip_accumulated_messages_of_an_offline_group(seeded: Seeded) -> None:
    _retry_topic(seeded, "AdmSkip")
    seeded.run("cloneGroupOffset", "-s", OFFLINE, "-d", "AdmSkip", "-t", TOPIC)
    seeded.run("resetOffsetByTime", "-g", "AdmSkip", "-t", TOPIC, "-s", "0")
    assert "Diff Total: 8" in seeded.run("consumerProgress", "-g", "AdmSkip").splitlines()
    output = seeded.run("skipAccumulatedMessage", "-g", "AdmSkip", "-t", TOPIC)
    # No client online (CODE 206): the tool moves the offsets itself, with its own table.
    lines = output.splitlines()
    assert lines[0].split() == ["#brokerName", "#queueId", "#brokerOffset", "#consumerOffset",
                                "#timestampOffset", "#rollbackOffset"], output  # fmt: skip
    rows = _offset_rows(lines[1:])
    assert rows == [[BROKER, str(q), "2", "0", "2", "2"] for q in range(QUEUES)], output
    progress = seeded.run("consumerProgress", "-g", "AdmSkip")
    assert _settled(progress), progress


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
