"""CONSUMER_SEND_MSG_BACK against a real broker: retry with delay, dead-letter queue, refusals.

The broker runs with a four-level delay table of one second each, so a retried message
comes back to ``%RETRY%<group>`` within about a second; the tests wait for it with a
long-polling pull (the suspend flag), never by sleeping.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import StoredMessage, iter_messages, pack_host
from rocklet.protocol.message_id import make_offset_msg_id, parse_offset_msg_id
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.broker.test_client_manage import cpp_request
from tests.broker.test_query import BODY_AT, smuggled_record
from tests.broker.test_send_pull import cpp_send, pull
from tests.cluster import Cluster, running_cluster

FAST_LEVELS = "1s 1s 1s 1s"
SCHEDULE = "SCHEDULE_TOPIC_XXXX"


async def connect(cluster: Cluster) -> Connection:
    return await open_connection("127.0.0.1", cluster.broker.port)


def cpp_send_back(group: str, offset: int, delay_level: int = 0) -> RemotingCommand:
    """The C++ concurrent consumer's send-back: group, delayLevel (always 0), offset."""
    ext = {"group": group, "delayLevel": str(delay_level), "offset": str(offset)}
    return cpp_request(RequestCode.CONSUMER_SEND_MSG_BACK, ext)


def java_send_back(
    group: str, offset: int, *, max_reconsume: int, delay_level: int = 0, version: int = 401
) -> RemotingCommand:
    """Java's send-back, with the origin fields and its maxReconsumeTimes."""
    ext = {
        "group": group,
        "delayLevel": str(delay_level),
        "offset": str(offset),
        "originMsgId": "IGNORED",
        "originTopic": "IGNORED",
        "unitMode": "false",
        "maxReconsumeTimes": str(max_reconsume),
    }
    return RemotingCommand(
        RequestCode.CONSUMER_SEND_MSG_BACK, ext_fields=ext, language="JAVA", version=version
    )


async def send(conn: Connection, cmd: RemotingCommand) -> int:
    """Send and return the commitlog offset of the stored message."""
    resp = await conn.request(cmd, 5)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return parse_offset_msg_id(resp.ext_fields["msgId"]).offset


async def pull_one(conn: Connection, topic: str, queue_id: int, offset: int = 0) -> StoredMessage:
    """Pull the message at ``offset``, long-polling until it is there."""
    resp = await conn.request(pull(topic, queue_id, offset, suspend_ms=15_000, max_nums=1), 20)
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    (msg,) = list(iter_messages(resp.body))
    return msg


def with_ext(cmd: RemotingCommand, **ext: str) -> RemotingCommand:
    return dataclasses.replace(cmd, ext_fields={**cmd.ext_fields, **ext})


async def test_failed_message_is_retried_after_a_delay_then_dead_lettered(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, message_delay_level=FAST_LEVELS) as cluster,
        await connect(cluster) as conn,
    ):
        props = {"KEYS": "k1 k2", "UNIQ_KEY": "0100007F0000B9C50000DBBB5C6E0100"}
        sent = cpp_send("SB", b"payload", tags="TagA", props=props)
        original_offset = await send(conn, with_ext(sent, flag="7"))
        original = await pull_one(conn, "SB", 0)

        resp = await conn.request(cpp_send_back("SBG", original_offset), 5)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        retry_topic = cluster.broker.ctx.topics.find("%RETRY%SBG")
        assert retry_topic is not None and retry_topic.perm == 6

        # Parked first in the schedule topic at level 3 + reconsumeTimes(0) = 3 (queue 2).
        parked = await pull_one(conn, SCHEDULE, 2)
        assert parked.properties["DELAY"] == "3"
        assert parked.properties["REAL_TOPIC"] == "%RETRY%SBG"

        retried = await pull_one(conn, "%RETRY%SBG", 0)  # delivered when due
        assert retried.reconsume_times == 1
        assert retried.properties["RETRY_TOPIC"] == "SB"
        # The original's offset msgId (what a broker reading it back calls its msgId).
        origin = make_offset_msg_id(pack_host("127.0.0.1", cluster.broker.port), original_offset)
        assert retried.properties["ORIGIN_MESSAGE_ID"] == origin
        assert retried.body == b"payload" and retried.flag == 7
        assert retried.tags == "TagA" and retried.keys == ["k1", "k2"]
        assert (retried.born_timestamp, retried.born_host) == (
            original.born_timestamp,
            original.born_host,
        )
        assert retried.sys_flag == original.sys_flag
        assert retried.store_host == ("127.0.0.1", cluster.broker.port)
        # Kept as RocketMQ 4.9.4 stores them (its Java clients see the same map).
        assert {k: retried.properties.get(k) for k in ("DELAY", "REAL_TOPIC", "REAL_QID")} == {
            "DELAY": "3",
            "REAL_TOPIC": "%RETRY%SBG",
            "REAL_QID": "0",
        }
        assert retried.properties["WAIT"] == "false"

        # Java client with maxReconsumeTimes=1: it was consumed once, so dead letter now.
        again = java_send_back("SBG", retried.physical_offset, max_reconsume=1)
        assert (await conn.request(again, 5)).code == ResponseCode.SUCCESS
        dead = await pull_one(conn, "%DLQ%SBG", 0)
        assert dead.reconsume_times == 2 and dead.body == b"payload"
        assert dead.properties["RETRY_TOPIC"] == "SB"
        assert dead.properties["ORIGIN_MESSAGE_ID"] == origin
        assert (dead.properties["DELAY"], dead.properties["WAIT"]) == ("0", "false")
        dlq = cluster.broker.ctx.topics.find("%DLQ%SBG")
        assert dlq is not None and dlq.read_queue_nums == 1 and dlq.perm == 6


