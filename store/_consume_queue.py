"""The consume queue of one topic and queue: fixed 20-byte entries indexing the commitlog.

Layout: files ``consumequeue/<topic>/<queueId>/<20-digit byte offset>`` of
``entries_per_file`` entries; entry ``i`` (the message with queue offset ``i``) is at
byte ``i * 20`` of the queue:

    ======  ====  ===========================================================
    offset  size  field
    ======  ====  ===========================================================
    0       8     commitlog offset of the record
    8       4     record size (TOTALSIZE)
    12      8     tags code: Java hashCode of TAGS, or the deliver time (schedule topic)
    ======  ====  ===========================================================

A queue whose first file starts past entry 0 has the gap before its first entry filled
with blank entries (offset 0, size 0x7FFFFFFF, tags 0: ``fillPreBlank``).
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import structlog

from rocklet.store._mapped_file import MappedFileQueue

__all__ = ["BLANK_ENTRY_SIZE", "ENTRY", "ENTRY_SIZE", "ConsumeQueue"]

log = structlog.get_logger(__name__)

ENTRY: Final = struct.Struct(">qiq")
ENTRY_SIZE: Final = 20
#: Size field of a pre-blank entry.
BLANK_ENTRY_SIZE: Final = 0x7FFFFFFF
_BLANK_ENTRY: Final = ENTRY.pack(0, BLANK_ENTRY_SIZE, 0)
_PHY_SIZE: Final = struct.Struct(">qi")

#: ``validate(index, commitlog_offset, size, tags_code) -> bool`` used by recovery.
EntryValidator = Callable[[int, int, int, int], bool]


class ConsumeQueue:
    """One topic-queue's index. Writer: the dispatching thread under the store lock.

    Args:
        topic: Topic name.
        queue_id: Queue id.
        directory: ``<store>/consumequeue/<topic>/<queueId>``.
        entries_per_file: Entries per file.
    """

    def __init__(self, topic: str, queue_id: int, directory: Path, entries_per_file: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        # A few entries per read or write: read-around would fill whole windows on the
        # writer's thread (see MappedFile's read_around).
        self.files = MappedFileQueue(directory, entries_per_file * ENTRY_SIZE, read_around=False)
        #: End (offset + size) of the newest indexed record; replays below it are skipped.
        self.max_physic_offset = -1
        #: Byte offset of the first live entry.
        self.min_logic_offset = 0

    def load(self) -> None:
        """Map the existing files (positions are set by :meth:`recover`)."""
        self.files.load()

    def min_offset(self) -> int:
        """First readable queue offset."""
        return self.min_logic_offset // ENTRY_SIZE

    def max_offset(self) -> int:
        """Next queue offset to be written (the number of entries)."""
        return self.files.max_offset() // ENTRY_SIZE

    def put(self, commitlog_offset: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """Write the entry of queue offset ``queue_offset`` (``putMessagePositionInfo``).

        Args:
            commitlog_offset: Where the record is.
            size: Its TOTALSIZE.
            tags_code: Tags hash or deliver time.
            queue_offset: Its queue offset (entry index).

        Returns:
            True if written, False if skipped as a replay.
        """
        if commitlog_offset + size <= self.max_physic_offset:
            return False  # replay of a record already indexed
        expect = queue_offset * ENTRY_SIZE
        current = self.files.max_offset()
        if not self.files.files:
            self._start(expect)
            current = expect
        if expect < current:
            return False
        if expect > current:
            # RocketMQ logs "logic queue order maybe wrong"; we keep entry i == offset i.
            log.warning("consume queue gap", topic=self.topic, queue=self.queue_id, at=current)
            while current < expect:
                self._append(_BLANK_ENTRY)
                current += ENTRY_SIZE
        self._append(ENTRY.pack(commitlog_offset, size, tags_code))
        self.max_physic_offset = commitlog_offset + size
        return True

    def append_entries(self, entries: bytes, queue_offset: int, end_physic_offset: int) -> bool:
        """Append consecutive entries from ``queue_offset`` in one copy per file.

        The put path's :meth:`put` for a whole batch. Writes nothing and returns False
        unless the queue ends exactly at ``queue_offset`` (or has no files yet) and the
        first entry is not a replay; the caller then puts entry by entry.

        Args:
            entries: Whole 20-byte entries.
            queue_offset: Queue offset of the first.
            end_physic_offset: End (offset + size) of the last entry's record.

        Returns:
            Whether the entries were written.
        """
        first_phy, first_size = _PHY_SIZE.unpack_from(entries)
        if first_phy + first_size <= self.max_physic_offset:
            return False
        expect = queue_offset * ENTRY_SIZE
        files = self.files.files
        if not files:
            self._start(expect)
            mf = self.files.last_or_new()
        else:
            # files.max_offset() and last_or_new(), inlined: every put comes here.
            mf = files[-1]
            if mf.from_offset + mf.wrote_position != expect:
                return False
            if mf.wrote_position == mf.size:
                mf = self.files.last_or_new()
        if len(entries) <= mf.size - mf.wrote_position:  # mf.free
            mf.append(entries)
        else:  # crosses into the next file(s); entries never straddle (sizes are k*20)
            view = memoryview(entries)
            pos, total = 0, len(view)
            while pos < total:
                n = min(mf.free, total - pos)
                mf.append(view[pos : pos + n])
                pos += n
                if pos < total:
                    mf = self.files.last_or_new()
        self.max_physic_offset = end_physic_offset
        return True

    def reserve(self, queue_offset: int, count: int) -> None:
        """Reserve on disk the files that ``count`` entries from ``queue_offset`` need.

        The put path calls this before writing the commitlog, so a full disk refuses the
        put before anything is written rather than after its record is stored.

        Args:
            queue_offset: Queue offset of the first entry.
            count: Entries about to be appended.

        Raises:
            NoSpaceError: The disk has no room for a new file.
        """
        start = queue_offset * ENTRY_SIZE
        end = start + count * ENTRY_SIZE
        files = self.files.files
        if files:
            last = files[-1]
            if end <= last.from_offset + last.size:
                return  # fits the current file: the put path's usual case
        self.files.reserve(end, start)

    def _start(self, expect: int) -> None:
        # The first file of a queue starting past entry 0 (fillPreBlank).
        mf = self.files.create_file(expect - expect % self.files.file_size)
        count = (expect - mf.from_offset) // ENTRY_SIZE
        if count:
            mf.append(_BLANK_ENTRY * count)
        self.min_logic_offset = expect

    def _append(self, entry: bytes) -> None:
        self.files.last_or_new().append(entry)

    def entries(self, index: int) -> memoryview | None:
        """Entries from ``index`` to the end of its file's written part (one block).

        Args:
            index: Queue offset.

        Returns:
            A view of whole 20-byte entries, or None if ``index`` is not stored.
        """
        byte = index * ENTRY_SIZE
        if byte < self.min_logic_offset:
            return None
        mf = self.files.find(byte)
        if mf is None:
            return None
        pos = byte - mf.from_offset
        if pos >= mf.wrote_position:
            return None
        return mf.view[pos : mf.wrote_position]

    def entry(self, index: int) -> tuple[int, int, int] | None:
        """One entry: (commitlog offset, size, tags code), or None if not stored.

        Args:
            index: Queue offset.

        Returns:
            The entry or None.
        """
        block = self.entries(index)
        if block is None:
            return None
        result: tuple[int, int, int] = ENTRY.unpack_from(block, 0)
        return result

    def roll_next_file(self, index: int) -> int:
        """First queue offset of the file after the one holding ``index``.

        Args:
            index: Queue offset.

        Returns:
            That queue offset.
        """
        per_file = self.files.file_size // ENTRY_SIZE
        return index + per_file - index % per_file

    def recover(self, validate: EntryValidator, known_bad: int | None = None) -> int:
        """Find the valid end (``ConsumeQueue.recover``) and set positions.

        Scans the last up-to-3 files, or from the file of ``known_bad`` if that is
        older; an entry is valid if its size is positive and ``validate`` accepts it
        (blank entries are accepted as they are). Everything from the first invalid
        entry on is dropped, to be rebuilt from the commitlog.

        Args:
            validate: Checks an entry against the commitlog.
            known_bad: A queue offset already known to hold a wrong entry.

        Returns:
            Entries dropped (garbage or pointing past the commitlog).
        """
        files = self.files.files
        if not files:
            return 0
        start = max(0, len(files) - 3)
        if known_bad is not None:
            bad_file = (known_bad * ENTRY_SIZE - files[0].from_offset) // self.files.file_size
            start = max(0, min(start, bad_file))
        end = files[start].from_offset
        for mf in files[start:]:
            index = mf.from_offset // ENTRY_SIZE
            pos = 0
            for phy, size, tags in ENTRY.iter_unpack(mf.view):
                if phy == 0 and size == 0:
                    break
                blank = phy == 0 and size == BLANK_ENTRY_SIZE
                if not blank and (phy < 0 or size <= 0 or not validate(index, phy, size, tags)):
                    break
                if not blank:
                    self.max_physic_offset = phy + size
                pos += ENTRY_SIZE
                index += 1
            end = mf.from_offset + pos
            if pos < mf.size:
                break
        dropped = self._written_past(end)
        self.files.set_write_position(end)
        return dropped

    def _written_past(self, end: int) -> int:
        """Entries written (not all zero) from byte ``end`` on: what recovery drops."""
        count = 0
        for mf in self.files.files:
            if mf.end_offset <= end:
                continue
            pos = max(0, end - mf.from_offset)
            for phy, size, _tags in ENTRY.iter_unpack(mf.view[pos:]):
                if phy == 0 and size == 0:
                    break
                count += 1
        return count

    def blank_entries(self, ranges: Sequence[tuple[int, int]]) -> int:
        """Turn entries whose record overlaps a damaged commitlog range into blanks.

        Readers skip blank entries, so the damaged record is never served while the
        queue offsets of every other entry stay as they are. Each changed file is
        synced before this returns: a blank lost in a power cut would serve the
        damaged bytes again if the damage lies where recovery does not scan.

        Args:
            ranges: Damaged ``[start, end)`` commitlog ranges.

        Returns:
            Entries blanked.
        """
        if not ranges:
            return 0
        lo, hi = min(a for a, _ in ranges), max(b for _, b in ranges)
        count = 0
        for mf in self.files.files:
            view = mf.view[: mf.wrote_position]
            if not _may_overlap(view, lo, hi):
                continue
            for n, (phy, size, _tags) in enumerate(ENTRY.iter_unpack(view)):
                if size == 0 and phy == 0:
                    break
                if size == BLANK_ENTRY_SIZE or size < 0:
                    continue
                if any(phy < end and phy + size > start for start, end in ranges):
                    mf.write_at(n * ENTRY_SIZE, _BLANK_ENTRY)
                    mf.flushed_position = min(mf.flushed_position, n * ENTRY_SIZE)
                    count += 1
        if count:
            log.warning(
                "consume queue entries of damaged records blanked",
                topic=self.topic,
                queue=self.queue_id,
                entries=count,
            )
            self.files.flush()
        return count

    def correct_min_offset(self, commitlog_min: int) -> None:
        """Set the min offset to the first entry whose record is still stored.

        A binary search in each file: retention calls this under the store lock right
        after deleting segments, when a busy queue's first live entry lies hundreds of
        thousands of entries in (a scan of them held sends and pulls for 30 ms).

        Args:
            commitlog_min: The commitlog's min offset.
        """
        for mf in self.files.files:
            found = _first_live(mf.view[: mf.wrote_position], commitlog_min)
            if found is not None:
                self.min_logic_offset = mf.from_offset + found * ENTRY_SIZE
                return
        self.min_logic_offset = self.files.max_offset()

    def delete_expired(self, commitlog_min: int, unlink_later: list[Path] | None = None) -> int:
        """Delete files (never the newest) whose entries all point below ``commitlog_min``.

        Args:
            commitlog_min: The commitlog's min offset.
            unlink_later: Collects the closed files' paths for the caller to unlink
                outside the store lock; ``None`` unlinks them now.

        Returns:
            Files deleted.
        """
        deleted = 0
        while len(self.files.files) > 1:
            if _last_record_end(self.files.files[0].view) > commitlog_min:
                break
            self.files.delete_first(unlink_later)
            deleted += 1
        self.correct_min_offset(commitlog_min)
        return deleted

    def flush(self) -> int:
        """Fdatasync files with unflushed entries. Flush thread.

        Returns:
            Files synced.
        """
        return self.files.flush()

    def close(self) -> None:
        """Release the maps."""
        self.files.close()

    def delete_files(self) -> None:
        """Close and delete every file of the queue, and its directory (a dropped queue).

        A reader's view keeps its map; the unlink still frees it when the view goes.
        """
        files = self.files
        files.release_reserved()
        for mf in files.files + files.pending_destroy:
            mf.try_close()
            mf.path.unlink(missing_ok=True)
        files.files, files.pending_destroy = [], []
        shutil.rmtree(files.directory, ignore_errors=True)
        topic_dir = files.directory.parent
        if topic_dir.is_dir() and not any(topic_dir.iterdir()):
            topic_dir.rmdir()


def _may_overlap(view: memoryview, lo: int, hi: int) -> bool:
    """Whether a file's entries can reach into ``[lo, hi)`` (phys ascend in a queue).

    Only a full file starting with a real entry is judged by its first and last entry;
    anything else (blanks first, a zero tail) is read whole.
    """
    if len(view) < ENTRY_SIZE:
        return False
    first: int
    last: int
    first, first_size, _ = ENTRY.unpack_from(view, 0)
    last, last_size, _ = ENTRY.unpack_from(view, len(view) - ENTRY_SIZE)
    if first_size in (0, BLANK_ENTRY_SIZE) or last_size in (0, BLANK_ENTRY_SIZE):
        return True
    return first < hi and last + last_size > lo


def _first_live(view: memoryview, commitlog_min: int) -> int | None:
    """Index of the first non-blank entry pointing at or past ``commitlog_min``, or None.

    Phys ascend in a queue, blank entries (phy 0) aside. The search keeps one fact:
    every real entry before ``lo`` points below ``commitlog_min``; a probe landing on
    blanks uses the next real entry. The scan from ``lo`` at the end finds the answer
    at once unless blanks misled the search, and stays correct when they did.
    """
    count = len(view) // ENTRY_SIZE
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) // 2
        k = mid
        while k < hi and ENTRY.unpack_from(view, k * ENTRY_SIZE)[1] == BLANK_ENTRY_SIZE:
            k += 1
        if k == hi:  # blanks from mid to hi: look before them
            hi = mid
        elif ENTRY.unpack_from(view, k * ENTRY_SIZE)[0] >= commitlog_min:
            hi = k
        else:
            lo = k + 1
    for n in range(lo, count):
        phy, size, _tags = ENTRY.unpack_from(view, n * ENTRY_SIZE)
        if size != BLANK_ENTRY_SIZE and phy >= commitlog_min:
            return n
    return None


def _last_record_end(view: memoryview) -> int:
    """End of the record of a full file's last non-blank entry (0 if all are blank).

    A blank entry (a damaged record's, or a gap) says nothing about the file's age.
    """
    for pos in range(len(view) - ENTRY_SIZE, -1, -ENTRY_SIZE):
        phy, size, _tags = ENTRY.unpack_from(view, pos)
        if size != BLANK_ENTRY_SIZE:
            end: int = phy + size
            return end
    return 0
