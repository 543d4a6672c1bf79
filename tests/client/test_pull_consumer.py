"""PullConsumer and LitePullConsumer against a real broker."""

from __future__ import annotations

import asyncio
import time
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.client.errors import ClientStateError
from rocklet.client.message import MessageExt
from rocklet.client.pull_api import decode_messages
from rocklet.client.pull_consumer import LitePullConsumer, PullConsumer, PullStatus
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.message import SysFlag, encode_message, iter_messages, pack_host
from tests.client.consumers import WAIT_S, produce
from tests.cluster import running_cluster


async def test_pull_reads_a_queue_from_any_offset(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        before_ms = time.time_ns() // 1_000_000
        await produce(
            cluster.namesrv_addr,
            "T",
            [f"p{i}".encode() for i in range(40)],
            tags=lambda i: "A" if i % 4 == 0 else "B",
        )
        async with PullConsumer("PULL", cluster.namesrv_addr) as consumer:
            queues = await consumer.fetch_queues("T")
            assert [mq.queue_id for mq in queues] == [0, 1, 2, 3]
            got: list[MessageExt] = []
            for mq in queues:
                assert await consumer.min_offset(mq) == 0
                end = await consumer.max_offset(mq)
                result = await consumer.pull(mq, 0, 32)
                assert result.status is PullStatus.FOUND
                assert result.next_begin_offset == end == result.max_offset
                got.extend(result.messages)
                assert (await consumer.pull(mq, end)).status is PullStatus.NO_NEW_MSG
                assert (await consumer.pull(mq, end + 5)).status is PullStatus.OFFSET_ILLEGAL
                assert await consumer.offset_for_time(mq, before_ms) == 0
            assert sorted(m.body for m in got) == sorted(f"p{i}".encode() for i in range(40))
            tagged = [
                m
                for mq in queues
                for m in (await consumer.pull(mq, 0, 32, expression="A")).messages
            ]
            assert sorted(m.body for m in tagged) == sorted(
                f"p{i}".encode() for i in range(0, 40, 4)
            )

            # Offsets are the caller's; commit makes them the group's.
            assert await consumer.committed(queues[1]) in (None, 0)
            await consumer.commit(queues[1], 7)
            assert await consumer.committed(queues[1]) == 7
            assert cluster.broker.ctx.offsets.query("PULL", "T", 1) == 7


async def test_pull_long_polls_until_a_message_arrives(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        await produce(cluster.namesrv_addr, "T", [b"first"])
        async with PullConsumer("PULL", cluster.namesrv_addr) as consumer:
            ends = {q: await consumer.max_offset(q) for q in await consumer.fetch_queues("T")}
            mq = next(q for q, end in ends.items() if end == 1)
            waiting = asyncio.create_task(consumer.pull(mq, 1, long_poll_ms=20000))
            await produce(cluster.namesrv_addr, "T", [f"late{i}".encode() for i in range(8)])
            async with asyncio.timeout(WAIT_S):
                result = await waiting
            assert result.status is PullStatus.FOUND
            assert all(m.body.startswith(b"late") for m in result.messages)


async def test_lite_assign_poll_seek_and_commit(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        bodies = {f"l{i}".encode() for i in range(100)}
        await produce(cluster.namesrv_addr, "T", sorted(bodies))
        queues = [MessageQueue("T", "broker-a", q) for q in range(4)]
        consumer = LitePullConsumer(
            "LITE", cluster.namesrv_addr, consume_from="first", auto_commit=False
        )
        consumer.assign(queues)
        async with consumer:
            assert consumer.assignment() == queues
            got = await _poll_until(consumer, len(bodies))
            assert {m.body for m in got} == bodies
            assert await consumer.poll(timeout_ms=50) == []
            # Nothing committed yet (auto-commit is off).
            assert not cluster.broker.ctx.offsets.offsets_of("LITE", "T")
            await consumer.commit()
            committed = cluster.broker.ctx.offsets.offsets_of("LITE", "T")
            assert sum(committed.values()) == len(bodies)

            # Seek back: the queue is read again from there, and only that queue.
            consumer.seek(queues[2], 0)
            again = await _poll_until(consumer, committed[2])
            assert {m.queue_id for m in again} == {2}
            assert len(again) == committed[2]
            with pytest.raises(ClientStateError):
                consumer.seek(MessageQueue("T", "broker-a", 9), 0)


async def test_lite_subscribe_shares_queues_and_auto_commits(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        bodies = {f"s{i}".encode() for i in range(80)}
        await produce(cluster.namesrv_addr, "T", sorted(bodies))
        members = [
            LitePullConsumer(
                "LITE",
                cluster.namesrv_addr,
                consume_from="first",
                instance_name=name,
                rebalance_interval_s=0.5,
            )
            for name in ("x", "y")
        ]
        for member in members:
            member.subscribe("T", "*")
        async with members[0], members[1]:
            seen: list[MessageExt] = []
            async with asyncio.timeout(WAIT_S):
                while {m.body for m in seen} != bodies or _overlap(members):
                    for member in members:
                        seen.extend(await member.poll(timeout_ms=100))
            assert len(members[0].assignment()) == len(members[1].assignment()) == 2
        # auto_commit: shutdown stored each member's position for its queues.
        assert sum(cluster.broker.ctx.offsets.offsets_of("LITE", "T").values()) == len(bodies)


def _overlap(members: list[LitePullConsumer]) -> bool:
    a, b = (set(m.assignment()) for m in members)
    return bool(a & b) or len(a | b) != 4


async def _poll_until(consumer: LitePullConsumer, count: int) -> list[MessageExt]:
    got: list[MessageExt] = []
    async with asyncio.timeout(WAIT_S):
        while len(got) < count:
            got.extend(await consumer.poll(timeout_ms=1000))
    return got


# -- the pull body decoder ---------------------------------------------------------------


def _record(i: int, *, topic: str = "T", props: dict[str, str] | None = None) -> bytes:
    return bytes(
        encode_message(
            topic=topic,
            body=f"body-{i}".encode(),
            queue_id=i % 4,
            queue_offset=i,
            physical_offset=1000 + i,
            properties=props if props is not None else {"TAGS": "A" if i % 2 else "B"},
            born_timestamp=1_700_000_000_000 + i,
            born_host=pack_host("10.0.0.9", 40000 + i),
            store_timestamp=1_700_000_000_500 + i,
            store_host=pack_host("127.0.0.1", 10911),
            reconsume_times=i % 3,
        )
    )


@settings(max_examples=60, deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=8),
    props=st.dictionaries(
        st.text("abcXYZ_", min_size=1, max_size=6), st.text("pq 12", min_size=1, max_size=6)
    ),
    compressed=st.booleans(),
)
def test_decoder_agrees_with_the_protocol_codec(
    bodies: list[bytes], props: dict[str, str], compressed: bool
) -> None:
    records = b"".join(
        bytes(
            encode_message(
                topic="Topic-Ü",
                body=zlib.compress(body) if compressed else body,
                queue_offset=i,
                properties=props,
                sys_flag=SysFlag.COMPRESSED if compressed else 0,
                born_host=pack_host("1.2.3.4", 5),
                store_host=pack_host("5.6.7.8", 9),
            )
        )
        for i, body in enumerate(bodies)
    )
    fast = decode_messages(records, "b")
    slow = [MessageExt.from_stored(m, broker_name="b") for m in iter_messages(records)]
    assert [(m.body, dict(m.properties)) for m in fast] == [
        (m.body, dict(m.properties)) for m in slow
    ]
    assert [replace(m, properties={}) for m in fast] == [replace(m, properties={}) for m in slow]


def test_decoder_filters_tags_and_restores_retry_topics() -> None:
    data = b"".join(_record(i) for i in range(6))
    assert [m.queue_offset for m in decode_messages(data, "b", tags={"A"})] == [1, 3, 5]
    retry = _record(9, topic="%RETRY%G", props={"RETRY_TOPIC": "Orders", "TAGS": "A"})
    (msg,) = decode_messages(retry, "b", retry_topic="%RETRY%G")
    assert (msg.topic, msg.reconsume_times, msg.store_addr) == ("Orders", 0, "127.0.0.1:10911")
    (kept,) = decode_messages(retry, "b")  # not a push consumer's retry topic: left alone
    assert kept.topic == "%RETRY%G"


def test_decoder_rejects_broken_bodies() -> None:
    data = _record(1) + _record(2)
    for cut in (10, len(data) - 1):
        with pytest.raises(MessageFormatError):
            decode_messages(data[:cut], "b")
    bad_magic = bytearray(data)
    bad_magic[4:8] = b"\x00\x00\x00\x01"
    with pytest.raises(MessageFormatError):
        decode_messages(bytes(bad_magic), "b")
