"""The HA pieces in one process: store bytes in and out, the master's frames and acks,
and a slave that is ahead of its master."""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvloop
from structlog.testing import capture_logs

from rocklet.broker.ha import slave as slave_module
from rocklet.broker.ha.master import HAMaster
from rocklet.broker.ha.slave import HASlave
from rocklet.broker.ha.wire import HEADER, HEADER_SIZE, REPORT
from rocklet.store.message_store import MessageStore
from rocklet.store.replica import append_replica, read_replica, record_at_or_after
from tests.replication.nodes import until
from tests.store.helpers import message, small_config


def _bytes(store: MessageStore) -> bytes:
    out = bytearray()
    at, end = store.commitlog_min_offset(), store.commitlog_max_offset()
    while at < end:
        chunk = read_replica(store, at, 1 << 20)
        assert chunk
        out += chunk
        at += len(chunk)
    return bytes(out)


def _copy(src: MessageStore, dst: MessageStore, chunk: int) -> None:
    at = dst.commitlog_max_offset()
    while at < src.commitlog_max_offset():
        data = read_replica(src, at, chunk)
        assert data
        at = append_replica(dst, at, data)


@contextmanager
def _replicated_pair(tmp_path: Path) -> Iterator[tuple[MessageStore, MessageStore]]:
    """A master's store holding 10 messages and a slave's holding a copy of them."""
    with (
        MessageStore.open(small_config(tmp_path / "m")) as m,
        MessageStore.open(small_config(tmp_path / "s")) as s,
    ):
        for n in range(10):
            assert m.put_message(message(n)).ok
        _copy(m, s, 1000)
        yield m, s


def test_odd_chunks_rebuild_the_same_commitlog_and_queues(tmp_path: Path) -> None:
    with (
        MessageStore.open(small_config(tmp_path / "a")) as a,
        MessageStore.open(small_config(tmp_path / "b")) as b,
    ):
        for n in range(120):  # several 16 KiB segments
            assert a.put_message(message(n, queue_id=n % 3, size=90 + n % 50)).ok
        _copy(a, b, 777)  # chunks that cut records and headers anywhere
        assert _bytes(b) == _bytes(a)
        for q in range(3):
            assert a.max_offset("T", q) == b.max_offset("T", q) == 40
            for at in range(0, 40, 8):
                mine = a.get_messages("T", q, at, 8)
                theirs = b.get_messages("T", q, at, 8)
                assert [bytes(v) for v in theirs.buffers] == [bytes(v) for v in mine.buffers]
                assert mine.buffers
        assert b.query_by_key("T", "k-77", 5)


async def test_master_frames_and_one_ack_releases_every_send_below_it(tmp_path: Path) -> None:
    with MessageStore.open(small_config(tmp_path / "m")) as store:
        master = HAMaster(store, batch_bytes=4096, heartbeat_s=60)
        port = await master.start("127.0.0.1", 0)
        try:
            assert not master.slave_ok(1)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(REPORT.pack(0))
            await until("the slave counted", lambda: master.has_slaves)
            ends = []
            for n in range(3):
                r = store.put_message(message(n))
                ends.append(r.wrote_offset + r.wrote_bytes)
            master.notify()
            waits = [asyncio.create_task(master.wait_replicated(e, 5)) for e in ends]
            got = b""
            while len(got) < ends[-1]:
                offset, size = HEADER.unpack(await reader.readexactly(HEADER_SIZE))
                assert offset == len(got) and 0 < size <= 4096
                got += await reader.readexactly(size)
            assert got == _bytes(store)
            writer.write(REPORT.pack(ends[1]))  # one ack: the first two sends
            assert await waits[0] and await waits[1]
            assert not waits[2].done()
            assert master.slave_ok(ends[2])
            assert not await master.wait_replicated(ends[2] + 1, 0.05)  # times out
            writer.write(REPORT.pack(ends[2]))
            assert await waits[2]
            writer.close()
        finally:
            await master.stop()


