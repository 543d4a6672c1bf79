"""SQL92 property filters through a real broker: CHECK_CLIENT_CONFIG, pulls that carry
their selector and pulls that rely on the heartbeat's, long polling, and the SDK's pull
and push consumers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rocklet.broker.processors.property_filter import PropertyFilters
from rocklet.client.errors import BrokerError
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from rocklet.client.pull_consumer import PullConsumer, PullStatus
from rocklet.client.push_consumer import PushConsumer
from rocklet.client.selector import SQL92, MessageSelector
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import encode_message, iter_messages
from rocklet.protocol.properties import decode_properties
from rocklet.protocol.sql92 import compile_selector
from rocklet.transport.dial import open_connection
from tests.client.consumers import WAIT_S, Collector
from tests.cluster import Cluster, running_cluster

TOPIC = "SqlT"
SELECTOR = "(TAGS IS NOT NULL AND TAGS IN ('A', 'B')) AND a BETWEEN 2 AND 6"


def row(i: int) -> Message:
    """Message ``i``: tag A/B/C, property ``a`` = i % 10 except every seventh, ``s``."""
    props = {"s": ("x", "y", "z")[i % 3]}
    if i % 7:
        props["a"] = str(i % 10)
    return Message(TOPIC, f"m{i}".encode(), tags="ABC"[i % 3], properties=props)


def expected(count: int) -> set[bytes]:
    """The bodies SELECTOR accepts, worked out plainly."""
    out = set()
    for i in range(count):
        m = row(i)
        a = (m.properties or {}).get("a")
        if m.tags in ("A", "B") and a is not None and 2 <= int(a) <= 6:
            out.add(m.body)
    return out


async def produce_rows(cluster: Cluster, count: int) -> None:
    async with Producer("PG_SQL", cluster.namesrv_addr) as producer:
        for i in range(count):
            await producer.send(row(i))


async def pull_all(consumer: PullConsumer, selector: MessageSelector | str) -> list[MessageExt]:
    """Every message of TOPIC the selector lets through, each queue read to its end."""
    got: list[MessageExt] = []
    for mq in await consumer.fetch_queues(TOPIC):
        offset, end = 0, await consumer.max_offset(mq)
        while offset < end:
            result = await consumer.pull(mq, offset, 4, expression=selector)
            assert result.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG), result
            assert result.next_begin_offset > offset
            got.extend(result.messages)
            offset = result.next_begin_offset
    return got


def check_config(expression_type: str, expression: str) -> RemotingCommand:
    sub = {"expressionType": expression_type, "subString": expression, "topic": TOPIC}
    body = {"clientId": "127.0.0.1@1#1", "group": "CG_CHECK", "subscriptionData": sub}
    return RemotingCommand(RequestCode.CHECK_CLIENT_CONFIG, body=json.dumps(body).encode())


def java_heartbeat(group: str, expression: str, version: int) -> RemotingCommand:
    sub = {
        "classFilterMode": False,
        "codeSet": [],
        "expressionType": SQL92,
        "subString": expression,
        "subVersion": version,
        "tagsSet": [],
        "topic": TOPIC,
    }
    consumer = {
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "consumeType": "CONSUME_PASSIVELY",
        "groupName": group,
        "messageModel": "CLUSTERING",
        "subscriptionDataSet": [sub],
        "unitMode": False,
    }
    body = {"clientID": "127.0.0.1@2#1", "consumerDataSet": [consumer], "producerDataSet": []}
    return RemotingCommand(RequestCode.HEART_BEAT, body=json.dumps(body).encode())


def java_pull(group: str, queue_id: int, offset: int, version: int) -> RemotingCommand:
    """A Java push consumer's pull: no subscription flag, the expression type only."""
    ext = {
        "consumerGroup": group,
        "topic": TOPIC,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": "0",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subVersion": str(version),
        "expressionType": SQL92,
    }
    return RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=ext)


