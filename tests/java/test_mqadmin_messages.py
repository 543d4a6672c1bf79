"""The real RocketMQ 4.9.4 ``mqadmin`` against Rocklet and RocketMQ 4.9.4: messages, consume
queues, and the verbs on a broker's store and runtime.

The same shared, seeded systems as test_mqadmin_verbs.py (admin_seed.py); the same
way of judging: what the verbs printed, with the same expectations on both systems.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.java.admin_seed import (
    BROKER,
    CLUSTER,
    OFFLINE,
    ONLINE,
    PRODUCER_GROUP,
    QUEUES,
    RESET_ONLINE,
    STEP_TIMEOUT_S,
    TAGS_CODE,
    TOPIC,
    Seeded,
    assert_topic_status,
    retry_topic,
    settled,
)
from tests.java.javatier import Event, tier_marks

pytestmark = tier_marks()

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


def _rocklet_admin(seeded: Seeded, verb: str, *args: str) -> Any:
    command = [sys.executable, "-m", "rocklet", "admin", verb, "-n", seeded.system.namesrv]
    done = subprocess.run(
        [*command, *args, "--json"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_rocklet_admin_print_msg_by_queue_counts_as_mqadmin(seeded: Seeded) -> None:
    queue = ("-t", TOPIC, "-a", BROKER, "-i", "1")
    output = seeded.run("printMsgByQueue", *queue, "-f", "true")
    theirs = {m[0]: int(m[1]) for m in re.findall(r"^Tag: (\w+)\s+Count: (\d+)$", output, re.M)}
    assert theirs, output
    ours = _rocklet_admin(seeded, "printMsgByQueue", *queue, "-f", "true", "-p", "true")
    assert ours["tagCounts"] == theirs
    sent = sorted((e["queueOffset"], e["msgId"]) for e in seeded.sent if e["queueId"] == 1)
    assert [(m["queueOffset"], m["msgId"]) for m in ours["messages"]] == sent


def test_decode_message_id_reads_a_java_clients_id(seeded: Seeded) -> None:
    # mqadmin 4.9.4 ships DecodeMessageId's class but does not register the verb; the
    # Java client sets a message's born timestamp just after making its id.
    msg_id = seeded.sent[0]["msgId"]
    (found,) = _rocklet_admin(seeded, "queryMsgByUniqueKey", "-i", msg_id, "-t", TOPIC)
    ours = _rocklet_admin(seeded, "DecodeMessageId", "-i", msg_id)
    assert 0 <= found["bornTimestamp"] - ours["timestamp"] < 1000, (found, ours)
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", ours["ip"]), ours


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
    assert_topic_status(seeded)
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
    # A 4.9.4 broker sends no totalMemKBytes (mqadmin reads it all the same); Rocklet does.
    memory = {"totalMemKBytes"} if seeded.system.name == "rocklet" else set()
    assert set(report["runtimeEnv"]) == {"cpuNum"} | memory, metrics


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
    try:
        _reset_then_skip(seeded)
    finally:
        # The 4.9.4 client applies each reset 10 s after it is told, one at a time, so
        # it may read the 8 messages again from offset 0 well after this test: in a
        # later test's window, on the broker-wide totals clusterList -m prints. It has
        # served its purpose; it goes now rather than at the end of the session.
        seeded.online[RESET_ONLINE].kill()


def _reset_then_skip(seeded: Seeded) -> None:
    # The broker answers the offsets it tells the group's clients to take (the client's
    # re-reading, 10 s later, is not waited for).
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
    retry_topic(seeded, "AdmSkip")
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
    assert settled(progress), progress