async def test_slave_ahead_of_its_master_stops(tmp_path: Path) -> None:
    with _replicated_pair(tmp_path) as (m, s):
        assert s.put_message(message(99)).ok  # bytes the master never had
        ahead = s.commitlog_max_offset()
        # The master's idle heartbeat carries its end offset: that is how the slave
        # learns that the master ends before it does.
        master = HAMaster(m, heartbeat_s=0.2)
        port = await master.start("127.0.0.1", 0)
        slave = HASlave(s, f"127.0.0.1:{port}", heartbeat_s=60)
        slave.start()
        try:
            await until("the divergence", lambda: slave.diverged is not None, 10)
            assert f"before the slave's max offset {ahead}" in (slave.diverged or "")
            assert s.commitlog_max_offset() == ahead
            assert "diverged" in (slave.out_of_step() or "")  # no metadata from it
        finally:
            await slave.stop()
            await master.stop()


async def test_master_metadata_is_out_of_step_from_its_loss_to_the_next_check(
    tmp_path: Path,
) -> None:
    """The slave's metadata sync asks ``out_of_step``: a slave holding data may take the
    master's tables only once a connection found its commitlog a prefix of the master's,
    not once the master is gone, and again after the next check (a master that lost its
    disk answers its broker port before the HA check finds it out)."""
    with _replicated_pair(tmp_path) as (m, s):
        master = HAMaster(m, heartbeat_s=0.2)
        port = await master.start("127.0.0.1", 0)
        slave = HASlave(s, f"127.0.0.1:{port}", heartbeat_s=60)
        checks = 0

        def checked() -> None:
            nonlocal checks
            checks += 1

        slave.on_checked = checked
        # It holds data: out of step until a connection compares it with the master's
        # (the master may have come back without its disk before the slave started).
        assert "not been checked" in (slave.out_of_step() or "")
        slave.start()
        try:
            await until("the first check", lambda: slave.out_of_step() is None, 10)
            assert slave.connected and checks == 1
            await master.stop()
            await until("the loss", lambda: slave.out_of_step() is not None, 10)
            assert "not been checked" in (slave.out_of_step() or "")
            master = HAMaster(m, heartbeat_s=0.2)
            await master.start("127.0.0.1", port)  # back with its store
            await until("the check", lambda: slave.out_of_step() is None, 10)
            assert slave.connected and slave.diverged is None
            assert checks == 2  # each check that put it back in step said so
        finally:
            await slave.stop()
            await master.stop()