async def test_check_client_config_takes_a_selector_only_when_it_compiles(
    tmp_path: Path,
) -> None:
    async with (
        running_cluster(tmp_path, enable_property_filter=True) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
    ):
        assert (await conn.request(check_config(SQL92, SELECTOR), 5)).code == ResponseCode.SUCCESS
        assert (await conn.request(check_config("TAG", "A || B"), 5)).code == 0
        broken = await conn.request(check_config(SQL92, "a >"), 5)
        assert broken.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert (broken.remark or "").startswith("Invalid MessageSelector.")
        other = await conn.request(check_config("XPATH", "/a"), 5)
        assert other.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


async def test_pull_consumer_gets_exactly_what_the_selector_accepts(tmp_path: Path) -> None:
    count = 60
    async with running_cluster(tmp_path, enable_property_filter=True) as cluster:
        await produce_rows(cluster, count)
        async with PullConsumer("CG_SQL_PULL", cluster.namesrv_addr) as consumer:
            got = await pull_all(consumer, MessageSelector.by_sql(SELECTOR))
            assert sorted(m.body for m in got) == sorted(expected(count))
            assert all(m.tags in ("A", "B") for m in got)
            # Missing properties are unknown, not false: NOT keeps them out too.
            missing = await pull_all(consumer, MessageSelector.by_sql("NOT (a > 4)"))
            want = {row(i).body for i in range(count) if i % 7 and i % 10 <= 4}
            assert {m.body for m in missing} == want
            # Tag subscriptions on the same broker are untouched.
            tagged = await pull_all(consumer, "C")
            assert {m.body for m in tagged} == {row(i).body for i in range(count) if i % 3 == 2}
            with pytest.raises(BrokerError) as refused:
                mq = (await consumer.fetch_queues(TOPIC))[0]
                await consumer.pull(mq, 0, 4, expression=MessageSelector(SQL92, "a >"))
            assert refused.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


async def test_a_broker_without_property_filters_refuses_sql92(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        await produce_rows(cluster, 4)
        async with (
            await open_connection("127.0.0.1", cluster.broker.port) as conn,
            PullConsumer("CG_SQL_OFF", cluster.namesrv_addr) as consumer,
        ):
            answer = await conn.request(check_config(SQL92, SELECTOR), 5)
            assert answer.code == ResponseCode.SYSTEM_ERROR
            assert answer.remark == (
                "The broker does not support consumer to filter message by SQL92"
            )
            mq = (await consumer.fetch_queues(TOPIC))[0]
            with pytest.raises(BrokerError) as refused:
                await consumer.pull(mq, 0, 4, expression=MessageSelector.by_sql(SELECTOR))
            assert refused.value.code == ResponseCode.SYSTEM_ERROR
            # A selector that does not compile is a parse failure first, as in RocketMQ.
            with pytest.raises(BrokerError) as broken:
                await consumer.pull(mq, 0, 4, expression=MessageSelector(SQL92, "a >"))
            assert broken.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        push = PushConsumer("CG_SQL_PUSH_OFF", cluster.namesrv_addr)
        push.subscribe(TOPIC, MessageSelector.by_sql(SELECTOR), Collector())
        with pytest.raises(BrokerError, match="SQL92") as failed:
            await push.start()
        assert failed.value.code == ResponseCode.SYSTEM_ERROR


async def test_java_style_pulls_use_the_heartbeat_selector(tmp_path: Path) -> None:
    count, version = 40, 1_700_000_000_000
    async with running_cluster(tmp_path, enable_property_filter=True) as cluster:
        await produce_rows(cluster, count)
        async with await open_connection("127.0.0.1", cluster.broker.port) as conn:
            beat = await conn.request(java_heartbeat("CG_JAVA", SELECTOR, version), 5)
            assert beat.code == ResponseCode.SUCCESS
            got: set[bytes] = set()
            for queue_id in range(4):
                answer = await conn.request(java_pull("CG_JAVA", queue_id, 0, version), 5)
                if answer.code == ResponseCode.SUCCESS:
                    got.update(m.body for m in iter_messages(answer.body or b""))
                else:
                    assert answer.code == ResponseCode.PULL_RETRY_IMMEDIATELY
            assert got == expected(count)
            # A newer subscription than the broker has: the heartbeat must come first.
            newer = await conn.request(java_pull("CG_JAVA", 0, 0, version + 1), 5)
            assert newer.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
            # A heartbeat selector that does not compile leaves no filter data.
            beat = await conn.request(java_heartbeat("CG_BAD", "a > ", version), 5)
            assert beat.code == ResponseCode.SUCCESS
            bad = await conn.request(java_pull("CG_BAD", 0, 0, version), 5)
            assert bad.code == ResponseCode.FILTER_DATA_NOT_EXIST


async def test_a_parked_pull_answers_only_a_matching_message(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, enable_property_filter=True) as cluster,
        Producer("PG_SQL_POLL", cluster.namesrv_addr) as producer,
        PullConsumer("CG_SQL_POLL", cluster.namesrv_addr) as consumer,
    ):
        first = await producer.send_orderly(Message(TOPIC, b"seed", properties={"a": "1"}), 0)
        mq: MessageQueue = first.message_queue
        selector = MessageSelector.by_sql("a > 5")
        offset = await consumer.max_offset(mq)

        async def parked(at: int) -> tuple[PullStatus, int, list[bytes]]:
            result = await consumer.pull(mq, at, 8, expression=selector, long_poll_ms=20_000)
            return result.status, result.next_begin_offset, [m.body for m in result.messages]

        async with asyncio.timeout(WAIT_S):
            waiting = asyncio.create_task(parked(offset))
            await producer.send_orderly(Message(TOPIC, b"low", properties={"a": "2"}), 0)
            status, offset, bodies = await waiting
            # Woken by a message the selector rejects: nothing, but past it.
            assert (status, bodies) == (PullStatus.NO_MATCHED_MSG, [])
            waiting = asyncio.create_task(parked(offset))
            await producer.send_orderly(Message(TOPIC, b"high", properties={"a": "9"}), 0)
            assert await waiting == (PullStatus.FOUND, offset + 1, [b"high"])


