"""Recovery at open: find the commitlog's valid end, repair derived files, plan the rebuild.

After a clean stop (no ``abort`` marker) the files are trusted and only the last
up-to-3 segments are scanned for the valid end (``recoverNormally``). After a crash
the scan starts at the first segment whose first record is not newer than the
checkpoint (``recoverAbnormally``), checks magic, size and CRC, truncates the torn
tail, and everything from that segment is re-dispatched (consume queues skip replays).

A bad record is a torn tail only if nothing whole follows it in the last segment.
Otherwise it is damage (:mod:`rocklet.store._damage`): the scan resyncs on the next
whole record, reports the skipped bytes, and keeps every record after them, where
RocketMQ would truncate the rest of the log. Consume-queue entries of damaged records
become blank entries (readers skip them); the re-dispatch never reads damaged bytes.

Consume-queue entries that point past the end, or at a record that is not theirs
(size, topic, queue, queue offset, tags code), are dropped and rebuilt; so are index
files that point past the end or at non-records.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import structlog

from rocklet.protocol.message import MESSAGE_MAGIC, TRANSACTION_MASK
from rocklet.store._checkpoint import Checkpoint
from rocklet.store._commitlog import CommitLog
from rocklet.store._consume_queue import ENTRY, ENTRY_SIZE, ConsumeQueue, EntryValidator
from rocklet.store._damage import DamagedRange, describe_invalid, is_segment_end, resync
from rocklet.store._dispatch_request import DispatchRequest, check_record, record_mismatch
from rocklet.store._encoder import NOT_IN_QUEUE
from rocklet.store._index_file import IndexFile
from rocklet.store._index_service import IndexService
from rocklet.store._mapped_file import MappedFile
from rocklet.store.dropped_queues import DroppedQueues

__all__ = [
    "CommitLogRecovery",
    "DamagedRange",
    "QueueCrossCheck",
    "RecoveryReport",
    "blank_damaged_entries",
    "recover_commitlog",
    "recover_consume_queues",
    "recover_index",
    "resync_handler",
]

log = structlog.get_logger(__name__)

#: Called with each record the commitlog scan reads.
RecordHook = Callable[[DispatchRequest], None]
Levels = tuple[int, ...]
_MESSAGE_MAGIC: Final = struct.pack(">i", MESSAGE_MAGIC)


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
        damaged: Commitlog ranges that hold no readable record between records that
            check: skipped (kept on disk, never served), not truncated.
        consume_queue_entries_blanked: Entries of damaged records made blank.
        ignored_files: Paths in the store's directories that are not store files.
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
    damaged: tuple[DamagedRange, ...] = ()
    consume_queue_entries_blanked: int = 0
    ignored_files: tuple[str, ...] = ()

    @property
    def damaged_bytes(self) -> int:
        """Bytes in :attr:`damaged`."""
        return sum(r.length for r in self.damaged)


@dataclass(frozen=True, slots=True)
class CommitLogRecovery:
    """Result of the commitlog scan: valid end, stale bytes, abnormal re-dispatch start."""

    end: int
    truncated_bytes: int
    redispatch_from: int | None
    damaged: list[DamagedRange]


def _first_record_time(commitlog: CommitLog, index: int) -> int | None:
    mf = commitlog.files.files[index]
    req = check_record(mf.view, 0, check_crc=False)
    return req.store_timestamp if isinstance(req, DispatchRequest) else None


def _scan(
    commitlog: CommitLog, start: int, check_crc: bool, on_record: RecordHook | None, levels: Levels
) -> tuple[int, list[DamagedRange]]:
    """Offset just past the last valid record, scanning from file ``start``, and damage."""
    files = commitlog.files.files
    end = files[start].from_offset
    damaged: list[DamagedRange] = []
    for i in range(start, len(files)):
        mf = files[i]
        view, base, pos = mf.view, mf.from_offset, 0
        while True:
            req = check_record(view, pos, check_crc=check_crc, delay_levels_ms=levels)
            if isinstance(req, DispatchRequest) and req.commitlog_offset == base + pos:
                if on_record is not None:
                    on_record(req)
                pos += req.size
                end = base + pos
                continue
            if is_segment_end(view, pos):
                break
            # Where no later segment holds a record (the last one, or segments RocketMQ
            # allocated ahead before a crash), only the bytes that hold data can hide
            # a record (a 64 KiB run of zeros ends them, as for the truncation).
            tail = not any(_holds_records(later) for later in files[i + 1 :])
            limit = mf.data_end(pos) if tail else mf.size
            found = None
            if limit > pos:
                found = resync(view, mf.find_bytes, base, pos, limit, check_crc=True)
            if found is None and tail:
                return end, damaged  # the torn tail, or the end of the log
            reason = describe_invalid(view, pos, base)
            damage = DamagedRange(base + pos, (found or mf.size) - pos, reason)
            _report(mf, damage)
            damaged.append(damage)
            if found is None:
                break
            pos = found
        if i + 1 < len(files):
            end = files[i + 1].from_offset
    return end, damaged


def _holds_records(mf: MappedFile) -> bool:
    # Any record magic at all: a segment allocated ahead and never written has none.
    return mf.find_bytes(_MESSAGE_MAGIC, 0, mf.size) >= 0


class QueueCrossCheck:
    """Compares each record the commitlog scan reads with its consume-queue entry.

    The scan has parsed the record whole (tags code included), so this is where an
    entry's tags code is checked: reading the properties again for every entry would
    make recovery noticeably slower. Entry checks (:func:`recover_consume_queues`)
    then only confirm that the record an entry points at has its size, topic, queue
    and offset, and reject entries from the first index found wrong here.

    Args:
        queues: The loaded consume queues, by (topic, queue id).
        dropped: Queues dropped on purpose: their records are not theirs to check.
    """

    def __init__(
        self, queues: Mapping[tuple[str, int], ConsumeQueue], dropped: DroppedQueues | None = None
    ) -> None:
        self._queues = queues
        self._dropped = dropped.marks if dropped is not None else {}
        #: Per queue, the lowest queue offset whose entry differs from its record.
        self.first_bad: dict[tuple[str, int], int] = {}
        #: Commitlog offset of the first record whose queue has no files at all.
        self.queue_missing_from: int | None = None
        #: Per queue, the first record of the run of records with no entry that the
        #: scan ends in, as (commitlog offset, queue offset): where the queue ends.
        self.unindexed: dict[tuple[str, int], tuple[int, int]] = {}
        # Per queue, the file of the last entry read: (first byte, end byte, view).
        self._files: dict[tuple[str, int], tuple[int, int, memoryview]] = {}

    def __call__(self, req: DispatchRequest) -> None:
        """Check one scanned record's entry."""
        if req.sys_flag & TRANSACTION_MASK in NOT_IN_QUEUE:
            return
        key = (req.topic, req.queue_id)
        if self._dropped and req.commitlog_offset < self._dropped.get(key, -1):
            return  # the record of a dropped queue (a queue made since starts above)
        byte = req.queue_offset * ENTRY_SIZE
        lo, hi, view = self._files.get(key, _NO_FILE)
        if not lo <= byte < hi:
            cq = self._queues.get(key)
            if cq is None:
                if self.queue_missing_from is None:
                    self.queue_missing_from = req.commitlog_offset
                return
            mf = cq.files.find(byte)  # before recovery every loaded byte reads
            if mf is None:
                # Past the queue's files (before them, the files were lost: only the
                # store check can tell that from retention).
                if byte >= cq.files.max_offset():
                    self.unindexed.setdefault(key, (req.commitlog_offset, req.queue_offset))
                return
            lo, hi, view = mf.from_offset, mf.end_offset, mf.view
            self._files[key] = (lo, hi, view)
        entry = ENTRY.unpack_from(view, byte - lo)
        if entry == (0, 0, 0):  # not written (or a blank: recovery tells them apart)
            self.unindexed.setdefault(key, (req.commitlog_offset, req.queue_offset))
            return
        self.unindexed.pop(key, None)  # an entry follows: the run did not end the queue
        if entry != (req.commitlog_offset, req.size, req.tags_code):
            bad = self.first_bad.get(key, req.queue_offset)
            self.first_bad[key] = min(bad, req.queue_offset)

    def forget_files(self) -> None:
        """Drop the cached file views (the scan is over)."""
        self._files.clear()


