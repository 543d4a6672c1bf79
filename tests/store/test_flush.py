"""Flush: SYNC_FLUSH durability futures with group commit; checkpoint at close."""

from __future__ import annotations

import struct
import threading
from concurrent.futures import Future, wait
from pathlib import Path

from rocklet.store.config import FlushDiskType
from rocklet.store.message_store import MessageStore
from tests.store.helpers import message, small_config


def test_sync_flush_group_commit(tmp_path: Path) -> None:
    """Concurrent SYNC_FLUSH puts all complete, sharing fewer syncs than puts."""
    cfg = small_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    futures: list[Future[bool]] = []
    lock = threading.Lock()
    with MessageStore.open(cfg) as store:
        start = threading.Barrier(8)

        def work(base: int) -> None:
            start.wait()
            for n in range(base, base + 40):
                res = store.put_message(message(n))
                assert res.durable is not None
                with lock:
                    futures.append(res.durable)

        threads = [threading.Thread(target=work, args=(i * 100,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done, pending = wait(futures, timeout=30)
        assert not pending and all(f.result() for f in done)
        assert 0 < store.flush_service.sync_count < len(futures)
        assert store.flush_service.flushed_offset == store.commitlog_max_offset()


def test_async_flush_run_once_and_checkpoint(tmp_path: Path) -> None:
    """ASYNC_FLUSH puts return no future; close writes the checkpoint page."""
    with MessageStore.open(small_config(tmp_path)) as store:
        res = store.put_message(message(1))
        assert res.durable is None
        store.flush_service.run_once(force=True)
        assert store.flush_service.flushed_offset >= res.wrote_offset + res.wrote_bytes
    page = (tmp_path / "checkpoint").read_bytes()
    assert len(page) == 4096
    physic, logics, index = struct.unpack_from(">qqq", page)
    assert physic == logics == index == res.store_timestamp


def test_a_cancelled_durability_future_does_not_fail_the_group_commit(tmp_path: Path) -> None:
    """A waiter that gave up (its future cancelled) must not fail the others' sync.

    It used to: completing the cancelled future raised in the flush round, which then
    failed every pending future with "flush failed".
    """
    cfg = small_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    with MessageStore.open(cfg) as store:
        flush = store.flush_service
        flush.stop()  # no flush thread: the rounds below run here, in order
        abandoned = store.put_message(message(1)).durable
        kept = store.put_message(message(2)).durable
        assert abandoned is not None and kept is not None
        assert abandoned.cancel()  # as asyncio's wrap_future does when its waiter times out
        flush.run_once()
        assert kept.result(timeout=0) is True
        assert flush.flushed_offset == store.commitlog_max_offset()


def test_sync_to_flushes_at_once_in_async_mode(tmp_path: Path) -> None:
    """An explicit durability request is served without waiting for the flush interval."""
    cfg = small_config(
        tmp_path,
        flush_interval_ms=60_000,
        flush_least_pages=1000,
        flush_thorough_interval_ms=600_000,
    )
    with MessageStore.open(cfg) as store:
        res = store.put_message(message(1))
        end = res.wrote_offset + res.wrote_bytes
        assert store.flush_service.flushed_offset < end  # nothing flushed it yet
        assert store.sync_to(end).result(timeout=30) is True
        assert store.flush_service.flushed_offset >= end
