"""Consumer offsets, queue metadata and orderly-consumption locks against a real broker."""

from __future__ import annotations

import json
from pathlib import Path

from rocklet.protocol.bodies.consumer import LockBatchResponseBody
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import iter_messages
from rocklet.store.message_store import MessageStore
from rocklet.store.retention import DiskUsage, RetentionService
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.broker.test_client_manage import cpp_request
from tests.broker.test_send_pull import cpp_send, pull
from tests.cluster import Cluster, running_cluster, small_broker_config


async def connect(cluster: Cluster) -> Connection:
    return await open_connection("127.0.0.1", cluster.broker.port)


def query_offset(group: str, topic: str, queue_id: int) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)}
    return cpp_request(RequestCode.QUERY_CONSUMER_OFFSET, ext)


def update_offset(group: str, topic: str, queue_id: int, offset: int) -> RemotingCommand:
    ext = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": str(queue_id),
        "commitOffset": str(offset),
    }
    return cpp_request(RequestCode.UPDATE_CONSUMER_OFFSET, ext)


def queue_request(code: int, topic: str, queue_id: int, **extra: str) -> RemotingCommand:
    return cpp_request(code, {"topic": topic, "queueId": str(queue_id), **extra})


def lock_body(group: str, client_id: str, queue_ids: list[int]) -> bytes:
    # The C++ LockBatchBody: queueId a JSON number (docs/protocol.md).
    mqs = [{"brokerName": "broker-a", "queueId": q, "topic": "OT"} for q in queue_ids]
    body = {"clientId": client_id, "consumerGroup": group, "mqSet": mqs}
    return json.dumps(body, separators=(",", ":")).encode()


async def lock(conn: Connection, client_id: str, queue_ids: list[int]) -> list[int]:
    cmd = cpp_request(RequestCode.LOCK_BATCH_MQ, {}, lock_body("OG", client_id, queue_ids))
    resp = await conn.request(cmd, 5)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return [mq.queue_id for mq in LockBatchResponseBody.from_json(resp.body).lock_ok_mq_set]


async def answer(conn: Connection, cmd: RemotingCommand) -> tuple[int, dict[str, str]]:
    resp = await conn.request(cmd, 5)
    return resp.code, dict(resp.ext_fields)


