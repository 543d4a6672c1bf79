"""One hash index file: keys (``topic#key``) to commitlog offsets, chained per slot.

Layout: ``index/<yyyyMMddHHmmssSSS>`` (creation time), ``40 + slots*4 + entries*20``
bytes, big-endian:

    ===================  ====  ===================================================
    offset               size  field
    ===================  ====  ===================================================
    0                    8     beginTimestamp: store time of the first entry
    8                    8     endTimestamp: store time of the last entry
    16                   8     beginPhyOffset
    24                   8     endPhyOffset
    32                   4     hashSlotCount: slots in use
    36                   4     indexCount: next entry number (starts at 1)
    40 + 4*s             4     slot s: newest entry number of its chain, 0 = empty
    40 + 4*S + 20*n      4     entry n: keyHash = abs(Java hashCode("topic#key"))
    ... + 4              8     entry n: commitlog offset
    ... + 12             4     entry n: (storeTimestamp - beginTimestamp) // 1000
    ... + 16             4     entry n: previous entry of the same slot, 0 = end
    ===================  ====  ===================================================
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from rocklet.protocol import compiled
from rocklet.store._files import allocate_file, install_file
from rocklet.store._mapped_file import MappedFile

__all__ = ["HEADER_SIZE", "INDEX_ENTRY_SIZE", "IndexFile", "key_hash"]

HEADER_SIZE: Final = 40
INDEX_ENTRY_SIZE: Final = 20
_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_SLOT = struct.Struct(">i")
_INT_MAX: Final = 0x7FFFFFFF
#: Bytes of a new file's slot table faulted in per put (~0.3 ms on the loop).
_SLOTS_STEP: Final = 256 * 1024
# The compiled twin of put_keys' loop (None: the Python loop serves).
_speedups = compiled.load("rocklet.store._speedups")


def key_hash(java_hash: int) -> int:
    """Index key hash: ``Math.abs(hashCode)``, 0 when abs overflows (``indexKeyHashMethod``).

    Args:
        java_hash: Java ``String.hashCode()`` of ``topic#key``.

    Returns:
        A non-negative int32.
    """
    h = abs(java_hash)
    return 0 if h > _INT_MAX else h


class IndexFile:
    """One index file. Writer: the dispatching thread under the store lock.

    Args:
        path: File path (created if missing).
        slots: Hash slots.
        max_entries: Entry capacity, counting the unused entry 0.
        begin_phy: Initial begin/end commitlog offset of a new file.
        begin_ts: Initial begin/end time of a new file.
        reserved: A new file's blocks, reserved ahead with
            :func:`~rocklet.store._files.reserve_file`: renamed to ``path``
            instead of allocating (which can fail for want of room).
    """

    def __init__(
        self,
        path: Path,
        slots: int,
        max_entries: int,
        begin_phy: int = 0,
        begin_ts: int = 0,
        *,
        reserved: Path | None = None,
    ) -> None:
        existed = reserved is None and path.exists()
        self.slots = slots
        self.max_entries = max_entries
        size = HEADER_SIZE + slots * 4 + max_entries * INDEX_ENTRY_SIZE
        if reserved is not None:
            install_file(reserved, path)
        elif not existed:
            allocate_file(path, size)
        self.file = MappedFile(path, size, 0, read_around=False)  # slot and entry reads
        self._entries_at = HEADER_SIZE + slots * 4
        self.begin_ts: int
        self.end_ts: int
        self.begin_phy: int
        self.end_phy: int
        self.slot_count: int
        self.index_count: int
        if existed:
            (
                self.begin_ts,
                self.end_ts,
                self.begin_phy,
                self.end_phy,
                self.slot_count,
                self.index_count,
            ) = _HEADER.unpack_from(self.file.view, 0)
            self.file.wrote_position = self.file.flushed_position = self.file.size
            self._slots_ready = self._entries_at
        else:
            self.begin_ts = self.end_ts = begin_ts
            self.begin_phy = self.end_phy = begin_phy
            self.slot_count = 0
            self.index_count = 1
            # Keys land on random slots, so the whole slot table (20 MB by default) is
            # touched within a few hundred thousand keys: fault it in ahead (~3 µs a
            # page in one call) rather than one fault per page on the put path (~7-23
            # µs each on a VM). A piece per put, not all at once: the call holds the
            # event loop and the GIL, and the whole table took 21 ms.
            self._slots_ready = 0
            self._populate_slots()
            self._write_header()

    def _populate_slots(self) -> None:
        """Fault in the next piece of a new file's slot table (one piece per put)."""
        start = self._slots_ready
        self._slots_ready = min(self._entries_at, start + _SLOTS_STEP)
        self.file.populate(start, self._slots_ready - start)

    @property
    def path(self) -> Path:
        """The file's path."""
        return self.file.path

    @property
    def is_full(self) -> bool:
        """Whether no entry is left (``isWriteFull``)."""
        return self.index_count >= self.max_entries

    def _write_header(self) -> None:
        _HEADER.pack_into(
            self.file.view,
            0,
            self.begin_ts,
            self.end_ts,
            self.begin_phy,
            self.end_phy,
            self.slot_count,
            self.index_count,
        )
        self.file.mark_dirty()

    def put_key(self, hash_: int, phy_offset: int, store_ts: int) -> bool:
        """Add one key (``IndexFile.putKey``).

        Args:
            hash_: :func:`key_hash` of ``topic#key``.
            phy_offset: The record's commitlog offset.
            store_ts: The record's store time.

        Returns:
            False if the file is full.
        """
        return self.put_keys((hash_,), (phy_offset,), 0, store_ts) == 1

    def put_keys(
        self, hashes: Sequence[int], offsets: Sequence[int], start: int, store_ts: int
    ) -> int:
        """Add keys ``start..`` of one put, as many as fit (``putKey`` for each).

        The header is written once at the end rather than once per key.

        Args:
            hashes: :func:`key_hash` of each ``topic#key``.
            offsets: Commitlog offset of each key's record, ascending.
            start: First key to add.
            store_ts: Store time of every record.

        Returns:
            Keys added; fewer than asked (maybe 0) once the file is full.
        """
        n = self.index_count
        count = len(hashes) - start
        if count > self.max_entries - n:
            count = self.max_entries - n
        if count <= 0:
            return 0
        if n <= 1:
            self.begin_phy, self.begin_ts = offsets[start], store_ts
        # Clamped to [0, INT_MAX] with comparisons: min/max calls cost more per put.
        diff = (store_ts - self.begin_ts) // 1000 if self.begin_ts > 0 else 0
        if diff < 0:
            diff = 0
        elif diff > _INT_MAX:
            diff = _INT_MAX
        mf = self.file
        view = mf.view
        slots = self.slots
        read_slot, write_slot, write_entry = _SLOT.unpack_from, _SLOT.pack_into, _ENTRY.pack_into
        pos = self._entries_at + n * INDEX_ENTRY_SIZE
        if pos + count * INDEX_ENTRY_SIZE > mf.populated:  # else nothing to populate
            mf.populate_ahead(pos, pos + count * INDEX_ENTRY_SIZE)
        if self._slots_ready < self._entries_at:  # a new file's first few hundred puts
            self._populate_slots()
        if _speedups is not None:
            added = _speedups.put_index_keys(
                view, hashes, offsets, start, count, n, slots, HEADER_SIZE, pos, diff
            )
            if added is not None:  # _added, inlined: this runs for every put
                self.slot_count += added
                self.index_count += count
                self.end_phy, self.end_ts = offsets[start + count - 1], store_ts
                _HEADER.pack_into(
                    view, 0, self.begin_ts, store_ts, self.begin_phy, self.end_phy,
                    self.slot_count, self.index_count,
                )  # fmt: skip
                mf.wrote_position = mf.flushed_position + 1  # mark_dirty
                return count
        new_slots = 0
        for i in range(start, start + count):
            h = hashes[i]
            slot_pos = HEADER_SIZE + h % slots * 4
            (head,) = read_slot(view, slot_pos)
            if head <= 0 or head > n:
                head = 0  # empty slot, or garbage from a torn write: start a new chain
                new_slots += 1
            write_entry(view, pos, h, offsets[i], diff, head)
            write_slot(view, slot_pos, n)
            n += 1
            pos += INDEX_ENTRY_SIZE
        return self._added(count, new_slots, offsets[start + count - 1], store_ts)

    def _added(self, count: int, new_slots: int, end_phy: int, store_ts: int) -> int:
        self.slot_count += new_slots
        self.index_count += count
        self.end_phy, self.end_ts = end_phy, store_ts
        self._write_header()
        return count

    def select(self, hash_: int, begin_ms: int, end_ms: int, out: list[int], limit: int) -> None:
        """Append offsets of entries with ``hash_`` stored in [begin, end] (``selectPhyOffset``).

        Args:
            hash_: :func:`key_hash` of ``topic#key``.
            begin_ms: Earliest store time (entry times are whole seconds after the
                file's begin, so callers widen this by a second).
            end_ms: Latest store time.
            out: Receives commitlog offsets, newest first.
            limit: Stop once ``out`` has this many.
        """
        view = self.file.view
        (n,) = _SLOT.unpack_from(view, HEADER_SIZE + (hash_ % self.slots) * 4)
        seen = 0
        while 0 < n < self.index_count and len(out) < limit and seen < self.index_count:
            h, phy, diff, prev = _ENTRY.unpack_from(view, self._entries_at + n * INDEX_ENTRY_SIZE)
            if diff < 0:
                break
            when = self.begin_ts + diff * 1000
            if h == hash_ and begin_ms <= when <= end_ms:
                out.append(phy)
            if prev == n:
                break
            n = prev
            seen += 1

    def entry_offsets(self) -> list[tuple[int, int]]:
        """Every used entry's (commitlog offset, previous entry), for validation.

        Returns:
            One pair per entry 1..indexCount-1.
        """
        start = self._entries_at + INDEX_ENTRY_SIZE
        end = self._entries_at + self.index_count * INDEX_ENTRY_SIZE
        return [(phy, prev) for _h, phy, _d, prev in _ENTRY.iter_unpack(self.file.view[start:end])]

    def header_ok(self, commitlog_max: int) -> bool:
        """Whether the header is plausible for this configuration.

        Args:
            commitlog_max: The commitlog's max offset.

        Returns:
            True if counts and offsets are in range.
        """
        return (
            1 <= self.index_count <= self.max_entries
            and 0 <= self.slot_count <= self.slots
            and 0 <= self.begin_phy <= self.end_phy <= commitlog_max
            and 0 <= self.begin_ts <= self.end_ts
        )

    def flush(self) -> None:
        """Fdatasync the file. Flush thread."""
        self.file.flush()

    def try_close(self) -> bool:
        """Release the map (False while readers hold views)."""
        return self.file.try_close()