_NO_FILE: tuple[int, int, memoryview] = (0, 0, memoryview(b""))


def _report(mf: MappedFile, damage: DamagedRange) -> None:
    log.warning(
        "damaged commitlog bytes skipped",
        segment=str(mf.path),
        offset=damage.offset,
        length=damage.length,
        reason=damage.reason,
    )


def resync_handler(damaged: list[DamagedRange]) -> Callable[[MappedFile, int], DamagedRange]:
    """Recovery's answer to bad bytes the re-dispatch meets outside the scanned segments.

    Args:
        damaged: Where found ranges are appended.

    Returns:
        The handler for :attr:`rocklet.store._reput.ReputService.on_damage`.
    """

    def on_damage(mf: MappedFile, pos: int) -> DamagedRange:
        limit = mf.wrote_position
        found = resync(mf.view, mf.find_bytes, mf.from_offset, pos, limit, check_crc=True)
        reason = describe_invalid(mf.view, pos, mf.from_offset)
        damage = DamagedRange(mf.from_offset + pos, (found or limit) - pos, reason)
        _report(mf, damage)
        damaged.append(damage)
        return damage

    return on_damage


def recover_commitlog(
    commitlog: CommitLog,
    checkpoint: Checkpoint,
    *,
    clean: bool,
    check_crc: bool,
    with_index: bool,
    on_record: RecordHook | None = None,
    delay_levels_ms: Levels = (),
) -> CommitLogRecovery:
    """Find the commitlog's valid end and truncate past it.

    Args:
        commitlog: Loaded commitlog (positions unset).
        checkpoint: Loaded checkpoint.
        clean: Whether the last stop was clean.
        check_crc: Verify body CRCs while scanning.
        with_index: Include the index time in the checkpoint minimum.
        on_record: Called with every valid record the scan reads.
        delay_levels_ms: Delay table (the tags code of schedule-topic records).

    Returns:
        The scan result.
    """
    files = commitlog.files.files
    if not files:
        return CommitLogRecovery(0, 0, None, [])
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
    end, damaged = _scan(commitlog, start, check_crc or not clean, on_record, delay_levels_ms)
    commitlog.verified_from = files[start].from_offset
    truncated = 0
    for mf in files:
        if mf.end_offset > end:
            pos = max(0, end - mf.from_offset)
            truncated += mf.data_end(pos) - pos
    commitlog.files.set_write_position(end)
    if truncated:
        log.warning("commitlog tail truncated", end=end, bytes=truncated)
    return CommitLogRecovery(end, truncated, redispatch_from, damaged)


