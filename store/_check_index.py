"""Store check, index files: header, hash slots, and each entry against its record.

An entry must point at a whole record whose ``topic#key`` (a key of KEYS or the
UNIQ_KEY) hashes to the entry's hash, chain to an earlier entry, and have a time
after the file's begin time; every slot must name an entry that exists. A file of the
wrong size is skipped by a broker (its keys are not found), so it is reported.
"""

from __future__ import annotations

import array
import struct
import sys
from pathlib import Path
from typing import Final

from rocklet.store._check_io import PROBLEM, CheckContext, MapCache, sized_files, wrong_size
from rocklet.store._dispatch_request import DispatchRequest, check_record
from rocklet.store._hashing import index_key_hash
from rocklet.store._index_file import HEADER_SIZE, INDEX_ENTRY_SIZE

__all__ = ["check_index"]

_AREA: Final = "index"
_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")


def check_index(ctx: CheckContext, maps: MapCache, log_maps: MapCache) -> None:
    """Check every index file.

    Args:
        ctx: The check (the commitlog walk has run).
        maps: Read-only maps of index files.
        log_maps: Read-only maps of commitlog segments.
    """
    directory = ctx.root / "index"
    if not directory.is_dir():
        return
    cfg = ctx.config
    size = HEADER_SIZE + cfg.index_hash_slots * 4 + cfg.index_max_entries * INDEX_ENTRY_SIZE
    # The file being written when the check started: its header and slots move on.
    newest = max(ctx.live.index_counts, default="") if ctx.live is not None else ""
    for path, actual in sized_files(ctx, directory, _AREA, 17):
        if actual != size:
            why = f"index files are {size} (maxHashSlotNum, maxIndexNum): a broker ignores "
            wrong_size(ctx, _AREA, path, None, actual, why + "it and its keys are not found")
            continue
        if ctx.live is not None and path.name not in ctx.live.index_counts:
            continue  # created after the check started: it indexes newer records
        mapped = maps.get(path)
        if mapped is not None:
            ctx.count("index_files")
            _check_file(ctx, path, mapped[1], log_maps, newest=path.name == newest)


def _check_file(
    ctx: CheckContext, path: Path, view: memoryview, log_maps: MapCache, *, newest: bool
) -> None:
    cfg = ctx.config
    begin_ts, end_ts, begin_phy, end_phy, slot_count, count = _HEADER.unpack_from(view, 0)
    live = ctx.live
    if live is not None:
        count = live.index_counts.get(path.name, count)
    header_fixed = not newest
    if not 1 <= count <= cfg.index_max_entries or not 0 <= slot_count <= cfg.index_hash_slots:
        message = f"header counts out of range: {count} entries, {slot_count} slots"
        ctx.add(PROBLEM, _AREA, path, None, message + " (the file is rebuilt at start)")
        return
    if header_fixed and not (0 <= begin_phy <= end_phy and 0 <= begin_ts <= end_ts):
        message = f"header says offsets {begin_phy}-{end_phy}, times {begin_ts}-{end_ts}"
        ctx.add(PROBLEM, _AREA, path, None, message + " (the file is rebuilt at start)")
    elif header_fixed and end_phy > ctx.commitlog_end:
        message = f"indexes records up to {end_phy}, past the commitlog's end {ctx.commitlog_end}"
        ctx.add(ctx.repairable(), _AREA, path, None, message + " (rebuilt at start)")
    slots = array.array("i")
    slots.frombytes(view[HEADER_SIZE : HEADER_SIZE + cfg.index_hash_slots * 4])
    if sys.byteorder == "little":
        slots.byteswap()
    if slots and (min(slots) < 0 or max(slots) >= count) and header_fixed:
        ctx.add(PROBLEM, _AREA, path, None, "a hash slot names an entry the file does not have")
    _check_entries(ctx, path, view, count, log_maps)


def _check_entries(
    ctx: CheckContext, path: Path, view: memoryview, count: int, log_maps: MapCache
) -> None:
    at = HEADER_SIZE + ctx.config.index_hash_slots * 4
    cached_phy, cached_keys = -1, frozenset[int]()
    reported = 0
    past_end = None
    for n in range(1, count):
        key_hash, phy, diff, prev = _ENTRY.unpack_from(view, at + n * INDEX_ENTRY_SIZE)
        ctx.count("index_entries")
        problem = None
        if not 0 <= prev < n or diff < 0:
            problem = f"entry {n} chains to entry {prev} or has time {diff} s before the begin"
        elif phy >= ctx.commitlog_end and past_end is None:
            past_end = n
        elif phy < 0 or phy >= ctx.commitlog_end:
            pass  # reported once, below
        elif any(start <= phy < stop for start, stop in ctx.damaged):
            ctx.count("index_entries_damaged")  # queries compare the record: never served
        elif phy >= ctx.commitlog_min:
            if phy != cached_phy:
                cached_phy, cached_keys = phy, _key_hashes(ctx, log_maps, phy)
            if key_hash not in cached_keys:
                problem = (
                    f"entry {n} points at {phy}, which is not a whole record with a key of "
                    f"hash {key_hash}"
                )
        if problem is not None:
            reported += 1
            if reported <= 10:  # a garbage file would list every entry
                ctx.add(PROBLEM, _AREA, path, n, problem)
            ctx.count("index_entries_bad")
    if past_end is not None:
        message = f"entries from here on point past the commitlog's end ({ctx.commitlog_end})"
        ctx.add(ctx.repairable(), _AREA, path, past_end, message + ": the file is rebuilt at start")


def _key_hashes(ctx: CheckContext, log_maps: MapCache, phy: int) -> frozenset[int]:
    """Index hashes of the keys of the record at ``phy`` (empty if there is none)."""
    seg_size = ctx.config.commitlog_file_size_bytes
    base = phy - phy % seg_size
    segment = ctx.segments.get(base)
    mapped = log_maps.get(segment) if segment is not None else None
    if mapped is None:
        return frozenset()  # missing segment: reported with the commitlog
    req = check_record(mapped[1], phy - base, check_crc=False)
    if not isinstance(req, DispatchRequest) or req.commitlog_offset != phy:
        return frozenset()
    keys = [*req.keys.split(), req.uniq_key]
    return frozenset(index_key_hash(f"{req.topic}#{k}") for k in keys if k)
