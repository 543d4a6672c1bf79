"""Retention with a ManualClock and an injected disk-usage probe."""

from __future__ import annotations

import time
from pathlib import Path

from rocklet.store.message_store import MessageStore
from rocklet.store.results import GetMessageStatus
from rocklet.store.retention import DiskUsage, RetentionService
from rocklet.transport.clock import ManualClock
from tests.store.helpers import message, read_all, small_config
from tests.store.layout_checker import check_store

HOUR = 3_600_000


def _at_hour(hour: int) -> int:
    """A local time at ``hour``:30 on some day (the delete hour is in local time)."""
    base = time.mktime((2026, 3, 10, hour, 30, 0, 0, 0, -1))
    return int(base * 1000)


def _usage(ratio: float) -> DiskUsage:
    return DiskUsage(1000, int(1000 * ratio), 1000 - int(1000 * ratio))


def test_deletes_expired_segments_at_delete_hour(tmp_path: Path) -> None:
    """Old sealed segments go at 04:xx; reads below the new min get OFFSET_TOO_SMALL."""
    clock = ManualClock(_at_hour(1))
    cfg = small_config(tmp_path, file_reserved_time_hours=1)
    with MessageStore.open(cfg, clock=clock) as store:
        for n in range(200):
            store.put_message(message(n, size=400))
        segments = len(list((tmp_path / "commitlog").iterdir()))
        retention = RetentionService(store, lambda _p: _usage(0.1))
        clock.advance(2 * HOUR)  # 03:30: expired but not the delete hour
        assert retention.run_once() == 0
        clock.advance(HOUR)  # 04:30
        deleted = retention.run_once()
        assert deleted == min(segments - 1, cfg.delete_files_per_run)
        low = store.min_offset("T", 0)
        assert low > 0
        got = store.get_messages("T", 0, 0, 5)
        assert got.status is GetMessageStatus.OFFSET_TOO_SMALL and got.next_begin_offset == low
        assert [m.queue_offset for m in read_all(store, "T", 0, low)] == list(range(low, 200))
        assert store.commitlog_min_offset() > 0
    rep = check_store(tmp_path, 16 * 1024, 16, 32, 40)
    assert rep.errors == []


def test_recent_segments_kept_unless_disk_forces(tmp_path: Path) -> None:
    """Unexpired segments survive the hour; a full disk deletes them anyway."""
    clock = ManualClock(_at_hour(4))
    with MessageStore.open(small_config(tmp_path), clock=clock) as store:
        for n in range(100):
            store.put_message(message(n, size=400))
        assert RetentionService(store, lambda _p: _usage(0.5)).run_once() == 0
        assert RetentionService(store, lambda _p: _usage(0.95)).run_once() > 0
        assert store.commitlog_min_offset() > 0


def test_segment_with_live_views_is_deleted_later(tmp_path: Path) -> None:
    """A segment a reader still views is unlinked once the view is gone."""
    clock = ManualClock(_at_hour(4))
    with MessageStore.open(small_config(tmp_path), clock=clock) as store:
        for n in range(100):
            store.put_message(message(n, size=400))
        first = tmp_path / "commitlog" / f"{0:020d}"
        held = store.get_messages("T", 0, 0, 1)
        retention = RetentionService(store, lambda _p: _usage(0.95))
        assert retention.run_once() > 0
        assert first.exists()  # deferred: the view pins the map
        held.buffers.clear()
        del held
        retention.run_once()
        assert not first.exists()
