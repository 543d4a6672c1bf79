"""Store maintenance admin codes (305, 306, 316, 321, 329) and QUERY_MESSAGE's order.

A real broker on loopback with its store in a temporary directory; the files on disk
are what is checked. Retention time is a ManualClock given to the broker, so "two hours
later" needs no waiting.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from rocklet.broker.app import Broker
from rocklet.protocol.bodies.cluster import TopicList
from rocklet.protocol.bodies.maintenance import QueryConsumeQueueResponseBody
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import decode_message, iter_messages
from rocklet.protocol.message import java_string_hash as tags_hash
from rocklet.transport.clock import ManualClock
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.broker.test_admin import admin, create_topic, ok, send
from tests.cluster import small_broker_config

HOUR = 3_600_000
SEGMENT = 64 * 1024


def _at_hour(hour: int) -> int:
    """A local time at ``hour``:30, away from the default delete hour (04)."""
    return int(time.mktime((2026, 3, 10, hour, 30, 0, 0, 0, -1)) * 1000)


@asynccontextmanager
async def broker_at(
    store: Path, clock: ManualClock | None = None, **overrides: object
) -> AsyncIterator[tuple[Broker, Connection]]:
    config = small_broker_config(store, None, **overrides)
    broker = await Broker.start(config, host="127.0.0.1", clock=clock)
    try:
        async with await open_connection("127.0.0.1", broker.port) as conn:
            yield broker, conn
    finally:
        await broker.stop()


def segments(store: Path) -> list[str]:
    return sorted(p.name for p in (store / "commitlog").iterdir())


async def test_system_topics_and_query_consume_queue(tmp_path: Path) -> None:
    async with broker_at(tmp_path) as (_broker, conn):
        listed = await ok(conn, admin(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))
        names = set(TopicList.from_json(listed.body).topic_list)
        assert {
            "TBW102",
            "SCHEDULE_TOPIC_XXXX",
            "RMQ_SYS_TRANS_HALF_TOPIC",
            "BenchmarkTest",
        } <= names
        assert {"DefaultCluster", "broker-a", "DefaultCluster_REPLY_TOPIC"} <= names

        await ok(conn, create_topic("CqT", 4, 4))
        for n in range(5):
            await ok(conn, send("CqT", 0, b"x" * (10 + n), tag=f"tag{n % 2}"))

        def query(index: int, count: int, **more: str) -> RemotingCommand:
            ext = {"topic": "CqT", "queueId": "0", "index": str(index), "count": str(count)}
            return RemotingCommand(RequestCode.QUERY_CONSUME_QUEUE, ext_fields=ext | more)

        answer = await ok(conn, query(1, 3, consumerGroup="Nobody"))
        body = QueryConsumeQueueResponseBody.from_json(answer.body)
        assert (body.min_queue_index, body.max_queue_index) == (0, 5)
        assert body.subscription_data is None
        assert body.filter_data == "Nobody@CqT is not online!"
        assert body.queue_data is not None and len(body.queue_data) == 3
        offsets = [e.physic_offset for e in body.queue_data]
        assert offsets == sorted(offsets) and offsets[0] > 0
        assert [e.tags_code for e in body.queue_data] == [
            tags_hash(f"tag{n % 2}") for n in (1, 2, 3)
        ]
        # Each entry points at the record it indexes.
        view = await ok(conn, admin(RequestCode.VIEW_MESSAGE_BY_ID, offset=str(offsets[0])))
        record = decode_message(view.body)
        assert (record.queue_offset, len(record.body)) == (1, 11)
        assert body.queue_data[0].physic_size == len(view.body)

        past = await conn.request(query(10, 3), 5)
        assert (past.code, past.remark) == (ResponseCode.SUCCESS, "Index 10 of 0@CqT is not exist!")
        assert not past.body
        missing = await conn.request(query(0, 3, queueId="3"), 5)
        assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR, "3@CqT is not exist!")


async def test_clean_unused_topic_drops_only_deleted_topics(tmp_path: Path) -> None:
    async with broker_at(tmp_path) as (broker, conn):
        for topic in ("Keep", "Gone"):
            await ok(conn, create_topic(topic, 2, 2))
            for queue_id in (0, 1):
                await ok(conn, send(topic, queue_id, b"payload"))
        cq = tmp_path / "consumequeue"
        assert {"Keep", "Gone"} <= {p.name for p in cq.iterdir()}
        # Nothing to drop while both topics exist.
        await ok(conn, admin(RequestCode.CLEAN_UNUSED_TOPIC))
        assert (cq / "Gone" / "0").is_dir()

        await ok(conn, admin(RequestCode.DELETE_TOPIC_IN_BROKER, topic="Gone"))
        await ok(conn, admin(RequestCode.CLEAN_UNUSED_TOPIC))
        assert not (cq / "Gone").exists()
        assert sorted(p.name for p in (cq / "Keep").iterdir()) == ["0", "1"]
        assert ("Gone", 0) not in broker.ctx.store.queues
        assert broker.ctx.store.max_offset("Keep", 0) == 1
        # Idempotent, and the kept topic is still written and read.
        await ok(conn, admin(RequestCode.CLEAN_UNUSED_TOPIC))
        await ok(conn, send("Keep", 0, b"more"))
        assert broker.ctx.store.max_offset("Keep", 0) == 2
        # A topic created again with the old name starts from offset 0.
        await ok(conn, create_topic("Gone", 2, 2))
        again = await ok(conn, send("Gone", 0, b"new"))
        assert again.ext_fields["queueOffset"] == "0"


def _open_files_under(directory: Path) -> list[str]:
    """This process's descriptors on files under ``directory`` (the broker runs in it)."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith(str(directory)):
            found.append(target)
    return found


