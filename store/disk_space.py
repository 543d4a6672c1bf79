"""The store's disk space: usage, RocketMQ's thresholds, and when puts are refused.

RocketMQ 4.9.4 (``DefaultMessageStore.CleanCommitLogService``) compares the used share
of the store's partitions with three thresholds:

- ``diskMaxUsedSpaceRatio`` (75 %): above it, expired files are deleted at any hour,
  not only at ``deleteWhen``;
- ``diskSpaceCleanForciblyRatio`` (85 %): above it, the oldest commitlog segments are
  deleted even if they have not expired (when ``cleanFileForciblyEnable``);
- ``diskSpaceWarningLevelRatio`` (90 %): above it the disk is *full*
  (``RunningFlags.getAndMakeDiskFull``): puts are answered SERVICE_NOT_AVAILABLE until
  the usage is back below it, while reads go on.

Usage is ``UtilAll.getDiskPartitionSpaceUsedPercent``: used / (used + available to
this user), rounded up to a hundredth, as ``df`` shows it. Two partitions are measured,
the commitlog's and the store root's (consume queues, index, checkpoint, config); the
fuller one decides. Rocklet adds one rule: a store file that could not be created for
want of room (ENOSPC, :class:`~rocklet.store._files.NoSpaceError`) makes the disk
full too, until its partition has room for that file.

Measuring is one ``statvfs`` per partition, done when a check is due: before every
commitlog segment is created, at most every ``disk_check_interval_ms`` while the disk
is full (so puts resume by themselves), and whenever the broker's disk-check task,
retention or a runtime-info request asks. A put on a disk that is not full reads one
attribute.
"""

from __future__ import annotations

import enum
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

from rocklet.store.config import StoreConfig
from rocklet.transport.clock import Clock

__all__ = [
    "DiskLevel",
    "DiskSpace",
    "DiskState",
    "NoRoom",
    "PartitionUsage",
    "UsageProbe",
    "partition_usage",
]

log = structlog.get_logger(__name__)


class DiskLevel(enum.IntEnum):
    """The highest threshold the usage is above (ordered by severity)."""

    OK = 0
    #: Above ``diskMaxUsedSpaceRatio``: expired files are deleted at any hour.
    CLEAN_EXPIRED = 1
    #: Above ``diskSpaceCleanForciblyRatio``: the oldest segments go even if unexpired.
    CLEAN_FORCIBLY = 2
    #: Above ``diskSpaceWarningLevelRatio``: the disk is full, puts are refused.
    FULL = 3


#: The broker.conf key of each level's threshold, for log lines and remarks.
_KEYS: Final = {
    DiskLevel.CLEAN_EXPIRED: "diskMaxUsedSpaceRatio",
    DiskLevel.CLEAN_FORCIBLY: "diskSpaceCleanForciblyRatio",
    DiskLevel.FULL: "diskSpaceWarningLevelRatio",
}


@dataclass(frozen=True, slots=True)
class PartitionUsage:
    """How full the partition holding ``path`` is.

    Attributes:
        path: The directory measured.
        ratio: Used share, rounded up to 0.01 (RocketMQ's); -1.0 when unknown.
        total: Size of the partition in bytes.
        available: Bytes this user can still write.
    """

    path: Path
    ratio: float
    total: int
    available: int


#: Measures one directory's partition (injectable for tests).
UsageProbe = Callable[[Path], PartitionUsage]


