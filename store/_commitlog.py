"""The commitlog: every record of every topic, appended to fixed-size segments.

Layout: segments ``commitlog/<20-digit start offset>``, each ``commitlog_file_size_bytes``
long, holding records back to back (``rocklet.protocol.message`` has the record table). The
end of a segment is marked by a blank filler:

    ======  ====  ===========================================================
    offset  size  field
    ======  ====  ===========================================================
    0       4     TOTALSIZE = bytes left in the segment
    4       4     MAGICCODE = BLANK_MAGIC (0xCBD43194)
    ======  ====  ===========================================================

A record goes to the next segment when it plus 8 bytes does not fit
(``CommitLog.DefaultAppendMessageCallback``: ``END_FILE_MIN_BLANK_LENGTH``).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, NamedTuple

from rocklet.protocol.message import (
    BLANK_MAGIC,
    MESSAGE_MAGIC,
    PHYSICAL_OFFSET_POS,
    QUEUE_OFFSET_POS,
    STORE_TIMESTAMP_POS,
)
from rocklet.store._mapped_file import MappedFile, MappedFileQueue
from rocklet.store._page_ahead import PageAhead

__all__ = ["END_FILE_MIN_BLANK", "AppendResult", "AppendStatus", "CommitLog"]

#: A segment always keeps room for the 8-byte blank header.
END_FILE_MIN_BLANK: Final = 8

_BLANK = struct.Struct(">ii")
_Q = struct.Struct(">q")


class AppendStatus(enum.Enum):
    """Outcome of a raw append (``AppendMessageStatus``)."""

    PUT_OK = "PUT_OK"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"


class AppendResult(NamedTuple):
    """Where an append landed."""

    status: AppendStatus
    wrote_offset: int
    wrote_bytes: int


class CommitLog:
    """Segments of records. Not thread-safe: the store calls it under its put lock.

    Args:
        directory: ``<store>/commitlog``.
        file_size: Segment size.
        page_ahead: Bytes past the write position to keep in the page cache
            (:mod:`rocklet.store._page_ahead`; its thread is started by the store).
    """

    def __init__(self, directory: Path, file_size: int, page_ahead: int = 0) -> None:
        self.files = MappedFileQueue(directory, file_size)
        self.file_size = file_size
        self.page_ahead = PageAhead(self.files, page_ahead)
        #: Store time of the newest appended record (the checkpoint's physic time).
        self.last_store_timestamp = 0
        #: Records from here on were checked by recovery or written by this process;
        #: reads check the header of records below it (:mod:`rocklet.store._reader`).
        self.verified_from = 0
        #: Records reads skipped since the start because they were not the record
        #: their consume-queue entry names (damage recovery did not scan).
        self.damaged_reads = 0

    def load(self) -> None:
        """Map the existing segments (positions are set by recovery)."""
        self.files.load()

    def min_offset(self) -> int:
        """First offset still stored."""
        return self.files.min_offset()

    def max_offset(self) -> int:
        """Offset of the next append."""
        return self.files.max_offset()

    def append(
        self,
        buf: bytearray,
        starts: Sequence[int],
        first_queue_offset: int,
        queue_offset_step: int,
        store_timestamp: int,
    ) -> AppendResult:
        """Append encoded records in one copy, patching offsets and store time first.

        Args:
            buf: One or more encoded records back to back (patched in place).
            starts: Position of each record in ``buf``.
            first_queue_offset: Queue offset of the first record.
            queue_offset_step: 1 for consecutive offsets, 0 for transaction
                prepared/rollback records (RocketMQ gives them queue offset 0).
            store_timestamp: Store time for every record.

        Returns:
            The append result; MESSAGE_SIZE_EXCEEDED if ``buf`` cannot fit a segment.
        """
        size = len(buf)
        phy = self.append_offset(size)
        if phy is None:
            return AppendResult(AppendStatus.MESSAGE_SIZE_EXCEEDED, 0, 0)
        pack = _Q.pack_into
        qoff = first_queue_offset
        for start in starts:
            pack(buf, start + QUEUE_OFFSET_POS, qoff)
            pack(buf, start + PHYSICAL_OFFSET_POS, phy + start)
            pack(buf, start + STORE_TIMESTAMP_POS, store_timestamp)
            qoff += queue_offset_step
        self.write(buf, store_timestamp)
        return AppendResult(AppendStatus.PUT_OK, phy, size)

    def append_offset(
        self, size: int, before_new_segment: Callable[[], None] | None = None
    ) -> int | None:
        """Where ``size`` bytes will be appended, rolling to a new segment if needed.

        When they do not fit the current segment, its blank filler is written and the
        next segment created, so the bytes go at the returned offset. The put path
        encodes records for :meth:`max_offset` first and re-encodes for the returned
        offset only when they differ (once per segment).

        Args:
            size: Bytes about to be appended with :meth:`write`.
            before_new_segment: Called before a segment is created (the store measures
                the disk there); what it raises propagates, with nothing written.

        Returns:
            The offset, or None if ``size`` cannot fit any segment.

        Raises:
            NoSpaceError: A new segment is needed and the disk has no room for it;
                nothing was written (the current segment is not sealed).
        """
        if size + END_FILE_MIN_BLANK > self.file_size:
            return None
        files = self.files.files
        mf = files[-1] if files else None
        if mf is not None and size + END_FILE_MIN_BLANK <= mf.size - mf.wrote_position:
            return mf.from_offset + mf.wrote_position  # the usual case: it fits
        if before_new_segment is not None:
            before_new_segment()
        if mf is None:
            return self.files.create_file(0).wrote_offset
        # The next segment first: if it cannot be created the current one stays open,
        # so a failed roll leaves the commitlog exactly as it was.
        new = self.files.create_file(mf.end_offset)
        if mf.free:
            self._write_blank(mf)
        return new.wrote_offset

    def write(self, data: bytes | bytearray, store_timestamp: int) -> None:
        """Append records at the offset :meth:`append_offset` returned for their size.

        Args:
            data: Encoded records, offsets and store time already filled in.
            store_timestamp: Their store time (the checkpoint's physic time).
        """
        mf = self.files.files[-1]
        mf.append(data)
        self.last_store_timestamp = store_timestamp
        self.page_ahead.after_append(len(data), mf.from_offset + mf.wrote_position)

    @staticmethod
    def _write_blank(mf: MappedFile) -> None:
        # The blank's TOTALSIZE is everything left, so a reader jumps to the next file.
        free = mf.free
        mf.write_at(mf.wrote_position, _BLANK.pack(free, BLANK_MAGIC))
        mf.wrote_position = mf.size

    def read(self, offset: int, size: int) -> memoryview | None:
        """Zero-copy view of ``size`` bytes at ``offset``. Any thread under the store lock.

        Args:
            offset: Commitlog offset.
            size: Bytes wanted (must not cross a segment end).

        Returns:
            A slice of the mapped segment, or None if not (or no longer) stored.
        """
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.from_offset
        if pos + size > mf.wrote_position:
            return None
        return mf.view[pos : pos + size]

    def record_size_at(self, offset: int) -> int:
        """TOTALSIZE of the record at ``offset``, or 0 if no record (message magic) is there.

        Args:
            offset: Commitlog offset.

        Returns:
            The size, or 0.
        """
        head = self.read(offset, 8)
        if head is None:
            return 0
        size, magic = _BLANK.unpack(head)
        return size if magic == MESSAGE_MAGIC and size > 0 else 0

    def roll_next_file(self, offset: int) -> int:
        """Start of the segment after the one holding ``offset`` (``rollNextFile``).

        Args:
            offset: Any commitlog offset.

        Returns:
            The next segment's start offset.
        """
        return offset + self.file_size - offset % self.file_size

    def flush(self) -> int:
        """Fdatasync every segment with unflushed bytes. Flush thread.

        Returns:
            Segments synced.
        """
        return self.files.flush()

    def close(self) -> None:
        """Release the maps."""
        self.files.close()