async def test_new_group_starts_at_zero_and_commits_round_trip(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, await connect(cluster) as conn:
        assert (await conn.request(cpp_send("OffT", b"a"), 5)).code == ResponseCode.SUCCESS
        # Nothing committed and the queue still starts at 0: "0", as a string.
        assert await answer(conn, query_offset("New", "OffT", 0)) == (0, {"offset": "0"})
        # An empty (even unknown) queue also starts at 0.
        assert await answer(conn, query_offset("New", "OffT", 3)) == (0, {"offset": "0"})
        assert await answer(conn, query_offset("New", "NoSuchTopic", 0)) == (0, {"offset": "0"})

        assert (await conn.request(update_offset("G", "OffT", 0, 1), 5)).code == 0
        assert (await conn.request(update_offset("G", "OffT", 2, 7), 5)).code == 0
        assert await answer(conn, query_offset("G", "OffT", 0)) == (0, {"offset": "1"})
        assert await answer(conn, query_offset("G", "OffT", 2)) == (0, {"offset": "7"})
        assert await answer(conn, query_offset("Other", "OffT", 2)) == (0, {"offset": "0"})

    # Offsets are persisted on stop and read back on start.
    async with running_cluster(tmp_path) as cluster, await connect(cluster) as conn:
        assert await answer(conn, query_offset("G", "OffT", 0)) == (0, {"offset": "1"})
        assert await answer(conn, query_offset("G", "OffT", 2)) == (0, {"offset": "7"})


async def test_max_min_search_and_earliest(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, await connect(cluster) as conn:
        assert await answer(conn, queue_request(RequestCode.GET_MAX_OFFSET, "MT", 0)) == (
            0,
            {"offset": "0"},
        )
        earliest = await answer(
            conn, queue_request(RequestCode.GET_EARLIEST_MSG_STORETIME, "MT", 0)
        )
        assert earliest == (0, {"timestamp": "-1"})
        for i in range(3):
            assert (await conn.request(cpp_send("MT", f"m{i}".encode()), 5)).code == 0
        got = await conn.request(pull("MT", 0, 0), 5)
        times = [m.store_timestamp for m in iter_messages(got.body)]

        assert await answer(conn, queue_request(RequestCode.GET_MAX_OFFSET, "MT", 0)) == (
            0,
            {"offset": "3"},
        )
        assert await answer(conn, queue_request(RequestCode.GET_MIN_OFFSET, "MT", 0)) == (
            0,
            {"offset": "0"},
        )
        earliest = await answer(
            conn, queue_request(RequestCode.GET_EARLIEST_MSG_STORETIME, "MT", 0)
        )
        assert earliest == (0, {"timestamp": str(times[0])})

        def search(ts: int) -> RemotingCommand:
            return queue_request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, "MT", 0, timestamp=str(ts))

        assert await answer(conn, search(0)) == (0, {"offset": "0"})
        assert await answer(conn, search(times[-1])) == (0, {"offset": str(times.index(times[-1]))})
        assert await answer(conn, search(times[-1] + 1)) == (0, {"offset": "3"})


async def test_query_offset_not_found_once_the_queue_start_was_deleted(tmp_path: Path) -> None:
    # Two ~2.5 MiB messages fill two 4 MiB commitlog segments; retention then drops the
    # first, so queue offset 0 is gone and a new group must fall back (RocketMQ's
    # QUERY_NOT_FOUND, after which clients apply consumeFromWhere).
    big = b"x" * (2_500_000)
    async with running_cluster(tmp_path) as cluster, await connect(cluster) as conn:
        for _ in range(2):
            assert (await conn.request(cpp_send("Old", big), 10)).code == ResponseCode.SUCCESS
    config = small_broker_config(tmp_path, None)
    with MessageStore.open(config.store_config()) as store:
        assert RetentionService(store, disk_usage=lambda _p: DiskUsage(100, 99, 1)).run_once() == 1
    async with running_cluster(tmp_path) as cluster, await connect(cluster) as conn:
        assert await answer(conn, queue_request(RequestCode.GET_MIN_OFFSET, "Old", 0)) == (
            0,
            {"offset": "1"},
        )
        code, ext = await answer(conn, query_offset("Fresh", "Old", 0))
        assert code == ResponseCode.QUERY_NOT_FOUND and "offset" not in ext
        # A committed offset is still answered as it is.
        assert (await conn.request(update_offset("Fresh", "Old", 0, 2), 5)).code == 0
        assert await answer(conn, query_offset("Fresh", "Old", 0)) == (0, {"offset": "2"})


async def test_locks_are_exclusive_renewed_and_released(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        await connect(cluster) as a,
        await connect(cluster) as b,
    ):
        assert await lock(a, "client-a", [0, 1]) == [0, 1]
        assert await lock(b, "client-b", [1, 2]) == [2]  # queue 1 is a's
        assert await lock(a, "client-a", [0, 1, 2]) == [0, 1]  # renewed; 2 is b's

        holder = cluster.broker.ctx.locks.holder
        assert holder("OG", MessageQueue("OT", "broker-a", 1)) == "client-a"

        unlock = cpp_request(RequestCode.UNLOCK_BATCH_MQ, {}, lock_body("OG", "client-b", [1]))
        assert (await b.request(unlock, 5)).code == ResponseCode.SUCCESS
        assert holder("OG", MessageQueue("OT", "broker-a", 1)) == "client-a"  # not b's to free

        unlock = cpp_request(RequestCode.UNLOCK_BATCH_MQ, {}, lock_body("OG", "client-a", [1]))
        resp = await a.request(unlock, 5)
        assert resp.code == ResponseCode.SUCCESS and resp.body == b""
        assert await lock(b, "client-b", [1]) == [1]
        assert holder("OG", MessageQueue("OT", "broker-a", 1)) == "client-b"