def partition_usage(path: Path) -> PartitionUsage:
    """Measure ``path``'s partition as ``UtilAll.getDiskPartitionSpaceUsedPercent`` does.

    Args:
        path: A directory on the partition.

    Returns:
        The usage; ratio -1.0 when the path is missing or cannot be measured.
    """
    try:
        st = os.statvfs(path)
    except OSError:
        return PartitionUsage(path, -1.0, 0, 0)
    total = st.f_blocks * st.f_frsize
    used = total - st.f_bfree * st.f_frsize
    available = st.f_bavail * st.f_frsize
    entire = used + available
    if total <= 0 or entire <= 0:
        return PartitionUsage(path, -1.0, total, available)
    percent = -(-used * 100 // entire)  # rounded up, like RocketMQ's
    return PartitionUsage(path, percent / 100, total, available)


@dataclass(frozen=True, slots=True)
class NoRoom:
    """A store file that could not be created for want of room.

    Attributes:
        path: The file.
        size: Its size: the room a retry needs.
    """

    path: Path
    size: int


@dataclass(frozen=True, slots=True)
class DiskState:
    """The last measurement and what it means.

    Attributes:
        level: The highest threshold the usage is above.
        commitlog: The commitlog directory's partition.
        logics: The store root's partition (consume queues, index, config).
        no_room: The file that did not fit, while its partition still lacks the room.
    """

    level: DiskLevel
    commitlog: PartitionUsage
    logics: PartitionUsage
    no_room: NoRoom | None = None

    @property
    def full(self) -> bool:
        """Whether puts are refused."""
        return self.level is DiskLevel.FULL or self.no_room is not None

    @property
    def fuller(self) -> PartitionUsage:
        """The partition with the higher usage (the commitlog's on a tie)."""
        return self.logics if self.logics.ratio > self.commitlog.ratio else self.commitlog

    @property
    def ratio(self) -> float:
        """The higher of the two usages (-1.0 when neither is known)."""
        return self.fuller.ratio


class DiskSpace:
    """Tracks the store's disk space. Any thread: measurements serialise on a lock.

    Args:
        config: Thresholds, paths and the check interval.
        clock: Spaces out the checks made while the disk is full.
        probe: Measures a partition (default :func:`partition_usage`).
    """

    def __init__(
        self, config: StoreConfig, clock: Clock, probe: UsageProbe = partition_usage
    ) -> None:
        self._config = config
        self._clock = clock
        self._probe = probe
        self._lock = threading.Lock()
        self._last_check_ms = clock.monotonic_ms()
        unknown_cl = PartitionUsage(config.commitlog_dir, -1.0, 0, 0)
        unknown_root = PartitionUsage(config.store_path, -1.0, 0, 0)
        #: The last measurement.
        self.state = DiskState(DiskLevel.OK, unknown_cl, unknown_root)
        #: Whether puts are refused (read without the lock on the put path).
        self.full = False

    def _level(self, ratio: float) -> DiskLevel:
        cfg = self._config
        if ratio > cfg.disk_space_warning_level_ratio:
            return DiskLevel.FULL
        if ratio > cfg.disk_force_clean_ratio:
            return DiskLevel.CLEAN_FORCIBLY
        if ratio > cfg.disk_max_used_space_ratio:
            return DiskLevel.CLEAN_EXPIRED
        return DiskLevel.OK

    def check(self) -> DiskState:
        """Measure now, update the state and log each threshold crossed.

        Returns:
            The new state.
        """
        cfg = self._config
        commitlog = self._probe(cfg.commitlog_dir)
        logics = self._probe(cfg.store_path)
        with self._lock:
            self._last_check_ms = self._clock.monotonic_ms()
            before = self.state
            no_room = before.no_room
            if no_room is not None:
                where = commitlog if no_room.path.is_relative_to(cfg.commitlog_dir) else logics
                if where.available >= no_room.size:
                    no_room = None
            level = self._level(max(commitlog.ratio, logics.ratio))
            after = DiskState(level, commitlog, logics, no_room)
            self.state = after
            self.full = after.full
        self._log_change(before, after)
        return after

    def still_full(self) -> bool:
        """While the disk is full: measure again if the interval has passed.

        The put path calls this only when :attr:`full` is set, so a refused put costs a
        ``statvfs`` at most once per ``disk_check_interval_ms``.

        Returns:
            Whether puts are still refused.
        """
        since = self._clock.monotonic_ms() - self._last_check_ms
        if since >= self._config.disk_check_interval_ms:
            self.check()
        return self.full

    def no_room(self, path: Path, size: int) -> None:
        """Record that ``path`` (``size`` bytes) could not be created: the disk is full.

        Args:
            path: The file.
            size: Its size.
        """
        with self._lock:
            before = self.state
            after = DiskState(before.level, before.commitlog, before.logics, NoRoom(path, size))
            self.state = after
            self.full = True
        if before.no_room is None:
            log.warning(
                "no room for a new store file: the disk is full, sends are refused until it fits",
                path=str(path),
                size=size,
            )

    def reason(self) -> str:
        """Why puts are refused, for a send's remark and the runtime info.

        Returns:
            A sentence naming the partition, its usage and what makes sends resume
            ("" when the disk is not full).
        """
        state = self.state
        if not state.full:
            return ""
        cl, cq = state.commitlog.ratio, state.logics.ratio
        head = f"the broker's disk is full [CL: {cl:5.2f} CQ: {cq:5.2f} INDEX: {cq:5.2f}]"
        if state.no_room is not None:
            room = state.no_room
            return (
                f"{head}: no room for {room.path} ({room.size} bytes); sends are accepted "
                "again once it fits (retention frees space, or free some)"
            )
        fuller = state.fuller
        limit = round(self._config.disk_space_warning_level_ratio * 100)
        return (
            f"{head}: {fuller.path} is {round(fuller.ratio * 100)}% used, above "
            f"diskSpaceWarningLevelRatio ({limit}%); sends are accepted again once it is "
            "below (retention frees space, or free some)"
        )

    def _log_change(self, before: DiskState, after: DiskState) -> None:
        fuller = after.fuller
        where = {"path": str(fuller.path), "used": f"{fuller.ratio:.2f}"}
        thresholds = {
            DiskLevel.CLEAN_EXPIRED: self._config.disk_max_used_space_ratio,
            DiskLevel.CLEAN_FORCIBLY: self._config.disk_force_clean_ratio,
            DiskLevel.FULL: self._config.disk_space_warning_level_ratio,
        }
        for level in DiskLevel:
            # A level is the highest threshold passed; with diskSpaceWarningLevelRatio
            # set below the others, FULL does not mean they were passed too.
            if before.level < level <= after.level and fuller.ratio > thresholds[level]:
                log.warning(
                    _RISING[level], **where, threshold=f"{_KEYS[level]}={thresholds[level]:.2f}"
                )
        if after.level < before.level:
            log.info(f"disk usage back to {after.level.name}", **where)
        if before.full and not after.full:
            log.info("disk space available again: sends are accepted", **where)


#: What crossing each threshold upwards means, for its WARNING line.
_RISING: Final = {
    DiskLevel.CLEAN_EXPIRED: "disk usage above diskMaxUsedSpaceRatio: expired commitlog "
    "segments are deleted at any hour",
    DiskLevel.CLEAN_FORCIBLY: "disk usage above diskSpaceCleanForciblyRatio: the oldest "
    "commitlog segments are deleted even if unexpired (unless cleanFileForciblyEnable=false)",
    DiskLevel.FULL: "disk usage above diskSpaceWarningLevelRatio: the disk is full, sends "
    "are refused with SERVICE_NOT_AVAILABLE until it is below",
}
