"""Store configuration: one frozen, validated dataclass (RocketMQ's defaults)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DEFAULT_DELAY_LEVELS", "FlushDiskType", "StoreConfig", "parse_delay_levels"]

#: RocketMQ's ``messageDelayLevel`` default.
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"^(\d+)([smhd])$")


class FlushDiskType(enum.StrEnum):
    """``flushDiskType``: when a put is acknowledged relative to the disk."""

    ASYNC_FLUSH = "ASYNC_FLUSH"  #: a flush thread syncs every flushIntervalCommitLog ms
    SYNC_FLUSH = "SYNC_FLUSH"  #: acknowledge only once the bytes are on disk


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """Parse a ``messageDelayLevel`` string into delays in ms (level L is index L-1).

    Args:
        text: Space-separated durations such as ``"1s 5m 2h"``.

    Returns:
        Delay of each level in ms.

    Raises:
        ValueError: An item is not a number followed by s, m, h or d.
    """
    out = []
    for item in text.split():
        match = _LEVEL.match(item)
        if match is None:
            raise ValueError(f"bad delay level {item!r}")
        out.append(int(match.group(1)) * _UNIT_MS[match.group(2)])
    if not out:
        raise ValueError("no delay levels")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Everything the store needs to know, validated once.

    Attributes:
        store_path: ``storePathRootDir``.
        commitlog_path: ``storePathCommitLog``: the commitlog's directory when it is not
            ``<store_path>/commitlog`` (e.g. on a faster disk).
        commitlog_file_size_bytes: ``mappedFileSizeCommitLog`` (1 GiB).
        consume_queue_entries_per_file: ``mappedFileSizeConsumeQueue / 20`` (300,000).
        index_hash_slots: ``maxHashSlotNum`` (5,000,000).
        index_max_entries: ``maxIndexNum`` (20,000,000).
        max_message_size_bytes: ``maxMessageSize`` (4 MiB).
        flush_disk_type: ``flushDiskType``.
        flush_interval_ms: ``flushIntervalCommitLog`` (500).
        flush_least_pages: ``flushCommitLogLeastPages`` (4 pages of 4 KiB).
        flush_thorough_interval_ms: ``flushCommitLogThoroughInterval`` (10 s).
        flush_consume_queue_interval_ms: ``flushIntervalConsumeQueue`` (1 s).
        message_delay_level: ``messageDelayLevel``.
        file_reserved_time_hours: ``fileReservedTime`` (72).
        delete_when: ``deleteWhen``: hours separated by ``;`` (``"04"``).
        disk_max_used_space_ratio: ``diskMaxUsedSpaceRatio`` as a ratio (0.75): above
            it expired files are deleted at any hour.
        disk_force_clean_ratio: ``diskSpaceCleanForciblyRatio`` (0.85): above it the
            oldest sealed segments go even if not expired (if
            ``clean_file_forcibly_enable``).
        disk_space_warning_level_ratio: ``diskSpaceWarningLevelRatio`` (0.90): above it
            the disk is full and puts are refused (SERVICE_NOT_AVAILABLE).
        clean_file_forcibly_enable: ``cleanFileForciblyEnable``: past the force ratio,
            delete unexpired segments (oldest first).
        disk_check_interval_ms: How often disk usage is measured again while the disk
            is full (and by the broker's disk-check task).
        delete_files_per_run: ``deleteCommitLogFilesInterval`` batch size (10).
        message_index_enable: ``messageIndexEnable``.
        check_crc_on_recover: ``checkCRCOnRecover``.
        max_transfer_bytes: Default ``max_bytes`` of a read (256 KiB in memory).
        commitlog_page_ahead_bytes: Rocklet only: bytes past the commitlog's write
            position a background thread keeps in the page cache (16 MiB; 0 = off), so
            appends never wait for the kernel to fill a read-ahead window
            (:mod:`rocklet.store._page_ahead`).
    """

    store_path: Path
    commitlog_path: Path | None = None
    commitlog_file_size_bytes: int = 1024 * 1024 * 1024
    consume_queue_entries_per_file: int = 300_000
    index_hash_slots: int = 5_000_000
    index_max_entries: int = 20_000_000
    max_message_size_bytes: int = 4 * 1024 * 1024
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_ms: int = 500
    flush_least_pages: int = 4
    flush_thorough_interval_ms: int = 10_000
    flush_consume_queue_interval_ms: int = 1000
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    file_reserved_time_hours: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: float = 0.75
    disk_force_clean_ratio: float = 0.85
    disk_space_warning_level_ratio: float = 0.90
    clean_file_forcibly_enable: bool = True
    disk_check_interval_ms: int = 1000
    delete_files_per_run: int = 10
    message_index_enable: bool = True
    check_crc_on_recover: bool = True
    max_transfer_bytes: int = 256 * 1024
    commitlog_page_ahead_bytes: int = 16 * 1024 * 1024
    delay_levels_ms: tuple[int, ...] = field(init=False)
    delete_hours: frozenset[int] = field(init=False)

    def __post_init__(self) -> None:
        """Validate sizes and derive the delay table and delete hours.

        Raises:
            ValueError: A value is out of range.
        """
        object.__setattr__(self, "store_path", Path(self.store_path))
        if self.commitlog_file_size_bytes < 4096 or self.commitlog_file_size_bytes >= 2**31:
            raise ValueError("commitlog_file_size_bytes must be in [4096, 2**31)")
        if not 1 <= self.consume_queue_entries_per_file <= 100_000_000:
            raise ValueError("consume_queue_entries_per_file must be positive")
        if self.index_hash_slots < 1 or self.index_max_entries < 2:
            raise ValueError("index sizes must be positive")
        if self.max_message_size_bytes <= 0:
            # Larger than a segment is allowed (RocketMQ's golden settings do it): such
            # a message is refused at put time because it cannot fit.
            raise ValueError("max_message_size_bytes must be positive")
        if not 0 <= self.commitlog_page_ahead_bytes <= 1 << 30:
            raise ValueError("commitlog_page_ahead_bytes must be in [0, 1 GiB]")
        if self.flush_interval_ms <= 0 or self.flush_consume_queue_interval_ms <= 0:
            raise ValueError("flush intervals must be positive")
        ratios = (
            self.disk_max_used_space_ratio,
            self.disk_force_clean_ratio,
            self.disk_space_warning_level_ratio,
        )
        if not all(0 < ratio <= 1 for ratio in ratios):
            # Independent, as in RocketMQ: each threshold has its own effect.
            raise ValueError("disk ratios must be within (0, 1]")
        if self.disk_check_interval_ms <= 0:
            raise ValueError("disk_check_interval_ms must be positive")
        if self.file_reserved_time_hours < 0 or self.delete_files_per_run < 1:
            raise ValueError("retention settings out of range")
        object.__setattr__(self, "delay_levels_ms", parse_delay_levels(self.message_delay_level))
        hours = frozenset(int(h) for h in self.delete_when.split(";") if h.strip())
        if not hours or not all(0 <= h <= 23 for h in hours):
            raise ValueError(f"delete_when {self.delete_when!r} is not hours 0..23")
        object.__setattr__(self, "delete_hours", hours)

    @property
    def commitlog_dir(self) -> Path:
        """Where commitlog segments live (``storePathCommitLog``, else under the root)."""
        return self.commitlog_path or self.store_path / "commitlog"

    @property
    def consume_queue_file_size_bytes(self) -> int:
        """Bytes of one consume-queue file."""
        return self.consume_queue_entries_per_file * 20
