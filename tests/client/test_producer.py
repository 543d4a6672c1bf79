"""The producer against a real name server and broker(s) on loopback."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from rocklet.client.admin import Admin
from rocklet.client.errors import (
    ClientStateError,
    InvalidMessageError,
    MessageIllegalError,
    NoRouteError,
)
from rocklet.client.message import Message, SendStatus, send_properties
from rocklet.client.producer import Producer, hash_selector
from rocklet.client.send_wire import EncodedBatch, uniq_key
from rocklet.protocol.batch import BatchItem, encode_batch
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.route import Perm
from rocklet.protocol.message import SysFlag
from rocklet.protocol.message_id import parse_offset_msg_id
from rocklet.protocol.names import SCHEDULE_TOPIC
from tests.client.producer_support import WAIT_S, long_poll, second_broker, stored, stored_all
from tests.cluster import running_cluster


async def test_send_stores_every_field_and_the_result_names_it(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, Producer("PG", cluster.namesrv_addr) as p:
        msg = Message("Orders", b"hello", tags="TagA", keys=["k1", "k2"], properties={"u": "1"})
        result = await p.send(msg)
        assert result.status is SendStatus.SEND_OK
        assert result.message_queue.topic == "Orders"
        assert result.message_queue.broker_name == "broker-a"
        where = parse_offset_msg_id(result.offset_msg_id)
        assert where.port == cluster.broker.port

        (got,) = stored(cluster.broker, "Orders", result.message_queue.queue_id)
        assert got.body == b"hello" and got.tags == "TagA" and got.keys == ("k1", "k2")
        assert got.properties["u"] == "1"
        assert got.msg_id == result.msg_id  # the UNIQ_KEY
        assert got.offset_msg_id == result.offset_msg_id
        assert got.queue_offset == result.queue_offset == 0
        assert got.commit_log_offset == where.offset
        assert got.born_host[0] == "127.0.0.1"


async def test_round_robin_spreads_sends_over_every_queue(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        Producer("PG", cluster.namesrv_addr) as p,
        Admin(cluster.namesrv_addr) as admin,
    ):
        registered = asyncio.create_task(cluster.broker.next_registration())
        await admin.create_topic("Spread", queue_nums=4)
        await asyncio.wait_for(registered, WAIT_S)
        results = [await p.send(Message("Spread", b"%d" % i)) for i in range(8)]
        assert sorted(r.message_queue.queue_id for r in results) == [0, 0, 1, 1, 2, 2, 3, 3]


async def test_unknown_topics_are_sent_through_the_template_and_auto_created(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path) as cluster, Producer("PG", cluster.namesrv_addr) as p:
        assert await p.instance.topic_route("Fresh") is None
        results = [await p.send(Message("Fresh", b"%d" % i)) for i in range(6)]
        assert {r.message_queue.queue_id for r in results} <= {0, 1, 2, 3}
        assert len(stored_all(cluster.broker, "Fresh")) == 6


async def test_sends_right_after_creating_a_topic_use_the_queues_it_has(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        Producer("PG", cluster.namesrv_addr) as p,
        Admin(cluster.namesrv_addr) as admin,
    ):
        await admin.create_topic("JustMade", queue_nums=1)
        # The name server may not route it yet: the producer guesses from TBW102 (4
        # queues) and must still land every message on the one queue that exists.
        results = [await p.send(Message("JustMade", b"%d" % i)) for i in range(5)]
        assert {r.message_queue.queue_id for r in results} == {0}
        assert len(stored(cluster.broker, "JustMade", 0)) == 5


async def test_concurrent_sends_pipeline_on_one_connection(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, Producer("PG", cluster.namesrv_addr) as p:
        results = await asyncio.gather(*(p.send(Message("Pipe", b"m%d" % i)) for i in range(300)))
        assert len({r.msg_id for r in results}) == 300
        bodies = {m.body for m in stored_all(cluster.broker, "Pipe")}
        assert bodies == {b"m%d" % i for i in range(300)}


async def test_batch_is_stored_as_individual_messages(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, Producer("PG", cluster.namesrv_addr) as p:
        batch = [Message("Batch", b"b%d" % i, tags="T", keys=f"key{i}") for i in range(10)]
        result = await p.send(batch)
        ids = result.msg_id.split(",")
        assert len(ids) == 10 and len(result.offset_msg_id.split(",")) == 10
        got = stored(cluster.broker, "Batch", result.message_queue.queue_id)
        assert [m.body for m in got] == [b"b%d" % i for i in range(10)]
        assert [m.msg_id for m in got] == ids
        assert [m.keys for m in got] == [(f"key{i}",) for i in range(10)]
        assert [m.queue_offset for m in got] == list(range(10))
        with pytest.raises(ValueError, match="same topic"):
            await p.send([Message("A", b"1"), Message("B", b"2")])
        with pytest.raises(ValueError, match="delayed"):
            await p.send([Message("A", b"1", delay_level=2)])


async def test_a_batch_body_encoded_by_the_caller_is_sent_as_a_batch(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        Producer("PG", cluster.namesrv_addr, max_message_size=1000) as p,
    ):
        prefix, first = p.reserve_uniq_keys(3)
        keys = [uniq_key(prefix, first + i) for i in range(3)]
        msgs = [Message("Encoded", b"e%d" % i, tags="T", keys=f"k{i}") for i in range(3)]
        body = encode_batch(
            BatchItem(0, m.body, send_properties(m, key).encode())
            for m, key in zip(msgs, keys, strict=True)
        )
        result = await p.send_encoded_batch(EncodedBatch("Encoded", body, ",".join(keys), 3))
        assert result.status is SendStatus.SEND_OK and result.msg_id == ",".join(keys)
        got = stored(cluster.broker, "Encoded", result.message_queue.queue_id)
        assert [(m.body, m.tags, m.keys) for m in got] == [
            (b"e%d" % i, "T", (f"k{i}",)) for i in range(3)
        ]
        assert [m.msg_id for m in got] == keys
        # The producer's own sends go on after the reserved keys.
        assert (await p.send(Message("Encoded", b"next"))).msg_id == uniq_key(prefix, first + 3)

        with pytest.raises(InvalidMessageError, match="1001 bytes; max 1000"):
            await p.send_encoded_batch(EncodedBatch("Encoded", b"x" * 1001, keys[0], 1))
        with pytest.raises(InvalidMessageError, match="not as many UNIQ_KEYs"):
            await p.send_encoded_batch(EncodedBatch("Encoded", body, keys[0], 3))
        with pytest.raises(InvalidMessageError, match="auto-create template"):
            await p.send_encoded_batch(EncodedBatch("TBW102", body, ",".join(keys), 3))
        with pytest.raises(InvalidMessageError, match="at least one"):
            await p.send_encoded_batch(EncodedBatch("Encoded", b"", "", 0))
    with pytest.raises(ClientStateError):
        p.reserve_uniq_keys(1)


async def test_compression_over_the_threshold_round_trips(tmp_path: Path) -> None:
    big, small = b"compressible " * 1000, b"s" * 100
    async with (
        running_cluster(tmp_path) as cluster,
        Producer("PG", cluster.namesrv_addr, compress_over=4096) as p,
        Admin(cluster.namesrv_addr) as admin,
    ):
        r_big = await p.send(Message("Zip", big))
        r_small = await p.send(Message("Zip", small))
        records = {m.msg_id: m for m in stored_all(cluster.broker, "Zip")}
        stored_big, stored_small = records[r_big.msg_id], records[r_small.msg_id]
        assert stored_big.sys_flag & SysFlag.COMPRESSED
        assert not stored_small.sys_flag & SysFlag.COMPRESSED
        assert stored_big.body == big and stored_small.body == small  # inflated on read
        assert stored_big.store_size < len(big) // 4
        raw = cluster.broker.ctx.store.read_record(stored_big.commit_log_offset)
        assert raw is not None and zlib.compress(big, 5) in bytes(raw)
        viewed = await admin.view_message(r_big.offset_msg_id)
        assert viewed.body == big


async def test_oneway_send_arrives(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        Producer("PG", cluster.namesrv_addr) as p,
        Admin(cluster.namesrv_addr) as admin,
    ):
        await admin.create_topic("OneWay", queue_nums=1)
        await p.send_oneway(Message("OneWay", b"fire and forget", tags="X"))
        (got,) = await long_poll(cluster.broker.port, "OneWay", 0)
        assert (got.body, got.tags) == (b"fire and forget", "X")


async def test_delayed_send_waits_in_the_schedule_topic(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, Producer("PG", cluster.namesrv_addr) as p:
        result = await p.send(Message("Later", b"in 2h", delay_level=18))
        assert stored(cluster.broker, "Later", result.message_queue.queue_id) == []
        (waiting,) = stored(cluster.broker, SCHEDULE_TOPIC, 17)  # queue = level - 1
        assert waiting.body == b"in 2h" and waiting.delay_level == 18
        assert waiting.properties["REAL_TOPIC"] == "Later"


async def test_orderly_sends_keep_each_key_on_one_queue_in_order(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, Producer("PG", cluster.namesrv_addr) as p:
        keys = ["order-1", "order-2", "order-3", "order-4"]
        for seq in range(5):
            for key in keys:
                await p.send_orderly(Message("Ordered", f"{key}:{seq}".encode()), key)
        queues = await p.instance.routes.publish_queues("Ordered")
        for key in keys:
            mq = hash_selector(queues, Message("Ordered", b"x"), key)
            mine = [m.body for m in stored(cluster.broker, "Ordered", mq.queue_id)]
            mine = [b for b in mine if b.startswith(key.encode() + b":")]
            assert mine == [f"{key}:{seq}".encode() for seq in range(5)]

        def last(qs: Sequence[MessageQueue], _msg: Message, _key: object) -> MessageQueue:
            return qs[-1]

        result = await p.send_orderly(Message("Ordered", b"sel"), None, selector=last)
        assert result.message_queue == queues[-1]


async def test_a_stopped_broker_is_skipped_and_sends_keep_succeeding(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path / "a") as cluster,
        second_broker(cluster, tmp_path / "b") as broker_b,
        Producer("PG", cluster.namesrv_addr, send_timeout_ms=8000) as p,
    ):
        async with Admin(cluster.namesrv_addr) as admin:
            assert len(await admin.create_topic("Both", queue_nums=2)) == 2
        first = [await p.send(Message("Both", b"before%d" % i)) for i in range(4)]
        assert {r.message_queue.broker_name for r in first} == {"broker-a", "broker-b"}

        await cluster.broker.stop()
        after = [await p.send(Message("Both", b"after%d" % i)) for i in range(6)]
        assert {r.message_queue.broker_name for r in after} == {"broker-b"}
        on_b = {m.body for m in stored_all(broker_b, "Both", 2)}
        assert {b"after%d" % i for i in range(6)} <= on_b


async def test_non_retriable_broker_error_is_raised_at_once(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, max_message_size=1024) as cluster,
        Producer("PG", cluster.namesrv_addr, compress_over=1 << 20) as p,
    ):
        with pytest.raises(MessageIllegalError) as info:
            await p.send(Message("TooBig", b"x" * 2000))
        assert info.value.addr == f"127.0.0.1:{cluster.broker.port}"
        assert not info.value.retriable


async def test_topic_without_write_permission_has_no_route(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        Producer("PG", cluster.namesrv_addr) as p,
        Admin(cluster.namesrv_addr) as admin,
    ):
        await admin.create_topic("ReadOnly", queue_nums=1, perm=Perm.READ)
        with pytest.raises(NoRouteError):
            await p.send(Message("ReadOnly", b"x"))


async def test_lifecycle_is_idempotent_and_closed_producers_refuse(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        p = Producer("PG", cluster.namesrv_addr)
        with pytest.raises(ClientStateError):
            await p.send(Message("T", b"x"))
        await p.start()
        await p.start()
        assert (await p.send(Message("T", b"x"))).status is SendStatus.SEND_OK
        await p.close()
        await p.close()
        with pytest.raises(ClientStateError):
            await p.send(Message("T", b"x"))
        with pytest.raises(ClientStateError):
            await p.start()
