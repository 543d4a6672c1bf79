"""A full disk is an answer: the store on a tiny tmpfs refuses puts whole and resumes.

Each test mounts a small tmpfs (tests/tmpfs.py) and fills it with a ballast file, so the
next file the store creates (a commitlog segment, a consume-queue file, an index file)
finds no room; or it pushes usage past diskSpaceWarningLevelRatio. A refused put must
write nothing, leave no file behind, and the store must take the next put once the
ballast is gone, and open again with every acknowledged message.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from rocklet.store.config import StoreConfig
from rocklet.store.disk_space import DiskLevel
from rocklet.store.message_store import MessageStore
from rocklet.store.results import PutMessageStatus
from rocklet.store.retention import RetentionService
from rocklet.store.schedule import DelayDeliveryService
from rocklet.transport.clock import ManualClock
from tests.store.helpers import message, read_all, small_config
from tests.store.layout_checker import check_store
from tests.tmpfs import fill, mounted_tmpfs

MIB = 1024 * 1024
#: Larger than any test's file count times a page: the loops below end well before.
MAX_PUTS = 5000


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, unmounted after the test."""
    with mounted_tmpfs(tmp_path / "fs", MIB) as mount:
        yield mount


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _config(root: Path, bottleneck: str) -> StoreConfig:
    # Only the bottleneck's files roll during the test; the others are large enough to
    # be created once, at the first put. The warning ratio is out of reach (1.0): these
    # tests are about ENOSPC itself.
    sizes = {
        "commitlog": {"commitlog_file_size_bytes": 64 * 1024},
        "consumequeue": {"consume_queue_entries_per_file": 16},
        "index": {"index_max_entries": 40},
    }[bottleneck]
    values: dict[str, object] = {
        "commitlog_file_size_bytes": 256 * 1024,
        "consume_queue_entries_per_file": 4096,
        "index_hash_slots": 32,
        "index_max_entries": 4096,
        "disk_space_warning_level_ratio": 1.0,
    }
    values.update(sizes)
    return small_config(root / "store", **values)


@pytest.mark.parametrize("bottleneck", ["commitlog", "consumequeue", "index"])
def test_no_room_for_a_new_file_refuses_the_put_whole(small_fs: Path, bottleneck: str) -> None:
    """ENOSPC creating a segment, queue or index file: refused, nothing written, resumes."""
    clock = ManualClock()
    cfg = _config(small_fs, bottleneck)
    ballast = small_fs / "ballast"
    acked: list[int] = []
    with MessageStore.open(cfg, clock=clock) as store:
        assert store.put_message(message(0, size=1000)).ok  # every first file exists
        acked.append(0)
        fill(ballast)
        refused = None
        for n in range(1, MAX_PUTS):
            before = _files(cfg.store_path)
            end_before = store.commitlog_max_offset()
            result = store.put_message(message(n, size=1000))
            if not result.ok:
                refused = result
                break
            acked.append(n)
        assert refused is not None, "the disk never filled"
        assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        no_room = store.disk.state.no_room
        assert no_room is not None and bottleneck in str(no_room.path)
        assert store.disk.full and "no room for" in store.disk.reason()
        # Nothing of the refused put: no bytes, no entry, no file, no half-made file.
        assert store.commitlog_max_offset() == end_before
        assert store.max_offset("T", 0) == len(acked)
        assert _files(cfg.store_path) == before
        bodies = [message(n, size=1000).body for n in acked]
        assert [m.body for m in read_all(store, "T", 0)] == bodies
        # Still full: refused at once, without trying to create the file again.
        assert store.put_message(message(MAX_PUTS, size=1000)).status is refused.status
        ballast.unlink()
        clock.advance(cfg.disk_check_interval_ms)  # the refused put measures again
        resumed = store.put_message(message(MAX_PUTS + 1, size=1000))
        assert resumed.ok and resumed.queue_offset == len(acked)
        assert not store.disk.full
        acked.append(MAX_PUTS + 1)
    with MessageStore.open(cfg, clock=clock) as store:
        assert [m.properties["seq"] for m in read_all(store, "T", 0)] == [str(n) for n in acked]
    assert not list(cfg.store_path.rglob("*.allocating"))
    report = check_store(
        cfg.store_path,
        cfg.commitlog_file_size_bytes,
        cfg.consume_queue_entries_per_file,
        cfg.index_hash_slots,
        cfg.index_max_entries,
    )
    assert report.errors == []