def test_a_connection_reset_under_the_slave_is_a_lost_connection(tmp_path: Path) -> None:
    """A master killed with kill -9 resets the HA connection; under uvloop the slave's
    next offset report then raises RuntimeError. The slave must take that as a lost
    connection and dial again, and its stop must not fail (it once ended replication
    for good and made the broker's stop exit 1)."""

    async def scenario() -> int:
        async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()  # RST, as from a process killed with unread data

        server = await asyncio.start_server(reset, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        dials = 0

        async def dial_reset(
            host: str, port: int
        ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            # Hand over streams whose transport the loop already closed after the reset.
            nonlocal dials
            dials += 1
            reader, writer = await asyncio.open_connection(host, port)
            while not writer.is_closing():
                try:
                    await reader.readexactly(1)
                except (ConnectionResetError, asyncio.IncompleteReadError):
                    await asyncio.sleep(0.01)
            return reader, writer

        with MessageStore.open(small_config(tmp_path / "s")) as store:
            slave = HASlave(store, f"127.0.0.1:{port}", heartbeat_s=60, dial=dial_reset)
            slave.start()
            try:
                await until("a second dial", lambda: dials >= 2, 10)
            finally:
                server.close()
                await slave.stop()
        return dials

    assert uvloop.run(scenario()) >= 2


def test_oldest_unacknowledged_record_is_found_from_any_offset(tmp_path: Path) -> None:
    """The lag-in-seconds walk: mid-record offsets, segment ends, hints and its budget."""
    with MessageStore.open(small_config(tmp_path / "m")) as store:
        puts = [store.put_message(message(n, size=300 + n % 7 * 40)) for n in range(120)]
        records = [
            (p.wrote_offset, p.wrote_offset + p.wrote_bytes, p.store_timestamp) for p in puts
        ]
        assert store.commitlog_max_offset() > 3 * 16 * 1024  # several segments
        for start, end, ts in records:
            for at in (start, start + 1, end - 1):
                assert record_at_or_after(store, at) == (start, ts)
        # In a segment's blank end: the first record of the next segment.
        gaps = [(a, b) for a, b in itertools.pairwise(records) if a[1] != b[0]]
        assert gaps
        for before, after in gaps:
            assert record_at_or_after(store, before[1]) == (after[0], after[2])
        assert record_at_or_after(store, store.commitlog_max_offset()) is None
        # A hint skips the walk; a budget too small returns an earlier record (older:
        # an over-estimate), from which the next call goes on to the right one.
        last_start, _, last_ts = records[-1]
        first_in_segment = next(r for r in records if r[0] // 16384 == last_start // 16384)
        assert record_at_or_after(store, last_start, hint=last_start) == (last_start, last_ts)
        early = record_at_or_after(store, last_start + 5, limit=1)
        assert early is not None and first_in_segment[0] < early[0] < last_start
        assert record_at_or_after(store, last_start + 5, hint=early[0]) == (last_start, last_ts)


def _refusing_dial() -> tuple[Callable[[str, int], Awaitable[Any]], asyncio.Event]:
    """A dial that always fails, and an event set at its second call (the first failure
    has then been handled in full)."""
    second_try = asyncio.Event()
    tries = 0

    async def refuse(host: str, port: int) -> Any:
        nonlocal tries
        tries += 1
        if tries == 2:
            second_try.set()
        raise ConnectionRefusedError(f"{host}:{port} refused")

    return refuse, second_try


async def test_an_unreachable_master_pauses_the_metadata_of_a_slave_with_data_only(
    tmp_path: Path,
) -> None:
    """An empty slave has nothing the master's tables could replace: it takes them even
    while its HA port cannot be reached. One holding data waits for a check."""
    with (
        _replicated_pair(tmp_path) as (_, holding),
        MessageStore.open(small_config(tmp_path / "empty")) as empty,
    ):
        for store, expected in ((empty, None), (holding, "not been checked")):
            dial, second_try = _refusing_dial()
            slave = HASlave(store, "127.0.0.1:1", dial=dial)
            slave.start()
            try:
                await asyncio.wait_for(second_try.wait(), 10)
                why = slave.out_of_step()
                assert (why is None) if expected is None else (expected in (why or "")), why
            finally:
                await slave.stop()


async def test_a_master_that_stays_unreachable_is_logged_now_and_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Retried every second, logged at the first failure and then once per 60: a dead
    # master left a slave writing a warning a second.
    monkeypatch.setattr(slave_module, "_RETRY_S", 0.0)
    monkeypatch.setattr(slave_module, "_UNREACHABLE_LOG_EVERY", 3)
    tried = 0

    async def refuse(host: str, port: int) -> Any:
        nonlocal tried
        tried += 1
        raise ConnectionRefusedError(111, "Connection refused")

    with MessageStore.open(small_config(tmp_path)) as store, capture_logs() as logs:
        slave = HASlave(store, "127.0.0.1:1", dial=refuse)
        slave.start()
        try:
            await until("seven attempts", lambda: tried >= 7, 10)
        finally:
            await slave.stop()
    warned = [e["attempts"] for e in logs if e["event"] == "cannot reach the master's HA port"]
    assert warned[:3] == [1, 4, 7]