async def test_delete_topic_removes_its_queue_files_and_their_descriptors(tmp_path: Path) -> None:
    # Kept until retention, the files of topics made and deleted by the thousand ran
    # the broker out of descriptors (two per file below Python 3.13).
    async with broker_at(tmp_path) as (broker, conn):
        await ok(conn, create_topic("Brief", 4, 4))
        for queue_id in range(4):
            await ok(conn, send("Brief", queue_id, b"payload"))
        gone = tmp_path / "consumequeue" / "Brief"
        assert len(_open_files_under(gone)) >= 4
        await ok(conn, admin(RequestCode.DELETE_TOPIC_IN_BROKER, topic="Brief"))
        assert not gone.exists()
        assert _open_files_under(gone) == []
        assert ("Brief", 0) not in broker.ctx.store.queues
        # Made again, it starts from offset 0 and holds only its new message.
        await ok(conn, create_topic("Brief", 4, 4))
        again = await ok(conn, send("Brief", 0, b"new"))
        assert again.ext_fields["queueOffset"] == "0"
        assert broker.ctx.store.max_offset("Brief", 0) == 1


async def test_delete_expired_commitlog_and_clean_expired_queues(tmp_path: Path) -> None:
    clock = ManualClock(_at_hour(1))
    async with broker_at(
        tmp_path, clock, mapped_file_size_commit_log=SEGMENT, file_reserved_time_hours=1
    ) as (broker, conn):
        store = broker.ctx.store
        for topic in ("Old", "Mid", "New"):
            await ok(conn, create_topic(topic, 1, 1))
        for _ in range(3 * SEGMENT // 1024):
            await ok(conn, send("Old", 0, b"o" * 900))
        for _ in range(2 * SEGMENT // 1024):
            await ok(conn, send("Mid", 0, b"m" * 900))
        before = segments(tmp_path)
        assert len(before) >= 5

        # Within the reserved time nothing goes, whatever the hour.
        await ok(conn, admin(RequestCode.DELETE_EXPIRED_COMMITLOG))
        await ok(conn, admin(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE))
        assert segments(tmp_path) == before and store.commitlog_min_offset() == 0
        assert (tmp_path / "consumequeue" / "Old" / "0").is_dir()

        clock.advance(2 * HOUR)  # 03:30: expired, but not the delete hour
        for _ in range(5):
            await ok(conn, send("New", 0, b"n" * 900))
        await ok(conn, admin(RequestCode.DELETE_EXPIRED_COMMITLOG))
        after = segments(tmp_path)
        assert before[0] not in after and before[-1] in after
        low = store.commitlog_min_offset()
        assert low > 0
        # Records stored within the reserved time are all still there.
        assert store.get_messages("New", 0, 0, 5).queue_offsets == [0, 1, 2, 3, 4]

        await ok(conn, admin(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE))
        assert not (tmp_path / "consumequeue" / "Old").exists()
        assert ("Old", 0) not in store.queues
        assert 0 < store.min_offset("Mid", 0) < store.max_offset("Mid", 0)
        assert store.max_offset("New", 0) == 5
        await ok(conn, admin(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE))  # nothing more to do
        assert store.max_offset("Mid", 0) == 2 * SEGMENT // 1024


async def test_query_message_hits_in_commitlog_order(tmp_path: Path) -> None:
    async with broker_at(tmp_path) as (_broker, conn):
        await ok(conn, create_topic("KeyT", 4, 4))
        for n in range(12):
            await ok(conn, send("KeyT", n % 4, f"m{n}".encode(), keys=f"k{n} shared"))

        def query(max_num: int) -> RemotingCommand:
            return admin(
                RequestCode.QUERY_MESSAGE,
                topic="KeyT",
                key="shared",
                maxNum=str(max_num),
                beginTimestamp="0",
                endTimestamp=str(2**62),
            )

        found = await ok(conn, query(32))
        bodies = [m.body for m in iter_messages(found.body)]
        assert bodies == [f"m{n}".encode() for n in range(12)]  # oldest first
        # More hits than maxNum: the newest maxNum are kept, still in ascending order.
        few = await ok(conn, query(5))
        assert [m.body for m in iter_messages(few.body)] == [f"m{n}".encode() for n in range(7, 12)]
