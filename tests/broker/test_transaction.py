"""Transactions through a real broker: half messages, END_TRANSACTION and the check-back.

The frames are those of the C++ client (docs/protocol.md): the half message is
a SEND_MESSAGE with sysFlag 4 and TRAN_MSG / PGROUP properties, END_TRANSACTION takes
the commit-log offset from the offset msgId of the send and carries booleans as "0"/"1".
Check rounds are run with an explicit ``now_ms``; nothing waits on the periodic timer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import NamedTuple

import pytest
from structlog.testing import capture_logs

from rocklet.broker.transaction_check import CHECK_MAX_TIME_TOPIC, TRANS_SYS_GROUP
from rocklet.protocol.bodies.heartbeat import HeartbeatData, ProducerData
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import SysFlag, decode_message, iter_messages
from rocklet.protocol.message_id import parse_offset_msg_id
from rocklet.protocol.names import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rocklet.protocol.properties import encode_properties
from rocklet.transport.connection import Connection, HandlerResult
from rocklet.transport.dial import open_connection
from tests.cluster import Cluster, running_cluster

BORN = 1_700_000_000_000
TIMEOUT_MS = 6000  # BrokerConfig.transaction_timeout_ms default


class Half(NamedTuple):
    """Where a half message landed, as the producer learns it from the send answer."""

    queue_offset: int
    commit_log_offset: int
    uniq_key: str


def half_send(
    topic: str, body: bytes, uniq_key: str, *, queue_id: int = 1, born: int = BORN
) -> RemotingCommand:
    props = {"TAGS": "TagT", "KEYS": "order-1", "UNIQ_KEY": uniq_key, "TRAN_MSG": "true"}
    props |= {"PGROUP": "PG", "WAIT": "true"}
    ext = {
        "producerGroup": "PG",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": str(queue_id),
        "sysFlag": str(int(SysFlag.TRANSACTION_PREPARED)),
        "bornTimestamp": str(born),
        "flag": "0",
        "properties": encode_properties(props).decode() + "\x02",
        "reconsumeTimes": "0",
        "unitMode": "0",
        "batch": "0",
    }
    return RemotingCommand(
        RequestCode.SEND_MESSAGE, ext_fields=ext, body=body, language="CPP", version=63
    )


def end_transaction(
    half: Half, kind: int, *, group: str = "PG", from_check: bool = False
) -> RemotingCommand:
    ext = {
        "producerGroup": group,
        "tranStateTableOffset": str(half.queue_offset),
        "commitLogOffset": str(half.commit_log_offset),
        "commitOrRollback": str(kind),
        "fromTransactionCheck": "1" if from_check else "0",
        "msgId": half.uniq_key,
        "transactionId": half.uniq_key,
    }
    return RemotingCommand(RequestCode.END_TRANSACTION, ext_fields=ext, language="CPP", version=63)


def pull(topic: str, queue_id: int, offset: int = 0) -> RemotingCommand:
    ext = {
        "consumerGroup": "CG",
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": "4",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
    }
    return RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=ext)


async def send_half(
    conn: Connection, topic: str, body: bytes, uniq_key: str, born: int = BORN
) -> Half:
    resp = await conn.request(half_send(topic, body, uniq_key, born=born), 5)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    offset = parse_offset_msg_id(resp.ext_fields["msgId"]).offset
    return Half(int(resp.ext_fields["queueOffset"]), offset, uniq_key)


class Producer(NamedTuple):
    conn: Connection
    checks: asyncio.Queue[RemotingCommand]


@asynccontextmanager
async def producer(cluster: Cluster, client_id: str = "producer-1") -> AsyncIterator[Producer]:
    """A connection registered as a member of producer group PG that records checks."""
    checks: asyncio.Queue[RemotingCommand] = asyncio.Queue()

    async def handler(_conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        await checks.put(cmd)
        return None

    conn = await open_connection("127.0.0.1", cluster.broker.port, handler=handler)
    async with conn:
        beat = HeartbeatData(client_id, producer_data_set=(ProducerData("PG"),))
        cmd = RemotingCommand(RequestCode.HEART_BEAT, body=beat.to_json())
        assert (await conn.request(cmd, 5)).code == ResponseCode.SUCCESS
        yield Producer(conn, checks)


async def test_half_is_invisible_until_commit_then_delivered_as_committed(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, producer(cluster) as prod:
        conn = prod.conn
        half = await send_half(conn, "Tx", b"payload", "U-COMMIT")
        assert (await conn.request(pull("Tx", 1), 5)).code == ResponseCode.PULL_NOT_FOUND

        answer = await conn.request(end_transaction(half, 8), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark

        got = await conn.request(pull("Tx", 1), 5)
        assert got.code == ResponseCode.SUCCESS
        (msg,) = list(iter_messages(got.body))
        assert (msg.topic, msg.queue_id, msg.body) == ("Tx", 1, b"payload")
        assert msg.sys_flag & 0xC == SysFlag.TRANSACTION_COMMIT
        assert msg.prepared_transaction_offset == half.commit_log_offset
        # Every property of the half stays, REAL_* included, as 4.9.4 stores them.
        assert (msg.properties["REAL_TOPIC"], msg.properties["REAL_QID"]) == ("Tx", "1")
        assert "TRAN_PREPARED_QUEUE_OFFSET" not in msg.properties
        assert msg.properties["UNIQ_KEY"] == "U-COMMIT" and msg.tags == "TagT"
        assert msg.born_timestamp == BORN

        ops = await conn.request(pull(TRANS_OP_HALF_TOPIC, 0), 5)
        (op,) = list(iter_messages(ops.body))
        assert (op.body, op.tags) == (str(half.queue_offset).encode(), "d")

        # The resolved half is never checked back; the check offset moves past it.
        check = cluster.broker.transaction_check
        assert await check.check_once(BORN + 10 * TIMEOUT_MS) == 0
        offsets = cluster.broker.ctx.offsets
        assert offsets.query(TRANS_SYS_GROUP, TRANS_HALF_TOPIC, 0) == half.queue_offset + 1
        assert offsets.query(TRANS_SYS_GROUP, TRANS_OP_HALF_TOPIC, 0) == 1
        assert prod.checks.empty()


async def test_rollback_unknown_and_mismatched_requests(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, producer(cluster) as prod:
        conn = prod.conn
        half = await send_half(conn, "TxR", b"gone", "U-RB")

        unknown = await conn.request(end_transaction(half, 0), 5)
        assert unknown.code == ResponseCode.SUCCESS
        wrong_group = await conn.request(end_transaction(half, 8, group="OTHER"), 5)
        assert wrong_group.code == ResponseCode.SYSTEM_ERROR
        assert wrong_group.remark == "The producer group wrong"
        moved = half._replace(queue_offset=half.queue_offset + 5)
        wrong_offset = await conn.request(end_transaction(moved, 8), 5)
        assert wrong_offset.remark == "The transaction state table offset wrong"
        nowhere = half._replace(commit_log_offset=half.commit_log_offset + 10_000_000)
        missing = await conn.request(end_transaction(nowhere, 8), 5)
        assert missing.code == ResponseCode.SYSTEM_ERROR
        assert missing.remark == "Find prepared transaction message failed"
        inside = half._replace(commit_log_offset=half.commit_log_offset + 3)
        misaligned = await conn.request(end_transaction(inside, 8), 5)
        assert misaligned.remark == "Find prepared transaction message failed"
        assert (await conn.request(pull("TxR", 1), 5)).code == ResponseCode.PULL_NOT_FOUND

        rolled_back = await conn.request(end_transaction(half, 12), 5)
        assert rolled_back.code == ResponseCode.SUCCESS, rolled_back.remark
        assert (await conn.request(pull("TxR", 1), 5)).code == ResponseCode.PULL_NOT_FOUND
        assert await cluster.broker.transaction_check.check_once(BORN + 10 * TIMEOUT_MS) == 0
        assert (await conn.request(pull("TxR", 1), 5)).code == ResponseCode.PULL_NOT_FOUND
        assert prod.checks.empty()


async def test_undecided_half_is_checked_back_and_committed_from_the_check(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path) as cluster, producer(cluster) as prod:
        conn, check = prod.conn, cluster.broker.transaction_check
        half = await send_half(conn, "TxC", b"undecided", "U-CHECK")

        # Younger than transactionTimeOut: not asked yet.
        assert await check.check_once(BORN + TIMEOUT_MS - 1) == 0
        assert await check.check_once(BORN + TIMEOUT_MS + 1) == 1
        asked = await asyncio.wait_for(prod.checks.get(), 5)
        assert asked.code == RequestCode.CHECK_TRANSACTION_STATE and asked.is_oneway
        ext = asked.ext_fields
        assert ext["msgId"] == ext["transactionId"] == "U-CHECK"
        copy = Half(int(ext["tranStateTableOffset"]), int(ext["commitLogOffset"]), "U-CHECK")
        # The half was put back at the end of the half queue; the check names the copy.
        assert copy.queue_offset == half.queue_offset + 1
        assert copy.commit_log_offset > half.commit_log_offset
        assert parse_offset_msg_id(ext["offsetMsgId"]).offset == copy.commit_log_offset
        body = decode_message(asked.body)
        assert (body.topic, body.queue_id, body.body) == ("TxC", 1, b"undecided")
        assert body.queue_offset == copy.queue_offset
        assert body.physical_offset == copy.commit_log_offset
        assert body.properties["PGROUP"] == "PG"
        assert body.properties["TRANSACTION_CHECK_TIMES"] == "1"

        answer = await conn.request(end_transaction(copy, 8, from_check=True), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        got = await conn.request(pull("TxC", 1), 5)
        assert [m.body for m in iter_messages(got.body)] == [b"undecided"]
        # Committed: later rounds leave it alone.
        assert await check.check_once(BORN + 10 * TIMEOUT_MS) == 0
        assert prod.checks.empty()


async def test_half_is_discarded_after_the_maximum_number_of_checks(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, transaction_check_max=2) as cluster,
        producer(cluster) as prod,
    ):
        conn, check = prod.conn, cluster.broker.transaction_check
        await send_half(conn, "TxD", b"never", "U-DISCARD")
        now = BORN + TIMEOUT_MS + 1
        assert await check.check_once(now) == 1
        assert await check.check_once(now + 1000) == 1
        times = [
            decode_message((await asyncio.wait_for(prod.checks.get(), 5)).body).properties[
                "TRANSACTION_CHECK_TIMES"
            ]
            for _ in range(2)
        ]
        assert times == ["1", "2"]
        # Checked transactionCheckMax times: moved aside, never delivered.
        assert await check.check_once(now + 2000) == 0
        assert await check.check_once(now + 3000) == 0
        assert (await conn.request(pull("TxD", 1), 5)).code == ResponseCode.PULL_NOT_FOUND
        moved = await conn.request(pull(CHECK_MAX_TIME_TOPIC, 0), 5)
        (discarded,) = list(iter_messages(moved.body))
        assert discarded.body == b"never"
        assert discarded.properties["TRANSACTION_CHECK_TIMES"] == "2"
        assert discarded.properties["REAL_TOPIC"] == "TxD"
        assert prod.checks.empty()


async def test_the_broker_runs_check_rounds_on_its_own(tmp_path: Path) -> None:
    async with (
        running_cluster(
            tmp_path, transaction_check_interval_ms=50, transaction_timeout_ms=0
        ) as cluster,
        producer(cluster) as prod,
    ):
        await send_half(prod.conn, "TxP", b"periodic", "U-PERIODIC", born=int(time.time() * 1000))
        asked = await asyncio.wait_for(prod.checks.get(), 10)
        assert asked.code == RequestCode.CHECK_TRANSACTION_STATE
        assert asked.ext_fields["msgId"] == "U-PERIODIC"


async def test_a_remark_without_utf8_form_is_logged_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The remark is free text no typed header checks; logging it must not fail.

    Found by the fuzzer: a lone surrogate in an END_TRANSACTION remark made the log
    line raise on a strict stream (structlog's default, stdout), and the request was
    answered with the exception.
    """
    ext = {
        "producerGroup": "PG",
        "tranStateTableOffset": "0",
        "commitLogOffset": "0",
        "commitOrRollback": "0",
        "msgId": "m",
    }
    cmd = RemotingCommand(RequestCode.END_TRANSACTION, remark="\ud800 unknown", ext_fields=ext)
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
    ):
        answer = await conn.request(cmd, 5)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert "remark='\\\\ud800 unknown'" in capsys.readouterr().out