async def test_delay_levels_and_the_dead_letter_rules(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, message_delay_level=FAST_LEVELS) as cluster,
        await connect(cluster) as conn,
    ):
        plain = await send(conn, cpp_send("DL", b"no-uniq-key"))
        # An explicit level is kept; the original's offset msgId stands in for a UNIQ_KEY.
        assert (await conn.request(cpp_send_back("G", plain, delay_level=2), 5)).code == 0
        level2 = await pull_one(conn, SCHEDULE, 1)
        assert level2.properties["DELAY"] == "2" and level2.reconsume_times == 1
        expected_id = make_offset_msg_id(pack_host("127.0.0.1", cluster.broker.port), plain)
        assert level2.properties["ORIGIN_MESSAGE_ID"] == expected_id

        # A message already retried 5 times: level 3 + 5 = 8 is past the 4-level table.
        tried5 = await send(conn, with_ext(cpp_send("%RETRY%G", b"five"), reconsumeTimes="5"))
        assert (await conn.request(cpp_send_back("G", tried5), 5)).code == 0
        clamped = await pull_one(conn, SCHEDULE, 3)
        assert clamped.properties["DELAY"] == "4" and clamped.reconsume_times == 6
        assert clamped.properties["RETRY_TOPIC"] == "%RETRY%G"  # was absent: the topic
        # Consumed 15 times, one short of the group's 16: still a retry.
        tried15 = await send(conn, with_ext(cpp_send("%RETRY%G", b"fifteen"), reconsumeTimes="15"))
        assert (await conn.request(cpp_send_back("G", tried15), 5)).code == 0
        last_retry = await pull_one(conn, SCHEDULE, 3, offset=1)
        assert last_retry.body == b"fifteen" and last_retry.reconsume_times == 16

        # C++ (version 63) cannot lower maxReconsumeTimes: the header value is ignored.
        cpp_max0 = with_ext(cpp_send_back("G", plain), maxReconsumeTimes="0")
        assert (await conn.request(cpp_max0, 5)).code == 0
        level3 = await pull_one(conn, SCHEDULE, 2)  # 3 + reconsumeTimes(0)
        assert level3.properties["DELAY"] == "3" and level3.reconsume_times == 1
        # ... and clients older than V3_4_9 get the group's 16 either.
        old = java_send_back("G", plain, max_reconsume=0, version=120)
        assert (await conn.request(old, 5)).code == 0
        assert (await pull_one(conn, SCHEDULE, 2, offset=1)).reconsume_times == 1

        # The group's retryMaxTimes (16) reached: dead letter, for C++ too.
        tried16 = await send(
            conn,
            with_ext(
                cpp_send("%RETRY%G", b"sixteen", props={"RETRY_TOPIC": "Orig"}), reconsumeTimes="16"
            ),
        )
        assert (await conn.request(cpp_send_back("G", tried16), 5)).code == 0
        dead = await pull_one(conn, "%DLQ%G", 0)
        assert dead.body == b"sixteen" and dead.reconsume_times == 17
        assert dead.properties["RETRY_TOPIC"] == "Orig"  # an existing one is kept

        # A negative level means "dead letter now".
        assert (await conn.request(cpp_send_back("G", plain, delay_level=-1), 5)).code == 0
        assert (await pull_one(conn, "%DLQ%G", 0, offset=1)).body == b"no-uniq-key"


async def test_send_back_refusals(tmp_path: Path) -> None:
    async with running_cluster(tmp_path / "a") as cluster, await connect(cluster) as conn:
        offset = await send(conn, cpp_send("R", b"x"))
        smuggler = await send(conn, cpp_send("R", smuggled_record()))
        for bad in (offset + 1, smuggler + BODY_AT, 1 << 40, -1):
            resp = await conn.request(cpp_send_back("G", bad), 5)
            assert resp.code == ResponseCode.SYSTEM_ERROR
            # A negative offset is refused by the typed header, naming the field.
            not_found = f"look message by offset failed, {bad}"
            negative = "the custom field <offset> must not be negative: -1"
            assert resp.remark == (not_found if bad >= 0 else negative)
        missing = cpp_request(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G", "offset": "0"})
        resp = await conn.request(missing, 5)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "delayLevel" in (resp.remark or "")
        # As in Java, the retry topic is made before the lookup; the DLQ only when used.
        assert cluster.broker.ctx.topics.find("%RETRY%G") is not None
        assert cluster.broker.ctx.topics.find("%DLQ%G") is None

    async with (
        running_cluster(tmp_path / "b", auto_create_subscription_group=False) as cluster,
        await connect(cluster) as conn,
    ):
        offset = await send(conn, cpp_send("R", b"x"))
        resp = await conn.request(cpp_send_back("NoSuchGroup", offset), 5)
        assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert cluster.broker.ctx.topics.find("%RETRY%NoSuchGroup") is None
