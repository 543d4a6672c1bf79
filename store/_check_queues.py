"""Store check, consume queues: their files, and each entry against its record.

Both directions are checked. The commitlog walk looks up the entry of every record it
reads (:meth:`QueueFiles.check_record_entry`: same offset, size and tags code, which
needs the record parsed whole, as the walk has done). The walk over the queues
(:func:`check_queues`) then confirms each entry points at a whole record of its size,
topic, queue and queue offset, and that nothing but zeros follows a queue's end. With
both, every entry is its record's and every record has its entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rocklet.store._check_io import (
    PROBLEM,
    WARNING,
    CheckContext,
    MapCache,
    sized_files,
    wrong_size,
)
from rocklet.store._consume_queue import BLANK_ENTRY_SIZE, ENTRY, ENTRY_SIZE
from rocklet.store._dispatch_request import DispatchRequest, record_mismatch
from rocklet.store.dropped_queues import DroppedQueues

__all__ = ["QueueFiles", "check_queues"]

_AREA: Final = "consumequeue"
#: Segments a clean start scans for records without entries (``recoverNormally``'s 3).
_SCANNED_SEGMENTS: Final = 3
_REBUILD_ALL: Final = (
    "a start does not rebuild them: stop the broker, delete consumequeue/ and start it "
    "(every queue is rebuilt from the commitlog, at the same offsets)"
)
#: Crash recovery re-checks a queue's last files (``ConsumeQueue.recover``).
_RECOVERED_FILES: Final = 3


@dataclass(slots=True)
class _Queue:
    directory: Path
    files: list[Path]  # whole, contiguous files
    first_byte: int  # of the first file

    def locate(self, byte: int, file_size: int) -> tuple[Path, int] | None:
        n = (byte - self.first_byte) // file_size
        if byte < self.first_byte or n >= len(self.files):
            return None
        return self.files[n], byte - self.first_byte - n * file_size

    def recovered(self, byte: int, file_size: int) -> bool:
        return (byte - self.first_byte) // file_size >= len(self.files) - _RECOVERED_FILES


class QueueFiles:
    """The store's consume queues, listed once, read through a :class:`MapCache`.

    Args:
        ctx: The check.
        maps: Read-only maps.
    """

    def __init__(self, ctx: CheckContext, maps: MapCache) -> None:
        self._ctx = ctx
        self._maps = maps
        self._file_size = ctx.config.consume_queue_file_size_bytes
        self.queues: dict[tuple[str, int], _Queue] = {}
        # Per queue, records with no entry: why, the first (commitlog offset, queue
        # offset) and the last commitlog offset; reported once the walk is over.
        self._unindexed: dict[tuple[str, int], tuple[str, int, int, int]] = {}
        # Records of queues dropped on purpose (deleteTopic) need no entry.
        self._dropped = DroppedQueues.load(ctx.root).marks
        self._list()

    def _list(self) -> None:
        ctx, root = self._ctx, self._ctx.root / "consumequeue"
        if not root.is_dir():
            return
        for topic_dir in sorted(root.iterdir()):
            if not topic_dir.is_dir():
                ctx.add(WARNING, _AREA, topic_dir, None, "not a store file: ignored")
                ctx.count("ignored_files")
                continue
            for qdir in sorted(topic_dir.iterdir()):
                if not (qdir.name.isdigit() and qdir.is_dir()):
                    ctx.add(WARNING, _AREA, qdir, None, "not a store file: ignored")
                    ctx.count("ignored_files")
                    continue
                files = self._whole_files(qdir)
                first = int(files[0].name) if files else 0
                self.queues[(topic_dir.name, int(qdir.name))] = _Queue(qdir, files, first)

    def _whole_files(self, qdir: Path) -> list[Path]:
        ctx, size = self._ctx, self._file_size
        files: list[Path] = []
        for path, actual in sized_files(ctx, qdir, _AREA, 20):
            if actual != size:
                why = f"consume-queue files are {size} (mappedFileSizeConsumeQueue): "
                wrong_size(ctx, _AREA, path, None, actual, why + "a broker refuses to start")
                return files
            if files and int(path.name) != int(files[-1].name) + size:
                gap = int(files[-1].name) + size
                ctx.add(
                    PROBLEM,
                    _AREA,
                    qdir / f"{gap:020d}",
                    gap // ENTRY_SIZE,
                    f"missing (entries {gap // ENTRY_SIZE} to {int(path.name) // ENTRY_SIZE - 1}): "
                    "a broker refuses to start",
                )
                return files
            files.append(path)
        return files

    def of_dropped_queue(self, req: DispatchRequest) -> bool:
        """Whether a record belongs to a queue dropped since (deleteTopic): it needs no entry."""
        if self._dropped and req.commitlog_offset < self._dropped.get(
            (req.topic, req.queue_id), -1
        ):
            self._ctx.count("dropped_queue_records")
            return True
        return False

    def check_record_entry(self, req: DispatchRequest) -> None:
        """Check the entry of a whole, queued record the commitlog walk read.

        Args:
            req: The record.
        """
        ctx = self._ctx
        key = (req.topic, req.queue_id)
        queue = self.queues.get(key)
        if queue is None:
            self._no_entry(key, req, "missing")
            return
        byte = req.queue_offset * ENTRY_SIZE
        where = queue.locate(byte, self._file_size)
        if where is None:
            # Retention deletes a queue file only once every record it points at is
            # gone, so a live record before the first file means files were lost.
            self._no_entry(key, req, "lost" if byte < queue.first_byte else "behind")
            return
        path, pos = where
        mapped = self._maps.get(path)
        if mapped is None:
            return
        entry = ENTRY.unpack_from(mapped[1], pos)
        if entry == (0, 0, 0):
            self._no_entry(key, req, "behind")
        elif entry != (req.commitlog_offset, req.size, req.tags_code):
            severity = ctx.repairable() if queue.recovered(byte, self._file_size) else PROBLEM
            phy, size, tags = entry
            ctx.add(
                severity,
                _AREA,
                path,
                req.queue_offset,
                f"entry says offset {phy}, {size} bytes, tags code {tags}; its record is at "
                f"{req.commitlog_offset}, {req.size} bytes, tags code {req.tags_code}",
            )

    def _no_entry(self, key: tuple[str, int], req: DispatchRequest, why: str) -> None:
        self._ctx.count("records_without_entry")
        seen = self._unindexed.get(key)
        if seen is None:
            self._unindexed[key] = (
                why,
                req.commitlog_offset,
                req.queue_offset,
                req.commitlog_offset,
            )
        else:
            self._unindexed[key] = (*seen[:3], req.commitlog_offset)

    def report_unindexed(self) -> None:
        """One finding per queue whose records the walk found without entries.

        A start re-dispatches a queue that is missing, or that ends before its
        records, when it meets one of those records in the segments it scans (the
        newest three after a clean stop; fewer, from the checkpoint, after a crash).
        Anything else it leaves unreadable, and the finding says how to rebuild.
        """
        ctx = self._ctx
        segments = sorted(ctx.segments)
        scanned = segments[-1 if ctx.crashed else -_SCANNED_SEGMENTS :] or [0]
        for key, (why, first_at, first_offset, last_at) in sorted(self._unindexed.items()):
            topic, queue_id = key
            directory = ctx.root / _AREA / topic / str(queue_id)
            rebuilt = why != "lost" and last_at >= scanned[0]
            if why == "missing":
                text = f"missing, while the commitlog holds its records (from {first_at})"
            elif why == "lost":
                first = self.queues[key].first_byte // ENTRY_SIZE
                text = (
                    f"its files start at entry {first}, but the commitlog still holds the "
                    f"record of offset {first_offset} (at {first_at}): files before were lost"
                )
            else:
                text = (
                    f"no entry for the record at {first_at} and after: the queue ends before "
                    "the commitlog's records of it"
                )
            severity = ctx.repairable() if rebuilt else PROBLEM
            text += " (rebuilt at start)" if rebuilt else f"; {_REBUILD_ALL}"
            ctx.add(severity, _AREA, directory, first_offset, text)


def check_queues(
    ctx: CheckContext, files: QueueFiles, queue_maps: MapCache, log_maps: MapCache
) -> None:
    """Check every consume queue's entries against the commitlog.

    Args:
        ctx: The check (the commitlog walk has run).
        files: The listed queues.
        queue_maps: Read-only maps of consume-queue files.
        log_maps: Read-only maps of commitlog segments (never the same cache: a file
            being walked must not be unmapped by a lookup in the other kind).
    """
    files.report_unindexed()
    for key, queue in files.queues.items():
        ctx.count("queues")
        end = None if ctx.live is None else ctx.live.queue_ends.get(key, 0)
        _walk_queue(ctx, queue_maps, log_maps, key, queue, end)


def _walk_queue(
    ctx: CheckContext,
    maps: MapCache,
    log_maps: MapCache,
    key: tuple[str, int],
    queue: _Queue,
    end: int | None,
) -> None:
    topic = key[0].encode()
    size = ctx.config.consume_queue_file_size_bytes
    ended_at: int | None = None  # first all-zero entry: the queue's end
    for path in queue.files:
        base = int(path.name)
        mapped = maps.get(path)
        if mapped is None:
            continue
        view = mapped[1]
        limit = size if end is None else max(0, min(size, end - base))
        for n, (phy, rsize, _tags) in enumerate(ENTRY.iter_unpack(view[:limit])):
            index = (base // ENTRY_SIZE) + n
            if phy == 0 and rsize == 0:
                if ended_at is None:
                    ended_at = index
                continue
            if ended_at is not None:
                ctx.add(
                    ctx.repairable(),
                    _AREA,
                    path,
                    index,
                    f"entries after the queue's end at {ended_at} (a torn write; dropped at start)",
                )
                return
            if phy == 0 and rsize == BLANK_ENTRY_SIZE:
                ctx.count("blank_entries")
                continue
            ctx.count("entries")
            if phy + rsize > ctx.commitlog_end:
                ctx.add(
                    ctx.repairable(),
                    _AREA,
                    path,
                    index,
                    f"entries from here on point past the commitlog's end "
                    f"({ctx.commitlog_end}): dropped at start",
                )
                return
            reason = _entry_problem(ctx, log_maps, topic, key[1], index, phy, rsize)
            if reason is not None:
                ctx.add(PROBLEM, _AREA, path, index, reason)


def _entry_problem(
    ctx: CheckContext, maps: MapCache, topic: bytes, queue_id: int, index: int, phy: int, size: int
) -> str | None:
    if size <= 0 or phy < 0:
        return f"entry of {size} bytes at offset {phy}: not an entry"
    if phy < ctx.commitlog_min:
        return None  # retention removed the record; the entry goes with its file
    for start, stop in ctx.damaged:
        if phy < stop and phy + size > start:
            # The damage is the problem; a start blanks this entry and reads skip it.
            ctx.count("entries_damaged")
            return None
    seg_size = ctx.config.commitlog_file_size_bytes
    base = phy - phy % seg_size
    path = ctx.segments.get(base)
    mapped = maps.get(path) if path is not None else None
    if mapped is None:
        if ctx.live is not None:
            return None  # retention deleted the segment while the check ran
        return f"points at {phy}, in a commitlog segment that is missing"
    if phy - base + size > seg_size:
        return f"points at {phy}, {size} bytes: past its segment's end"
    return record_mismatch(mapped[1], phy - base, topic, queue_id, index, size)