async def test_a_half_left_without_its_topic_config_is_checked_back(tmp_path: Path) -> None:
    # RocketMQ writes the half topic's config at its first check round: a RocketMQ
    # broker killed before then leaves half messages that topics.json does not name.
    async with running_cluster(tmp_path) as cluster, producer(cluster) as prod:
        await send_half(prod.conn, "TxOrphan", b"left behind", "U-ORPHAN")
    topics = tmp_path / "config" / "topics.json"
    table = json.loads(topics.read_text())
    del table["topicConfigTable"][TRANS_HALF_TOPIC]
    topics.write_text(json.dumps(table))
    topics.with_name("topics.json.bak").unlink(missing_ok=True)
    async with running_cluster(tmp_path) as cluster, producer(cluster) as prod:
        check = cluster.broker.transaction_check
        assert await check.check_once(BORN + TIMEOUT_MS + 1) == 1
        asked = await asyncio.wait_for(prod.checks.get(), 5)
        assert asked.ext_fields["transactionId"] == "U-ORPHAN"
        assert cluster.broker.ctx.topics.find(TRANS_HALF_TOPIC) is not None


async def test_a_half_older_than_the_reserved_time_is_discarded_saying_why(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path) as cluster, producer(cluster) as prod:
        check = cluster.broker.transaction_check
        await send_half(prod.conn, "TxOld", b"too old", "U-OLD")
        with capture_logs() as logs:
            assert await check.check_once(BORN + 73 * 3600 * 1000) == 0
        said = [e["event"] for e in logs if e["log_level"] == "warning"]
        assert said == ["half message older than fileReservedTime; moving it to the discard topic"]
        moved = await prod.conn.request(pull(CHECK_MAX_TIME_TOPIC, 0), 5)
        assert [m.body for m in iter_messages(moved.body)] == [b"too old"]
        assert prod.checks.empty()
