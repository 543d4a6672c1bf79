"""A broker reports store damage: brokerStatus keys, metrics, and ROCKLET_STORE_CHECK.

Real brokers on loopback over real store directories; the store is damaged between two
runs, and the check runs while puts go on.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rocklet.broker.processors.admin_store import StoreAdmin
from rocklet.protocol.bodies.cluster import KVTable
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import iter_messages
from rocklet.store.message_store import MessageStore
from rocklet.transport.dial import open_connection
from tests.broker.test_admin import admin, ok, send
from tests.broker.test_send_pull import pull
from tests.cluster import running_cluster
from tests.ops.test_metrics import scrape, value
from tests.store.helpers import small_config

CHECK_TIMEOUT = 60.0


async def test_store_check_answers_while_puts_go_on(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, mapped_file_size_commit_log=64 * 1024) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
        await open_connection("127.0.0.1", cluster.broker.port) as writer,
    ):
        for i in range(300):
            await ok(conn, send("Chk", i % 4, b"x" * 300))

        async def keep_putting() -> int:
            for i in range(200):
                await ok(writer, send("Chk", i % 4, b"y" * 300))
            return 200

        putting = asyncio.create_task(keep_putting())
        answer = await conn.request(admin(RequestCode.ROCKLET_STORE_CHECK), CHECK_TIMEOUT)
        assert await putting == 200
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        report = json.loads(answer.body)
        assert report["live"] is True and report["cleanStop"] is None
        assert report["ok"] is True and report["findings"] == [], report["findings"]
        figures = report["summary"]
        assert 300 <= figures["records"] <= 500 and figures["segments"] >= 2
        assert figures["records"] == figures["entries"]


async def test_one_store_check_at_a_time(tmp_path: Path) -> None:
    with MessageStore.open(small_config(tmp_path)) as store:
        admin_ = StoreAdmin(store)
        request = RemotingCommand(RequestCode.ROCKLET_STORE_CHECK)
        first, second = await asyncio.gather(
            admin_.store_check(None, request),  # type: ignore[arg-type]
            admin_.store_check(None, request),  # type: ignore[arg-type]
        )
        assert first.code == ResponseCode.SUCCESS
        assert second.code == ResponseCode.SYSTEM_BUSY and "already running" in (
            second.remark or ""
        )
        third = await admin_.store_check(None, request)  # type: ignore[arg-type]
        assert third.code == ResponseCode.SUCCESS


async def test_a_damaged_start_is_reported_by_status_metrics_and_check(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
    ):
        for i in range(50):
            await ok(conn, send("Dmg", 0, f"m{i}".encode()))
    first_size = _damage_first_record(tmp_path)
    async with (
        running_cluster(tmp_path, metrics_port=0) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
    ):
        runtime = await ok(conn, admin(RequestCode.GET_BROKER_RUNTIME_INFO))
        table = KVTable.from_json(runtime.body).table
        assert table["storeRecoveryClean"] == "true"
        assert table["storeRecoveryDamagedRanges"] == "1"
        assert table["storeRecoveryDamagedBytes"] == str(first_size)
        assert table["storeRecoveryDamage"] == f"0+{first_size} (bad magic 0xffffffff)"
        assert table["storeRecoveryTruncatedBytes"] == "0"
        assert table["storeRecoveryConsumeQueueEntriesBlanked"] == "1"

        port = cluster.broker.metrics_port
        assert port is not None
        samples = await scrape(port)
        assert value(samples, "rocklet_store_recovery_damaged_ranges") == 1
        assert value(samples, "rocklet_store_recovery_damaged_bytes") == first_size
        assert value(samples, "rocklet_store_recovery_truncated_bytes") == 0
        assert value(samples, "rocklet_store_recovery_consume_queue_entries", action="blanked") == 1

        answer = await conn.request(admin(RequestCode.ROCKLET_STORE_CHECK), CHECK_TIMEOUT)
        report = json.loads(answer.body)
        assert [(f["area"], f["offset"]) for f in report["findings"]] == [("commitlog", 0)]

        # Its entry is blank: the queue starts after it, a consumer at 0 is moved on.
        moved = await conn.request(pull("Dmg", 0, 0), 5)
        assert moved.code == ResponseCode.PULL_OFFSET_MOVED
        assert moved.ext_fields["nextBeginOffset"] == "1"
        bodies: list[bytes] = []
        offset = 1
        while offset < 50:
            pulled = await ok(conn, pull("Dmg", 0, offset))
            bodies += [m.body for m in iter_messages(pulled.body)]
            offset = int(pulled.ext_fields["nextBeginOffset"])
        assert bodies == [f"m{i}".encode() for i in range(1, 50)]


def _damage_first_record(root: Path) -> int:
    """Overwrite the first record's size and magic; return its size."""
    with open(root / "commitlog" / f"{0:020d}", "r+b") as f:
        size = int.from_bytes(f.read(4), "big")
        f.seek(0)
        f.write(b"\xff" * 8)
    return size
