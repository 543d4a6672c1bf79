"""Store check, commitlog: segment files, and every record in them, by recovery's rules.

Each record must be whole (magic, lengths that add up to its size, body CRC) and name
its own offset; a sealed segment ends with the blank whose size is the rest of it; a
queue's offsets ascend. Bad bytes are classified as recovery does (the same resync,
:mod:`rocklet.store._damage`): damage between whole records, or a torn tail where
nothing whole follows in the segments that hold data.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import Final

from rocklet.protocol.message import MESSAGE_MAGIC, TRANSACTION_MASK
from rocklet.store._check_io import (
    PROBLEM,
    CheckContext,
    MapCache,
    data_end,
    sized_files,
    wrong_size,
)
from rocklet.store._check_queues import QueueFiles
from rocklet.store._damage import describe_invalid, is_segment_end, resync
from rocklet.store._dispatch_request import DispatchRequest, check_record
from rocklet.store._encoder import NOT_IN_QUEUE

__all__ = ["check_commitlog"]

_AREA: Final = "commitlog"
_MAGIC: Final = struct.pack(">i", MESSAGE_MAGIC)


def _segments(ctx: CheckContext) -> list[tuple[int, Path]]:
    directory = ctx.config.commitlog_dir
    if not directory.is_dir():
        return []
    size = ctx.config.commitlog_file_size_bytes
    out: list[tuple[int, Path]] = []
    for path, actual in sized_files(ctx, directory, _AREA, 20):
        base = int(path.name)
        if actual != size:
            why = f"segments are {size} (mappedFileSizeCommitLog): a broker refuses to start"
            wrong_size(ctx, _AREA, path, base, actual, why)
            continue
        if out and base != out[-1][0] + size:
            gap = out[-1][0] + size
            ctx.add(
                PROBLEM,
                _AREA,
                directory / f"{gap:020d}",
                gap,
                f"missing (offsets {gap} to {base - 1}): a broker refuses to start",
            )
        out.append((base, path))
    return out


def _holds_records(path: Path) -> bool:
    # Mapped apart from the cache: the segment being walked must stay mapped.
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as mm:
            return mm.find(_MAGIC) >= 0
    finally:
        os.close(fd)


def check_commitlog(ctx: CheckContext, maps: MapCache, queues: QueueFiles) -> None:
    """Walk every commitlog record; check each queued record's consume-queue entry.

    Args:
        ctx: The check; gets the segments, the log's range, damage and figures.
        maps: Read-only maps of commitlog segments.
        queues: The consume queues, for each record's entry.
    """
    segments = _segments(ctx)
    ctx.segments = dict(segments)
    ctx.count("segments", len(segments))
    if not segments:
        return
    live = ctx.live
    ctx.commitlog_min = segments[0][0] if live is None else live.commitlog_min
    ctx.commitlog_end = segments[0][0]
    last_offsets: dict[tuple[str, int], int] = {}
    for i, (base, path) in enumerate(segments):
        limit = ctx.config.commitlog_file_size_bytes
        if live is not None:
            limit = min(limit, live.commitlog_end - base)
            if limit <= 0:
                break
        mapped = maps.get(path)
        if mapped is None:
            continue
        later = [p for _b, p in segments[i + 1 :]]
        if _walk_segment(ctx, path, base, mapped, limit, later, queues, last_offsets):
            break


def _walk_segment(
    ctx: CheckContext,
    path: Path,
    base: int,
    mapped: tuple[mmap.mmap, memoryview],
    limit: int,
    later: list[Path],
    queues: QueueFiles,
    last_offsets: dict[tuple[str, int], int],
) -> bool:
    """Walk one segment; True when the log's data ends in it."""
    mm, view = mapped
    levels = ctx.config.delay_levels_ms
    pos = 0
    while pos < limit:
        req = check_record(view, pos, check_crc=True, delay_levels_ms=levels)
        if isinstance(req, DispatchRequest) and req.commitlog_offset == base + pos:
            _record(ctx, path, req, queues, last_offsets)
            pos += req.size
            ctx.commitlog_end = base + pos
            continue
        if is_segment_end(view, pos):
            ctx.commitlog_end = base + len(view)
            return False
        # Where nothing later holds records, only bytes that hold data can hide one;
        # a live store's bytes below its write position must all be records.
        tail = ctx.live is None and not any(_holds_records(p) for p in later)
        stop = data_end(view, pos) if tail else limit
        found = resync(view, mm.find, base, pos, stop, check_crc=True) if stop > pos else None
        if found is None and tail:
            if stop > pos:
                ctx.count("torn_tail_bytes", stop - pos)
                ctx.add(
                    ctx.repairable(),
                    _AREA,
                    path,
                    base + pos,
                    f"torn tail: {stop - pos} bytes after the last whole record "
                    f"({describe_invalid(view, pos, base)}); a start cuts them off",
                )
            return True
        end = limit if found is None else found
        ctx.damaged.append((base + pos, base + end))
        ctx.count("damaged_ranges")
        ctx.count("damaged_bytes", end - pos)
        ctx.add(
            PROBLEM,
            _AREA,
            path,
            base + pos,
            f"{end - pos} damaged bytes ({describe_invalid(view, pos, base)}): a Rocklet start "
            "skips them and keeps the records after them; what they held is lost (RocketMQ "
            "4.x cuts its commitlog there instead, dropping every later record)",
        )
        if found is None:
            return False
        pos = found
    return False


def _record(
    ctx: CheckContext,
    path: Path,
    req: DispatchRequest,
    queues: QueueFiles,
    last_offsets: dict[tuple[str, int], int],
) -> None:
    ctx.count("records")
    ctx.count("record_bytes", req.size)
    ctx.newest_store_ts = max(ctx.newest_store_ts, req.store_timestamp)
    if req.sys_flag & TRANSACTION_MASK in NOT_IN_QUEUE:
        return  # half and rolled-back transaction records have no queue offset
    if queues.of_dropped_queue(req):
        return  # (a queue made again since numbers from 0 again)
    key = (req.topic, req.queue_id)
    previous = last_offsets.get(key)
    if previous is not None and req.queue_offset <= previous:
        ctx.add(
            PROBLEM,
            _AREA,
            path,
            req.commitlog_offset,
            f"queue {req.topic}/{req.queue_id} offset {req.queue_offset} after offset "
            f"{previous}: queue offsets must ascend",
        )
    last_offsets[key] = req.queue_offset
    queues.check_record_entry(req)
