"""Retention (``CleanCommitLogService`` / ``CleanConsumeQueueService``).

Sealed commitlog segments older than ``file_reserved_time_hours`` are deleted at a
``delete_when`` hour, or at any hour once disk usage passes
``disk_max_used_space_ratio``; past ``disk_force_clean_ratio`` (or when the disk is
full) the oldest sealed segments go even if not expired, when
``clean_file_forcibly_enable`` (RocketMQ's ``cleanImmediately``). Unlike RocketMQ, a
forced pass stops once usage is back below the force ratio instead of deleting a whole
batch. A segment's age is the store time of the first record of the segment after it
(the newest its own records can be), so the age comes from the records and the injected
clock, not from file mtimes. Consume-queue and index files that only point at deleted
data follow. Segments still viewed by readers are closed and unlinked later (RocketMQ's
destroy-with-interval). Each pass ends with a fresh disk measurement, so puts refused
for a full disk resume as soon as a pass freed the room.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import structlog

from rocklet.store._dispatch_request import DispatchRequest, check_record
from rocklet.store._files import unlink_all
from rocklet.store._time import local_hour
from rocklet.store.message_store import MessageStore

__all__ = ["DiskUsage", "RetentionService", "clean_logics"]

log = structlog.get_logger(__name__)


class DiskUsage(NamedTuple):
    """Shape of :func:`shutil.disk_usage`'s result."""

    total: int
    used: int
    free: int


#: Injectable disk usage probe (default :func:`shutil.disk_usage`).
DiskUsageFn = Callable[[Path], DiskUsage]


def _system_usage(path: Path) -> DiskUsage:
    u = shutil.disk_usage(path)
    return DiskUsage(u.total, u.used, u.free)


class RetentionService:
    """Deletes expired files. :meth:`run_once` from one timer thread at a time.

    Args:
        store: The open store.
        disk_usage: Disk usage probe for the deletion decisions (tests); by default the
            store's own measurement (:attr:`MessageStore.disk`).
    """

    def __init__(self, store: MessageStore, disk_usage: DiskUsageFn | None = None) -> None:
        self.store = store
        self.disk_usage = disk_usage

    def _usage_ratio(self) -> float:
        if self.disk_usage is None:
            return self.store.disk.check().ratio
        u = self.disk_usage(self.store.config.store_path)
        return u.used / u.total if u.total else 0.0

    def run_once(self, *, manual: bool = False) -> int:
        """One retention pass. Takes the store lock for each step, never while unlinking.

        Args:
            manual: Delete expired segments whatever the hour (``mqadmin
                deleteExpiredCommitLog``); a segment is still kept until it is
                ``file_reserved_time_hours`` old.

        Returns:
            Commitlog segments deleted.
        """
        cfg = self.store.config
        now = self.store.clock.now_ms()
        ratio = self._usage_ratio()
        time_up = manual or local_hour(now) in cfg.delete_hours
        # An unknown usage (-1) reclaims too, as RocketMQ's isSpaceToDelete does.
        space_up = ratio > cfg.disk_max_used_space_ratio or ratio < 0
        reserved_ms = cfg.file_reserved_time_hours * 3_600_000
        files = self.store.commitlog.files
        # Files leave their queues under the store lock and are unlinked after it, one
        # segment per turn: freeing a big file's blocks takes a tenth of a second or
        # more, which puts and pulls must not wait for, and a forced pass measures
        # the disk again after each unlink.
        unlink_later: list[Path] = []
        deleted = 0
        while (time_up or space_up) and deleted < cfg.delete_files_per_run:
            with self.store.lock:
                if len(files.files) <= 1:
                    break
                newest_in_first = self._first_time(1)
                expired = newest_in_first is not None and newest_in_first + reserved_ms <= now
                if not (expired or self._forced(ratio)):
                    break
                log.info(
                    "deleting commitlog segment",
                    path=str(files.files[0].path),
                    expired=expired,
                    disk_used=f"{ratio:.2f}",
                )
                files.delete_first(unlink_later)
            unlink_all(unlink_later)
            deleted += 1
            if not expired:
                ratio = self._usage_ratio()  # forced: stop once below the ratio
        with self.store.lock:
            files.retry_destroy(unlink_later)
            clean_logics(self.store, unlink_later)
        unlink_all(unlink_later)
        if deleted:
            self.store.disk.check()  # sends refused for a full disk resume now
        return deleted

    def _forced(self, ratio: float) -> bool:
        cfg = self.store.config
        immediately = ratio > cfg.disk_force_clean_ratio or (
            ratio > cfg.disk_space_warning_level_ratio
        )
        return cfg.clean_file_forcibly_enable and immediately

    def _first_time(self, index: int) -> int | None:
        mf = self.store.commitlog.files.files[index]
        req = check_record(mf.view, 0, check_crc=False)
        return req.store_timestamp if isinstance(req, DispatchRequest) else None


def clean_logics(store: MessageStore, unlink_later: list[Path] | None = None) -> None:
    """Drop consume-queue and index files that only point below the commitlog's min.

    Store lock held. Also trims each queue's min offset to its first live entry.

    Args:
        store: The store.
        unlink_later: Collects the dropped files' paths for the caller to unlink once
            it released the lock; ``None`` unlinks them now.
    """
    cl_min = store.commitlog.min_offset()
    for cq in list(store.queues.values()):
        cq.delete_expired(cl_min, unlink_later)
        cq.files.retry_destroy(unlink_later)
    store.index.delete_expired(cl_min, unlink_later)