async def test_push_consumer_with_a_selector_receives_exactly_the_matching(
    tmp_path: Path,
) -> None:
    count = 40
    async with running_cluster(tmp_path, enable_property_filter=True) as cluster:
        await produce_rows(cluster, count)
        collector = Collector()
        consumer = PushConsumer("CG_SQL_PUSH", cluster.namesrv_addr, consume_from="first")
        async with consumer.subscribe(TOPIC, MessageSelector.by_sql(SELECTOR), collector):
            want = expected(count)
            await collector.wait_for(lambda c: want <= c.bodies)
            # A matching sentinel last on every queue: once each has arrived, every
            # message before it was pulled, so any extra would have come too.
            sentinels = {f"sentinel{q}".encode() for q in range(4)}
            async with Producer("PG_SQL_LAST", cluster.namesrv_addr) as producer:
                queues = set()
                for q in range(4):
                    last = Message(TOPIC, f"sentinel{q}".encode(), tags="A", properties={"a": "3"})
                    queues.add((await producer.send_orderly(last, q)).message_queue.queue_id)
                assert queues == {0, 1, 2, 3}
            await collector.wait_for(lambda c: sentinels <= c.bodies)
        assert collector.bodies == want | sentinels
        assert len(collector.messages) == len(want) + len(sentinels)


@settings(max_examples=300, deadline=None, derandomize=True)
@example(raw="a\x019\x02a\x011", sql="a > 5")  # a repeated name: the last one counts
@example(raw="a\x019\x02a\x01", sql="a > 5")  # an empty value is no value
@example(raw="xa\x019\x02ab\x017", sql="a > 5")  # other names that contain "a"
@given(
    raw=st.text(alphabet="ab1x9 \x01\x02", max_size=24),
    sql=st.sampled_from(["a > 5", "a IS NULL", "b = 'x' OR a = '1'", "NOT (ab <> '9')"]),
)
def test_the_record_filter_reads_properties_as_the_full_decoder(raw: str, sql: str) -> None:
    # The filter looks up only the selector's names in the raw text; whatever the text
    # (repeated names, empty values, names inside other names), it must agree with
    # decoding the whole map as Java does.
    record = memoryview(bytes(encode_message(topic=TOPIC, body=b"b", properties=raw.encode())))
    wanted = PropertyFilters(enabled=True).from_pull(SQL92, sql)
    assert wanted(record) == compile_selector(sql).matches(decode_properties(raw))