def test_usage_above_the_warning_level_refuses_puts_and_logs_once(small_fs: Path) -> None:
    """Past diskSpaceWarningLevelRatio: refused with the path and usage; resumes below."""
    clock = ManualClock()
    cfg = small_config(small_fs / "store", commitlog_file_size_bytes=64 * 1024)
    with MessageStore.open(cfg, clock=clock) as store:
        assert store.put_message(message(0)).ok
        ballast = small_fs / "ballast"
        with capture_logs() as logs:
            fill(ballast, leave=32 * 1024)  # 97 % used
            state = store.disk.check()
            assert state.level is DiskLevel.FULL and state.full and state.ratio > 0.90
            for n in range(1, 4):
                result = store.put_message(message(n))
                assert result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
                store.disk.check()
            reason = store.disk.reason()
            assert str(cfg.commitlog_dir) in reason and "diskSpaceWarningLevelRatio (90%)" in reason
            assert f"{round(state.ratio * 100)}% used" in reason
            assert store.get_messages("T", 0, 0, 10).buffers  # reads go on
            ballast.unlink()
            clock.advance(cfg.disk_check_interval_ms)
            assert store.put_message(message(4)).ok
        rising = [e["event"] for e in logs if e["log_level"] == "warning"]
        assert len(rising) == 3  # one line per threshold crossed, not one per put
        assert any("diskSpaceWarningLevelRatio" in e for e in rising)
        assert any("sends are accepted" in e["event"] for e in logs if e["log_level"] == "info")
        assert store.max_offset("T", 0) == 2


def test_a_warning_level_below_the_others_logs_only_the_threshold_passed(
    small_fs: Path,
) -> None:
    # diskSpaceWarningLevelRatio=0.35 under 75 % and 85 %: at about 50 % used the disk
    # is FULL, but the two cleaning thresholds were not passed and must not be logged.
    cfg = small_config(
        small_fs / "store",
        commitlog_file_size_bytes=64 * 1024,
        disk_space_warning_level_ratio=0.35,
    )
    with MessageStore.open(cfg, clock=ManualClock()) as store:
        with capture_logs() as logs:
            fill(small_fs / "ballast", leave=MIB // 2)
            state = store.disk.check()
        assert state.level is DiskLevel.FULL and 0.35 < state.ratio < 0.75
        rising = [e["event"] for e in logs if e["log_level"] == "warning"]
        assert len(rising) == 1 and "diskSpaceWarningLevelRatio" in rising[0], rising


def test_forced_retention_frees_just_enough_and_resumes_puts(small_fs: Path) -> None:
    """Above diskSpaceCleanForciblyRatio the oldest segments go until usage is below it."""
    cfg = small_config(small_fs / "store", commitlog_file_size_bytes=64 * 1024)
    with MessageStore.open(cfg, clock=ManualClock()) as store:
        n = 0
        while store.disk.check().ratio <= cfg.disk_force_clean_ratio:
            assert store.put_message(message(n, size=2000)).ok
            n += 1
        segments = len(store.commitlog.files.files)
        deleted = RetentionService(store).run_once()
        assert store.disk.state.ratio <= cfg.disk_force_clean_ratio
        assert 1 <= deleted < segments - 1  # not a whole batch: only what was needed
        assert store.commitlog_min_offset() > 0


def test_forced_retention_can_be_switched_off(small_fs: Path) -> None:
    """cleanFileForciblyEnable=false: unexpired segments stay whatever the usage."""
    cfg = small_config(
        small_fs / "store", commitlog_file_size_bytes=64 * 1024, clean_file_forcibly_enable=False
    )
    with MessageStore.open(cfg, clock=ManualClock()) as store:
        n = 0
        while store.disk.check().ratio <= cfg.disk_force_clean_ratio:
            assert store.put_message(message(n, size=2000)).ok
            n += 1
        assert RetentionService(store).run_once() == 0
        assert len(read_all(store, "T", 0)) == n


def test_a_delayed_message_refused_by_a_full_disk_is_delivered_later(small_fs: Path) -> None:
    """Delayed delivery keeps a due message whose re-put was refused (it was dropped)."""
    clock = ManualClock()
    cfg = small_config(small_fs / "store")
    with MessageStore.open(cfg, clock=clock) as store:
        delayed = message(7, queue_id=1)
        delayed.properties["DELAY"] = "1"  # 1 s
        assert store.put_message(delayed).ok
        service = DelayDeliveryService(store)
        ballast = small_fs / "ballast"
        fill(ballast)
        store.disk.check()
        assert store.disk.full
        clock.advance(1000)
        assert service.run_once(clock.now_ms()) == 0
        assert service.offsets[1] == 0 and store.max_offset("T", 1) == 0
        ballast.unlink()
        clock.advance(cfg.disk_check_interval_ms)
        assert service.run_once(clock.now_ms()) == 1
        (delivered,) = read_all(store, "T", 1)
        assert delivered.properties["seq"] == "7"
