"""Damaged commitlog bytes: telling them from a torn tail, and finding the next record.

RocketMQ's recovery stops at the first record that does not check and truncates the
log there. That is right for a torn tail (the last write of a crashed process), and
wrong for damage in the middle of the log: every record after it would be deleted,
although each is still whole and consume queues address it by its exact offset.

So a bad record starts a *resync*: the next position after it where a whole record
stands, proven by its magic, field lengths, body CRC and a PHYSICALOFFSET equal to its
own offset (a record copied into a body cannot pass that unless it names exactly the
position it was copied to), or the end-of-segment blank whose size is exactly the rest
of the segment. The bytes in between are a :class:`DamagedRange`: skipped, reported,
never served, never truncated. Only when nothing whole follows in the last segment is
the bad record the torn tail, cut off as before.

Used by recovery (:mod:`rocklet.store._recovery`) and by the store check
(:mod:`rocklet.store.check`), on mapped segments either writable or read-only.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from rocklet.protocol.message import BLANK_MAGIC, MESSAGE_MAGIC, RECORD_OVERHEAD
from rocklet.store._dispatch_request import DispatchRequest, check_record

__all__ = ["DamagedRange", "describe_invalid", "is_segment_end", "resync", "valid_record"]

_SIZE_MAGIC = struct.Struct(">ii")
_MESSAGE_MAGIC_BYTES: Final = struct.pack(">i", MESSAGE_MAGIC)
_BLANK_MAGIC_BYTES: Final = struct.pack(">i", BLANK_MAGIC)

#: ``find(sub, start, end) -> position or -1`` over a segment (``mmap.find``).
Finder = Callable[[bytes, int, int], int]


@dataclass(frozen=True, slots=True)
class DamagedRange:
    """Commitlog bytes that hold no readable record, between two that check.

    Attributes:
        offset: Commitlog offset of the first damaged byte.
        length: Bytes skipped.
        reason: What was wrong at ``offset`` (for the report and the log).
    """

    offset: int
    length: int
    reason: str

    @property
    def end(self) -> int:
        """Offset just past the damaged bytes."""
        return self.offset + self.length


def valid_record(view: memoryview, pos: int, base: int, *, check_crc: bool) -> int:
    """Size of the whole record at ``pos`` whose PHYSICALOFFSET is ``base + pos``, or 0.

    Args:
        view: The segment.
        pos: Position in it.
        base: The segment's first commitlog offset.
        check_crc: Verify the body CRC.

    Returns:
        The record's TOTALSIZE, or 0 if there is no such record at ``pos``.
    """
    req = check_record(view, pos, check_crc=check_crc)
    if isinstance(req, DispatchRequest) and req.commitlog_offset == base + pos:
        return req.size
    return 0


def is_segment_end(view: memoryview, pos: int) -> bool:
    """Whether ``pos`` holds the end-of-segment blank (its size exactly the rest).

    Fewer than 8 bytes left count too: a writer always leaves room for the blank, so
    that can only be the very end.
    """
    if pos + 8 > len(view):
        return True
    size: int
    magic: int
    size, magic = _SIZE_MAGIC.unpack_from(view, pos)
    return magic == BLANK_MAGIC and size == len(view) - pos


def resync(
    view: memoryview, find: Finder, base: int, start: int, limit: int, *, check_crc: bool
) -> int | None:
    """The first position after ``start`` where a whole record or the segment end stands.

    Args:
        view: The segment.
        find: Byte search over the same segment.
        base: The segment's first commitlog offset.
        start: Position of the bad record.
        limit: Search only candidates that start before this position.
        check_crc: Verify candidates' body CRCs (recovery always does here).

    Returns:
        The position, or None if nothing whole starts in ``(start, limit)``.
    """
    # A candidate's magic sits 4 bytes after its start.
    lo, hi = start + 1 + 4, min(limit + 4, len(view))
    while lo < hi:
        rec = find(_MESSAGE_MAGIC_BYTES, lo, hi)
        blank = find(_BLANK_MAGIC_BYTES, lo, hi if rec < 0 else rec)
        at = blank if blank >= 0 else rec
        if at < 0:
            return None
        pos = at - 4
        if at == blank:
            if is_segment_end(view, pos):
                return pos
        elif valid_record(view, pos, base, check_crc=check_crc):
            return pos
        lo = at + 1
    return None


def describe_invalid(view: memoryview, pos: int, base: int) -> str:
    """What is wrong with the bytes at ``pos`` where a record should start.

    Args:
        view: The segment.
        pos: Position in it.
        base: The segment's first commitlog offset.

    Returns:
        A short reason for a report.
    """
    if pos + 8 > len(view):
        return "a record cut off by the segment end"
    size, magic = _SIZE_MAGIC.unpack_from(view, pos)
    if size == 0 and magic == 0:
        return "zeros where a record or the end-of-segment blank should be"
    if magic == BLANK_MAGIC:
        return f"an end-of-segment blank of {size} bytes where {len(view) - pos} remain"
    if magic != MESSAGE_MAGIC:
        return f"bad magic {magic & 0xFFFFFFFF:#010x}"
    if size < RECORD_OVERHEAD or pos + size > len(view):
        return f"bad record size {size}"
    req = check_record(view, pos, check_crc=False)
    if not isinstance(req, DispatchRequest):
        return "record fields do not add up to its size"
    if req.commitlog_offset != base + pos:
        return f"PHYSICALOFFSET says {req.commitlog_offset}"
    if not isinstance(check_record(view, pos, check_crc=True), DispatchRequest):
        return "body CRC mismatch"
    return "unreadable record"