def _validator(commitlog: CommitLog, cq: ConsumeQueue, end: int, first_bad: int) -> EntryValidator:
    cl_min = commitlog.min_offset()
    find = commitlog.files.find
    topic, queue_id = cq.topic.encode(), cq.queue_id
    # The segment of the previous entry: a queue's entries ascend, so most share one.
    seg_from, seg_end, seg_view = 1 << 62, 0, memoryview(b"")

    def valid(index: int, phy: int, size: int, _tags: int) -> bool:
        nonlocal seg_from, seg_end, seg_view
        if phy + size > end or index >= first_bad:
            return False
        if phy < cl_min:
            return True  # deleted by retention: nothing left to compare with
        if phy < seg_from or phy + size > seg_end:
            mf = find(phy)
            if mf is None:
                return False
            seg_from, seg_end, seg_view = (
                mf.from_offset,
                mf.from_offset + mf.wrote_position,
                mf.view,
            )
            if phy + size > seg_end:
                return False
        return record_mismatch(seg_view, phy - seg_from, topic, queue_id, index, size) is None

    return valid


def blank_damaged_entries(queues: Iterable[ConsumeQueue], damaged: Sequence[DamagedRange]) -> int:
    """Make every consume-queue entry of a damaged record a blank entry.

    Args:
        queues: Loaded consume queues.
        damaged: Damaged commitlog ranges.

    Returns:
        Entries blanked.
    """
    ranges = [(r.offset, r.end) for r in damaged]
    return sum(cq.blank_entries(ranges) for cq in queues) if ranges else 0


def recover_consume_queues(
    commitlog: CommitLog, queues: Iterable[ConsumeQueue], end: int, cross: QueueCrossCheck
) -> tuple[int, int, int]:
    """Recover every consume queue against the commitlog's valid end.

    Args:
        commitlog: Recovered commitlog.
        queues: Loaded consume queues.
        end: Commitlog valid end.
        cross: What the commitlog scan found comparing records with their entries.

    Returns:
        (queues truncated, entries dropped, lowest offset to re-dispatch from, or
        ``end`` when nothing needs rebuilding).
    """
    cross.forget_files()  # recovery may now close consume-queue files
    truncated = dropped = 0
    cl_min = commitlog.min_offset()
    rebuild_from = end
    if cross.queue_missing_from is not None:
        # A queue's directory is gone: its records may lie in any segment, not only in
        # the scanned ones, so all of them are dispatched again (the others skip).
        log.warning(
            "consume queue missing; re-dispatching every segment",
            first_record_at=cross.queue_missing_from,
        )
        rebuild_from = cl_min
    for cq in queues:
        key = (cq.topic, cq.queue_id)
        first_bad = cross.first_bad.get(key)
        validate = _validator(commitlog, cq, end, 1 << 62 if first_bad is None else first_bad)
        lost = cq.recover(validate, first_bad)
        cq.correct_min_offset(cl_min)
        if lost:
            log.warning("consume queue rebuilt", topic=cq.topic, queue=cq.queue_id, dropped=lost)
            truncated += 1
            dropped += lost
            rebuild_from = min(rebuild_from, max(cq.max_physic_offset, cl_min))
        if key in cross.unindexed:
            rebuild_from = min(rebuild_from, _queue_rebuild_from(cq, *cross.unindexed[key], cl_min))
    return truncated, dropped, rebuild_from


def _queue_rebuild_from(cq: ConsumeQueue, record_at: int, queue_offset: int, cl_min: int) -> int:
    """Where a queue's re-dispatch starts when the scan ended in records it has no entry of.

    After a crash that is the flush lag (the re-dispatch from the scan's start covers
    it); after a clean stop, or when files at the queue's end were lost, it is not.
    The run starts right at the queue's end: from its first record. It starts further
    on: the records in between lie before the scan, somewhere after the queue's last
    entry.
    """
    if queue_offset <= cq.max_offset():
        return record_at
    log.warning(
        "consume queue ends before the commitlog's records of it; rebuilding",
        topic=cq.topic,
        queue=cq.queue_id,
        ends_at=cq.max_offset(),
        next_record=queue_offset,
    )
    return max(cq.max_physic_offset, cl_min)


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
