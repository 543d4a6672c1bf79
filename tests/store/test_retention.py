"""Retention with a ManualClock and an injected disk-usage probe."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rocklet.store.message_store import MessageStore
from rocklet.store.results import GetMessageStatus, PutMessageStatus
from rocklet.store.retention import DiskUsage, RetentionService
from rocklet.transport.clock import ManualClock
from tests.store.helpers import message, read_all, small_config
from tests.store.layout_checker import check_store

HOUR = 3_600_000
#: The store's directories of segments.
DATA_DIRS = frozenset({"commitlog", "consumequeue", "index"})


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


def test_files_are_unlinked_with_the_store_lock_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Puts go on while a deleted file is unlinked: its blocks are freed outside the lock.

    Unlinking a big segment whose pages are cached takes a tenth of a second or more on
    ext4; under the store lock every put and pull of the broker would wait for it. Each
    unlink of a store file here first makes a put from another thread, which must
    finish while the unlink is still to come.
    """
    clock = ManualClock(_at_hour(1))
    cfg = small_config(tmp_path, file_reserved_time_hours=1)
    unlinked: list[Path] = []
    put_during: list[bool] = []
    real_unlink = Path.unlink

    def unlink(path: Path, missing_ok: bool = False) -> None:
        if path.is_relative_to(tmp_path) and path.relative_to(tmp_path).parts[0] in DATA_DIRS:
            unlinked.append(path)
            other = ThreadPoolExecutor(1)
            try:
                put = other.submit(store.put_message, message(1000 + len(unlinked)))
                put_during.append(put.result(timeout=10).status is PutMessageStatus.PUT_OK)
            finally:
                other.shutdown(wait=False)  # a put stuck behind the lock must not hang us
        real_unlink(path, missing_ok=missing_ok)

    with MessageStore.open(cfg, clock=clock) as store:
        for n in range(200):
            store.put_message(message(n, size=400))
        clock.advance(3 * HOUR)  # 04:30, and every sealed segment has expired
        monkeypatch.setattr(Path, "unlink", unlink)
        deleted = RetentionService(store, lambda _p: _usage(0.1)).run_once()
        monkeypatch.undo()
        assert deleted > 0
        segments = [p for p in unlinked if p.parent.name == "commitlog"]
        assert len(segments) == deleted
        assert any("consumequeue" in p.parts for p in unlinked)
        assert put_during and all(put_during)
        assert not any(p.exists() for p in unlinked)


def test_a_forced_pass_measures_the_disk_after_each_unlink(tmp_path: Path) -> None:
    """Forced by a full disk, retention stops as soon as the unlinks bring usage down."""
    clock = ManualClock(_at_hour(12))  # not the delete hour, nothing expired
    commitlog = tmp_path / "commitlog"

    def usage(_path: Path) -> DiskUsage:
        # Full while more than 4 segments are on disk: the probe sees real unlinks.
        return _usage(0.95 if len(list(commitlog.iterdir())) > 4 else 0.5)

    with MessageStore.open(small_config(tmp_path), clock=clock) as store:
        for n in range(200):
            store.put_message(message(n, size=400))
        before = len(list(commitlog.iterdir()))
        assert before > 6
        assert RetentionService(store, usage).run_once() == before - 4
        assert len(list(commitlog.iterdir())) == 4
