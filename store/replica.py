"""The store's side of master-slave replication: raw commitlog bytes out and in.

A master ships its commitlog as it is on disk, in chunks that never cross a segment
end but may cut records anywhere (RocketMQ's ``HAConnection.WriteSocketService``). A
slave appends them at exactly the same offsets, so its segment files are byte for byte
the master's, and dispatches the whole records among them to its consume queues and
index with the store's own reput service, as recovery does
(:mod:`rocklet.store._reput`, whose ``partial_tail`` makes it stop before a cut record),
and advances the commitlog time the flush thread writes to the checkpoint (the consume
queue and index times advance through the dispatch itself), as a master's puts do.

Everything here takes the store lock; the broker calls it from a worker thread when it
may touch cold pages.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from rocklet.store.message_store import MessageStore

__all__ = [
    "WALK_LIMIT",
    "ReplicaError",
    "append_replica",
    "first_difference",
    "newest_store_time",
    "read_replica",
    "record_at_or_after",
]

log = structlog.get_logger(__name__)

#: Where STORETIMESTAMP sits in a record (after an IPv4 BORNHOST, as the reader assumes).
_STORE_TS_AT = 56
_STORE_TS = struct.Struct(">q")
#: Records one lag query steps over at most; the next query goes on from there.
WALK_LIMIT = 65536
#: Records stepped over per hold of the store lock.
_WALK_BATCH = 4096


class ReplicaError(Exception):
    """Bytes from the master cannot be appended where they say they go."""


def read_replica(store: MessageStore, offset: int, max_bytes: int) -> bytes | None:
    """Copy commitlog bytes from ``offset`` to the end of its segment's written data.

    Args:
        store: The master's store.
        offset: Where to start.
        max_bytes: At most this many bytes (``haTransferBatchSize``).

    Returns:
        The bytes (empty when nothing is written past ``offset`` yet), or ``None`` when
        ``offset`` is no longer stored (retention deleted it) or lies past the end.
    """
    with store.lock:
        commitlog = store.commitlog
        if offset == commitlog.max_offset():
            return b""
        mf = commitlog.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.from_offset
        end = min(mf.wrote_position, pos + max_bytes)
        if end <= pos:
            # A sealed segment is full, so only the open one can end at ``offset``.
            return b"" if mf is commitlog.files.last else None
        return bytes(mf.view[pos:end])


def first_difference(store: MessageStore, offset: int, data: bytes) -> int | None:
    """Compare bytes from the master with the slave's own at the same offsets.

    Only the overlap with what the slave holds is compared.

    Args:
        store: The slave's store.
        offset: Where ``data`` starts in the master's commitlog.
        data: The master's bytes.

    Returns:
        The first offset where they differ, or ``None`` if they agree.
    """
    with store.lock:
        commitlog = store.commitlog
        at, end = offset, min(offset + len(data), commitlog.max_offset())
        while at < end:
            mf = commitlog.files.find(at)
            if mf is None:
                return at
            pos = at - mf.from_offset
            n = min(end - at, mf.wrote_position - pos)
            if n <= 0:
                return at
            mine = mf.view[pos : pos + n]
            theirs = data[at - offset : at - offset + n]
            if mine != theirs:
                k = next(i for i in range(n) if mine[i] != theirs[i])
                return at + k
            at += n
        return None


def append_replica(store: MessageStore, offset: int, data: bytes) -> int:
    """Append the master's bytes at ``offset`` and dispatch the whole records among them.

    Args:
        store: The slave's store.
        offset: Where the bytes start in the master's commitlog; must be the slave's
            max offset, or, for an empty slave, the start of a segment.
        data: Commitlog bytes (may cut records at either end).

    Returns:
        The slave's max commitlog offset afterwards.

    Raises:
        ReplicaError: ``offset`` is not where the slave's commitlog ends.
        OSError: A segment could not be created or written.
    """
    with store.lock:
        commitlog = store.commitlog
        files = commitlog.files
        size = commitlog.file_size
        if files.last is None:
            if offset % size:
                raise ReplicaError(
                    f"an empty slave can only start at a segment start, not at {offset}"
                )
            files.create_file(offset)
            store.reput.reput_from = offset
        elif offset != commitlog.max_offset():
            raise ReplicaError(
                f"master sent bytes for offset {offset}; the slave's commitlog ends at "
                f"{commitlog.max_offset()}"
            )
        view = memoryview(data)
        while view:
            mf = files.last
            assert mf is not None
            if mf.free == 0:
                mf = files.create_file(mf.end_offset)
            n = min(len(view), mf.free)
            mf.append(view[:n])
            view = view[n:]
        commitlog.page_ahead.after_append(len(data), commitlog.max_offset())
        reput = store.reput
        reput.partial_tail = True
        reput.run_once()
        # The flush thread copies this into the checkpoint's commitlog time once the
        # bytes are synced, as a master's puts do: a slave's crash recovery then starts
        # near its end rather than at its first segment. Only whole dispatched records
        # count, so the time never runs ahead of a record the slave holds entirely.
        commitlog.last_store_timestamp = max(
            commitlog.last_store_timestamp, reput.last_store_timestamp
        )
        end = commitlog.max_offset()
    store.flush_service.wakeup_if_due(end)
    return end


def record_at_or_after(
    store: MessageStore, offset: int, hint: int = -1, limit: int = WALK_LIMIT
) -> tuple[int, int] | None:
    """The record holding ``offset`` (or, in a segment's blank end, the next one).

    The master uses it for a slave's lag in seconds: the store time of the oldest
    message the slave has not wholly acknowledged. Records never cross a segment end,
    so a walk from the segment's start (or from ``hint``, a record start found before)
    finds the record boundaries. The walk takes the store lock for a batch of records
    at a time and stops after ``limit`` records, so a query never holds up puts (or the
    event loop) for long; the caller passes the result back as the next ``hint``.

    Args:
        store: The master's store.
        offset: A commitlog offset (an acknowledged offset may cut a record anywhere).
        hint: A record start at or before ``offset`` in the same segment, or -1.
        limit: Most records to step over.

    Returns:
        ``(record start, store timestamp ms)`` of that record; when the walk ran out of
        steps first, of the last record it reached, which lies before ``offset`` and is
        at least as old (an over-estimate of the age). ``None`` when nothing is stored
        at or after ``offset`` (past the end, or deleted by retention).
    """
    pos = -1
    steps = 0
    while True:
        with store.lock:
            commitlog = store.commitlog
            end = commitlog.max_offset()
            if offset >= end:
                return None
            if pos < 0:
                mf = commitlog.files.find(offset)
                if mf is None:
                    return None
                pos = hint if mf.from_offset <= hint <= offset else mf.from_offset
            for _ in range(_WALK_BATCH):
                if pos >= end:
                    return None
                size = commitlog.record_size_at(pos)
                if size == 0:
                    # The blank filler at a segment's end (or no record): the next segment.
                    pos = commitlog.roll_next_file(pos)
                    continue
                if pos + size > offset or steps >= limit:
                    view = commitlog.read(pos + _STORE_TS_AT, 8)
                    return None if view is None else (pos, _STORE_TS.unpack(view)[0])
                pos += size
                steps += 1


def newest_store_time(store: MessageStore) -> int:
    """Store time (ms) of the newest record dispatched to a consume queue (0 if none).

    A slave's lag in seconds is measured against it: whatever it has not received yet
    was stored after it.
    """
    return store._logics_ts  # the store's own package: no public accessor needed
