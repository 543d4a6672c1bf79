"""Reads by queue (``DefaultMessageStore.getMessage``) and by store time.

Recovery scans only the newest segments after a clean stop, so damage in an older
one can reach a read. A record below :attr:`CommitLog.verified_from` is therefore
checked to be the entry's before it is served (magic, size, queue id and queue offset
at its start; ~0.6 µs, so not for the verified segments most reads hit). One that
fails is skipped like a blank entry and logged, never served (RocketMQ sends the bytes).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Set

import structlog

from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.message import MESSAGE_MAGIC, decode_message
from rocklet.store._commitlog import CommitLog
from rocklet.store._consume_queue import BLANK_ENTRY_SIZE, ENTRY, ENTRY_SIZE, ConsumeQueue
from rocklet.store.results import GetMessageStatus, GetResult

__all__ = ["earliest_store_time", "get_messages", "offset_for_time"]

log = structlog.get_logger(__name__)

_STORE_TS = struct.Struct(">q")
_PHY = struct.Struct(">q")
_HEAD = struct.Struct(">ii4xi4xq")  # size, magic, queue id, queue offset
#: RocketMQ scans at most max(16000, maxMsgNums * 20) entries looking for matches.
_MIN_FILTER_SCAN = 16000


def _empty(status: GetMessageStatus, nxt: int, lo: int, hi: int) -> GetResult:
    return GetResult(status, [], [], nxt, lo, hi)


def get_messages(
    cq: ConsumeQueue | None,
    commitlog: CommitLog,
    offset: int,
    max_count: int,
    max_bytes: int,
    tag_codes: Set[int] | None,
    record_filter: Callable[[memoryview], bool] | None = None,
) -> GetResult:
    """Read up to ``max_count`` records of one queue from ``offset``.

    ``next_begin_offset`` follows ``getMessage``: offset plus entries scanned (filtered
    ones included) when reading, min offset when too small, the offset itself when
    caught up, and max offset (0 if the queue's min is 0) when past the end.

    Args:
        cq: The queue, or None if it does not exist.
        commitlog: The commitlog.
        offset: First queue offset wanted.
        max_count: Most records.
        max_bytes: Most bytes (the first record always fits).
        tag_codes: Tags codes to accept, or None for all.
        record_filter: Called with each whole record that passed ``tag_codes``; a
            record it returns False for is skipped like a filtered entry (the SQL92
            property filter, ``isMatchedByCommitLog``).

    Returns:
        The result (views into the mapped commitlog).
    """
    if cq is None:
        return _empty(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
    lo, hi = cq.min_offset(), cq.max_offset()
    if hi == 0:
        return _empty(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, lo, hi)
    if offset < lo:
        return _empty(GetMessageStatus.OFFSET_TOO_SMALL, lo, lo, hi)
    if offset == hi:
        return _empty(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, lo, hi)
    if offset > hi:
        return _empty(GetMessageStatus.OFFSET_OVERFLOW_BADLY, 0 if lo == 0 else hi, lo, hi)
    block = cq.entries(offset)
    if block is None:
        return _empty(GetMessageStatus.OFFSET_FOUND_NULL, cq.roll_next_file(offset), lo, hi)
    buffers: list[memoryview] = []
    total = 0
    if tag_codes is None and record_filter is None:
        count = max(1, min(max_count, len(block) // ENTRY_SIZE))
        total, done = _read_run(block, count, max_bytes, commitlog, buffers, cq.queue_id, offset)
        if done:
            n = len(buffers)
            return GetResult(
                GetMessageStatus.FOUND, buffers, list(range(offset, offset + n)), offset + n, lo, hi
            )
    # Blanks, tag filters, segment changes or removed records: entry by entry.
    scanned = len(buffers)
    offsets = list(range(offset, offset + scanned))
    scan_limit = max(_MIN_FILTER_SCAN, max_count * 20) * ENTRY_SIZE
    missing = False
    # The segment of the previous record: consecutive records of a queue almost always
    # share one. Bounds no offset satisfies make the first record look its segment up.
    seg_from, seg_end, seg_view = 1 << 62, 0, block
    find = commitlog.files.find
    head = _HEAD.unpack_from
    verified = commitlog.verified_from
    for phy, size, tags in ENTRY.iter_unpack(block[scanned * ENTRY_SIZE : scan_limit]):
        if buffers and (len(buffers) >= max_count or total + size > max_bytes):
            break
        scanned += 1
        if size == BLANK_ENTRY_SIZE or (tag_codes is not None and tags not in tag_codes):
            continue
        if phy < seg_from or phy + size > seg_end:
            mf = find(phy)
            if mf is None or phy - mf.from_offset + size > mf.wrote_position:
                missing = True  # retention removed it (matters only if nothing is found)
                continue
            seg_from, seg_view = mf.from_offset, mf.view
            seg_end = seg_from + mf.wrote_position
        pos = phy - seg_from
        if phy < verified and head(seg_view, pos) != (
            size,
            MESSAGE_MAGIC,
            cq.queue_id,
            offset + scanned - 1,
        ):
            _skip_damaged(cq, offset + scanned - 1, phy)
            commitlog.damaged_reads += 1
            continue
        record = seg_view[pos : pos + size]
        if record_filter is not None and not record_filter(record):
            continue
        buffers.append(record)
        offsets.append(offset + scanned - 1)
        total += size
    if buffers:
        status = GetMessageStatus.FOUND
    elif missing:
        status = GetMessageStatus.MESSAGE_WAS_REMOVING
    else:
        status = GetMessageStatus.NO_MATCHED_MESSAGE
    return GetResult(status, buffers, offsets, offset + scanned, lo, hi)


def _skip_damaged(cq: ConsumeQueue, index: int, phy: int) -> None:
    log.warning(
        "damaged record skipped by a read",
        topic=cq.topic,
        queue=cq.queue_id,
        queue_offset=index,
        commitlog_offset=phy,
    )


def _read_run(
    block: memoryview,
    count: int,
    max_bytes: int,
    commitlog: CommitLog,
    out: list[memoryview],
    queue_id: int,
    first: int,
) -> tuple[int, bool]:
    """Views of the first ``count`` entries' records while they are plain and live.

    The unfiltered read's fast path: stops at the first entry that is a blank, lies
    outside the first record's segment or past its written end, or is not the record
    the entry names (the caller goes on entry by entry), or would pass ``max_bytes``
    (the read is complete).

    Returns:
        (bytes read, whether the read is complete).
    """
    mf = commitlog.files.find(_PHY.unpack_from(block)[0])
    if mf is None:
        return 0, False
    # Capped below a blank entry's size (0x7FFFFFFF), so the bounds check below rejects
    # blanks too; a record ending past the cap just takes the entry-by-entry path.
    base, limit, view = mf.from_offset, min(mf.wrote_position, BLANK_ENTRY_SIZE - 1), mf.view
    total = 0
    append = out.append
    if base < commitlog.verified_from and not _entries_match(
        block, count, view, base, queue_id, first
    ):
        return 0, False
    for phy, size, _tags in ENTRY.iter_unpack(block[: count * ENTRY_SIZE]):
        pos = phy - base
        if pos < 0 or pos + size > limit:
            return total, False
        if out and total + size > max_bytes:
            return total, True
        append(view[pos : pos + size])
        total += size
    return total, True


def _entries_match(
    block: memoryview, count: int, view: memoryview, base: int, queue_id: int, first: int
) -> bool:
    """Whether each of the first ``count`` entries names the record at its offset.

    Entries outside ``view`` (another segment) fail here; the caller's entry-by-entry
    path sorts those out.
    """
    head = _HEAD.unpack_from
    size_limit = len(view)
    for n, (phy, size, _tags) in enumerate(ENTRY.iter_unpack(block[: count * ENTRY_SIZE])):
        pos = phy - base
        if not 0 <= pos <= size_limit - _HEAD.size:
            return False
        if head(view, pos) != (size, MESSAGE_MAGIC, queue_id, first + n):
            return False
    return True


def _store_time(cq: ConsumeQueue, commitlog: CommitLog, index: int) -> int | None:
    entry = cq.entry(index)
    if entry is None:
        return None
    view = commitlog.read(entry[0] + 56, 8)
    if view is None:
        return None
    ts: int = _STORE_TS.unpack(view)[0]
    return ts


def offset_for_time(cq: ConsumeQueue, commitlog: CommitLog, timestamp_ms: int) -> int:
    """First queue offset whose store time is ≥ ``timestamp_ms`` (binary search).

    Args:
        cq: The queue.
        commitlog: The commitlog.
        timestamp_ms: A store time.

    Returns:
        That offset, or the max offset if every record is older.
    """
    lo, hi = cq.min_offset(), cq.max_offset()
    while lo < hi:
        mid = (lo + hi) // 2
        ts = _store_time(cq, commitlog, mid)
        if ts is None or ts < timestamp_ms:
            lo = mid + 1
        else:
            hi = mid
    return lo


def earliest_store_time(cq: ConsumeQueue, commitlog: CommitLog) -> int:
    """Store time of the queue's first live record (-1 if none).

    Args:
        cq: The queue.
        commitlog: The commitlog.

    Returns:
        Store time in ms, or -1.
    """
    ts = _store_time(cq, commitlog, cq.min_offset())
    return -1 if ts is None else ts


def matching_records(
    commitlog: CommitLog,
    candidates: Iterable[int],
    topic: str,
    key: str,
    max_num: int,
    begin_ms: int,
    end_ms: int,
) -> list[memoryview]:
    """The records among index hits that really have ``key`` (hashes collide).

    ``candidates`` are the commitlog offsets the index gave, newest first; the other
    arguments are :meth:`~rocklet.store.message_store.MessageStore.query_by_key`'s.

    Returns:
        Views of the first ``max_num`` matches, in commitlog order.
    """
    out: list[tuple[int, memoryview]] = []
    for phy in candidates:
        size = commitlog.record_size_at(phy)
        view = commitlog.read(phy, size) if size else None
        if view is None:
            continue
        try:
            msg = decode_message(view)
        except MessageFormatError:
            continue  # damaged bytes an index entry still points at
        if (
            msg.topic == topic
            and begin_ms <= msg.store_timestamp <= end_ms
            and (key in msg.keys or msg.uniq_key == key)
        ):
            out.append((phy, view))
            if len(out) >= max_num:
                break
    out.sort(key=lambda hit: hit[0])
    return [view for _, view in out]
