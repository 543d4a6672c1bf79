"""Recovery at open: find the commitlog's valid end, repair derived files, plan the rebuild.

After a clean stop (no ``abort`` marker) the files are trusted and only the last
up-to-3 segments are scanned for the valid end (``recoverNormally``). After a crash
the scan starts at the first segment whose first record is not newer than the
checkpoint (``recoverAbnormally``), checks magic, size and CRC, truncates the torn
tail, and everything from that segment is re-dispatched (consume queues skip replays).
Consume-queue entries and index entries that point past the end or at non-records are
dropped and rebuilt.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

import structlog

from rocklet.protocol.message import MESSAGE_MAGIC
from rocklet.store._checkpoint import Checkpoint
from rocklet.store._commitlog import CommitLog
from rocklet.store._consume_queue import ConsumeQueue, EntryValidator
from rocklet.store._dispatch_request import DispatchRequest, check_record
from rocklet.store._index_file import IndexFile
from rocklet.store._index_service import IndexService

__all__ = [
    "CommitLogRecovery",
    "RecoveryReport",
    "recover_commitlog",
    "recover_consume_queues",
    "recover_index",
]

log = structlog.get_logger(__name__)

_RECORD_HEAD = struct.Struct(">ii4xi4xq")  # size, magic, queue id, queue offset


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What recovery found and did.

    Attributes:
        clean: True if the previous run stopped cleanly (no abort marker).
        commitlog_max_offset: The valid end of the commitlog.
        truncated_bytes: Stale bytes cleared past that end.
        redispatched: Records dispatched during recovery.
        consume_queues_truncated: Queues that lost entries (past the end or garbage).
        consume_queue_entries_dropped: Entries dropped.
        index_files_dropped: Index files deleted to be rebuilt.
        index_entries: Entries in the index files after recovery.
        elapsed_ms: Time recovery took.
    """

    clean: bool
    commitlog_max_offset: int
    truncated_bytes: int
    redispatched: int
    consume_queues_truncated: int
    consume_queue_entries_dropped: int
    index_files_dropped: int
    index_entries: int
    elapsed_ms: int


@dataclass(frozen=True, slots=True)
class CommitLogRecovery:
    """Result of the commitlog scan: valid end, stale bytes, abnormal re-dispatch start."""

    end: int
    truncated_bytes: int
    redispatch_from: int | None


def _first_record_time(commitlog: CommitLog, index: int) -> int | None:
    mf = commitlog.files.files[index]
    req = check_record(mf.view, 0, check_crc=False)
    return req.store_timestamp if isinstance(req, DispatchRequest) else None


def _scan(commitlog: CommitLog, start: int, *, check_crc: bool) -> int:
    """Offset just past the last valid record, scanning from file ``start``."""
    files = commitlog.files.files
    end = files[start].from_offset
    for i in range(start, len(files)):
        mf = files[i]
        view, pos = mf.view, 0
        while True:
            req = check_record(view, pos, check_crc=check_crc)
            if isinstance(req, DispatchRequest) and req.commitlog_offset == mf.from_offset + pos:
                pos += req.size
                end = mf.from_offset + pos
                continue
            if req == 0 and i + 1 < len(files):  # blank / end of segment: roll
                end = files[i + 1].from_offset
                break
            return end  # invalid record, or the end of the last segment
    return end


def recover_commitlog(
    commitlog: CommitLog, checkpoint: Checkpoint, *, clean: bool, check_crc: bool, with_index: bool
) -> CommitLogRecovery:
    """Find the commitlog's valid end and truncate past it.

    Args:
        commitlog: Loaded commitlog (positions unset).
        checkpoint: Loaded checkpoint.
        clean: Whether the last stop was clean.
        check_crc: Verify body CRCs while scanning.
        with_index: Include the index time in the checkpoint minimum.

    Returns:
        The scan result.
    """
    files = commitlog.files.files
    if not files:
        return CommitLogRecovery(0, 0, None)
    redispatch_from = None
    if clean:
        start = max(0, len(files) - 3)
    else:
        limit = checkpoint.min_timestamp(with_index=with_index)
        start = 0
        for i in range(len(files) - 1, -1, -1):
            ts = _first_record_time(commitlog, i)
            if ts is not None and 0 < ts <= limit:
                start = i
                break
        redispatch_from = files[start].from_offset
    end = _scan(commitlog, start, check_crc=check_crc or not clean)
    truncated = 0
    for mf in files:
        if mf.end_offset > end:
            pos = max(0, end - mf.from_offset)
            truncated += mf.data_end(pos) - pos
    commitlog.files.set_write_position(end)
    if truncated:
        log.warning("commitlog tail truncated", end=end, bytes=truncated)
    return CommitLogRecovery(end, truncated, redispatch_from)


def _validator(commitlog: CommitLog, cq: ConsumeQueue, end: int) -> EntryValidator:
    cl_min = commitlog.min_offset()

    def valid(index: int, phy: int, size: int) -> bool:
        if phy + size > end:
            return False
        if phy < cl_min:
            return True  # deleted by retention: nothing left to compare with
        head = commitlog.read(phy, _RECORD_HEAD.size)
        if head is None:
            return False
        rsize, magic, qid, qoff = _RECORD_HEAD.unpack(head)
        return bool(
            magic == MESSAGE_MAGIC and rsize == size and qid == cq.queue_id and qoff == index
        )

    return valid


def recover_consume_queues(
    commitlog: CommitLog, queues: Iterable[ConsumeQueue], end: int
) -> tuple[int, int, int]:
    """Recover every consume queue against the commitlog's valid end.

    Args:
        commitlog: Recovered commitlog.
        queues: Loaded consume queues.
        end: Commitlog valid end.

    Returns:
        (queues truncated, entries dropped, lowest offset to re-dispatch from, or
        ``end`` when nothing needs rebuilding).
    """
    truncated = dropped = 0
    rebuild_from = end
    for cq in queues:
        lost = cq.recover(_validator(commitlog, cq, end))
        cq.correct_min_offset(commitlog.min_offset())
        if lost:
            truncated += 1
            dropped += lost
            rebuild_from = min(rebuild_from, max(cq.max_physic_offset, commitlog.min_offset()))
    return truncated, dropped, rebuild_from


def recover_index(index: IndexService, commitlog: CommitLog, end: int) -> tuple[int, int]:
    """Drop index files that are garbage or point past ``end`` (and all newer ones).

    Args:
        index: Loaded index service.
        commitlog: Recovered commitlog.
        end: Commitlog valid end.

    Returns:
        (files dropped, offset to re-dispatch from; ``end`` if none dropped).
    """
    for pos, f in enumerate(index.files):
        if not _index_file_ok(f, commitlog, end, deep=pos == len(index.files) - 1):
            count = len(index.files) - pos
            log.warning("index file rebuilt", path=str(f.path), dropped_files=count)
            rebuild = index.drop_from(pos)
            return count, max(min(rebuild, end), commitlog.min_offset())
    return 0, end


def _index_file_ok(f: IndexFile, commitlog: CommitLog, end: int, *, deep: bool) -> bool:
    if not f.header_ok(end):
        return False
    cl_min = commitlog.min_offset()
    count = f.index_count
    for phy, prev in f.entry_offsets():
        if not (0 <= phy < end and 0 <= prev < count):
            return False
        if deep and phy >= cl_min and commitlog.record_size_at(phy) <= 0:
            return False
    return True
