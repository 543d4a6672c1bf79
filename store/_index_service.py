"""The index files as a whole: building (dispatcher side), querying, retention.

Keys per record are every key of KEYS and the UNIQ_KEY, each as ``topic#key``
(``IndexService.buildIndex``); records of rolled-back transactions are not indexed.
A full file is sealed and a new one starts with the previous end offset and time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import structlog

from rocklet.protocol.message import TRANSACTION_MASK, SysFlag
from rocklet.store._dispatch_request import DispatchRequest
from rocklet.store._files import ALLOCATING_SUFFIX, close_and_unlink, reserve_file
from rocklet.store._hashing import index_key_hash, index_key_hashes, java_hash
from rocklet.store._index_file import IndexFile
from rocklet.store._time import file_time_name
from rocklet.transport.clock import Clock

__all__ = ["IndexService"]

log = structlog.get_logger(__name__)

_ROLLBACK = int(SysFlag.TRANSACTION_ROLLBACK)


def fast_java_hash(text: str) -> int:
    """Java ``String.hashCode()`` (kept for callers; see :mod:`rocklet.store._hashing`).

    Args:
        text: The key.

    Returns:
        The signed 32-bit hash, equal to ``rocklet.protocol.message.java_string_hash``.
    """
    return java_hash(text)


class IndexService:
    """All index files, oldest first. Writer: dispatching thread under the store lock.

    Args:
        directory: ``<store>/index``.
        slots: Hash slots per file.
        max_entries: Entries per file.
        clock: Names new files by creation time.
    """

    def __init__(self, directory: Path, slots: int, max_entries: int, clock: Clock) -> None:
        self.directory = directory
        self.slots = slots
        self.max_entries = max_entries
        self.clock = clock
        self.files: list[IndexFile] = []
        self._pending_close: list[IndexFile] = []
        #: Files reserved ahead by :meth:`reserve` (temporary paths), used in order.
        self._reserved: list[Path] = []
        self._reserved_seq = 0  # names reserved files uniquely
        #: What :meth:`load` found that is not an index file of this configuration.
        self.ignored: list[Path] = []
        #: Store time of the newest indexed record (the checkpoint's index time).
        self.last_timestamp = 0

    def load(self) -> None:
        """Map existing files in name (creation time) order."""
        if not self.directory.exists():
            return
        size = self.file_size
        for path in sorted(self.directory.iterdir()):
            if path.name.endswith(ALLOCATING_SUFFIX) and path.is_file():
                path.unlink()  # an allocation a crash interrupted: never held data
            elif path.name.isdigit() and path.is_file() and path.stat().st_size == size:
                self.files.append(IndexFile(path, self.slots, self.max_entries))
            else:
                log.warning("ignoring foreign index file", path=str(path))
                self.ignored.append(path)

    def end_phy_offset(self) -> int:
        """Commitlog offset of the newest indexed record (0 if none)."""
        return self.files[-1].end_phy if self.files else 0

    def build(self, req: DispatchRequest) -> int:
        """Index one record's keys (``buildIndex``).

        Args:
            req: The dispatched record.

        Returns:
            Keys written.
        """
        if req.sys_flag & TRANSACTION_MASK == _ROLLBACK:
            return 0
        if self.files and req.commitlog_offset < self.files[-1].end_phy:
            return 0  # replay of an already indexed record
        prefix = req.topic + "#"
        keys = [prefix + key for key in req.keys.split()]
        if req.uniq_key:
            keys.insert(0, prefix + req.uniq_key)  # buildIndex puts UNIQ_KEY first
        offsets = [req.commitlog_offset] * len(keys)
        return self.build_keys(index_key_hashes(keys), offsets, req.store_timestamp)

    def build_keys(self, hashes: Sequence[int], offsets: Sequence[int], store_ts: int) -> int:
        """Index the keys of freshly appended records (the put path's ``buildIndex``).

        The caller hashed the keys (:func:`rocklet.store._hashing.index_key_hashes`) in
        ``buildIndex`` order (UNIQ_KEY, then KEYS) and skipped rolled-back records and
        replays (:meth:`build` checks both; fresh puts are neither).

        Args:
            hashes: Key hashes.
            offsets: Commitlog offset of each key's record, ascending.
            store_ts: Store time of the records.

        Returns:
            Keys written.
        """
        count = len(hashes)
        files = self.files
        if files and files[-1].index_count + count <= files[-1].max_entries:
            start = files[-1].put_keys(hashes, offsets, 0, store_ts)  # the usual put
        else:
            start = 0
        while start < count:
            start += self._writable().put_keys(hashes, offsets, start, store_ts)
        self.last_timestamp = store_ts
        return start

    def reserve(self, keys: int) -> None:
        """Reserve on disk the new files that indexing ``keys`` more keys will create.

        The put path calls this before writing the commitlog, so a full disk refuses the
        put before anything is written; :meth:`build_keys` then only renames them.

        Args:
            keys: Keys about to be indexed.

        Raises:
            NoSpaceError: The disk has no room for a new file.
        """
        last = self.files[-1] if self.files else None
        room = last.max_entries - last.index_count if last is not None else 0
        if keys <= room:
            return  # fits the current file: the put path's usual case
        per_file = self.max_entries - 1  # entry 0 is never used
        missing = keys - room
        needed = -(-missing // per_file) if missing > 0 else 0
        while len(self._reserved) < needed:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._reserved_seq += 1
            spare = self.directory / f"reserved-{self._reserved_seq}"
            self._reserved.append(reserve_file(spare, self.file_size))

    @property
    def file_size(self) -> int:
        """Bytes of one index file."""
        return 40 + self.slots * 4 + self.max_entries * 20

    def _writable(self) -> IndexFile:
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_full:
            return last
        begin_phy = last.end_phy if last else 0
        begin_ts = last.end_ts if last else 0
        if last is not None:
            last.flush()  # a sealed file is flushed once (IndexService.flush)
        self.directory.mkdir(parents=True, exist_ok=True)
        now = self.clock.now_ms()
        path = self.directory / file_time_name(now)
        while path.exists() or (last is not None and path.name <= last.path.name):
            now += 1  # names must be unique and ordered even under a frozen clock
            path = self.directory / file_time_name(now)
        reserved = self._reserved.pop(0) if self._reserved else None
        f = IndexFile(path, self.slots, self.max_entries, begin_phy, begin_ts, reserved=reserved)
        self.files.append(f)
        return f

    def query(self, topic: str, key: str, limit: int, begin_ms: int, end_ms: int) -> list[int]:
        """Candidate commitlog offsets for ``topic#key``, newest first.

        Hashes collide: the caller compares the real key.

        Args:
            topic: Topic.
            key: Key or UNIQ_KEY.
            limit: Most candidates to return.
            begin_ms: Earliest store time.
            end_ms: Latest store time.

        Returns:
            Commitlog offsets.
        """
        h = index_key_hash(f"{topic}#{key}")
        out: list[int] = []
        # Entry times are truncated to whole seconds after the file's begin time.
        lo = begin_ms - 1000
        for f in reversed(self.files):
            if len(out) >= limit:
                break
            if f.end_ts >= lo and f.begin_ts <= end_ms:
                f.select(h, lo, end_ms, out, limit)
        return out

    def drop_from(self, position: int) -> int:
        """Delete the file at ``position`` in :attr:`files` and every newer one.

        Args:
            position: Index into :attr:`files`.

        Returns:
            The commitlog offset to rebuild from (the begin of the first dropped file).
        """
        dropped = self.files[position:]
        self.files = self.files[:position]
        rebuild_from = self.files[-1].end_phy if self.files else 0
        for f in dropped:
            self._destroy(f)
        return rebuild_from

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
        while len(self.files) > 1 and self.files[0].end_phy < commitlog_min:
            self._destroy(self.files.pop(0), unlink_later)
            deleted += 1
        self._pending_close = [
            f for f in self._pending_close if not close_and_unlink(f, unlink_later)
        ]
        return deleted

    def _destroy(self, f: IndexFile, unlink_later: list[Path] | None = None) -> None:
        if not close_and_unlink(f, unlink_later):
            self._pending_close.append(f)

    def flush(self) -> None:
        """Fdatasync files with unflushed writes. Flush thread."""
        for f in list(self.files):
            f.flush()

    def close(self) -> None:
        """Release every map and delete the files reserved and not used."""
        for reserved in self._reserved:
            reserved.unlink(missing_ok=True)
        self._reserved = []
        for f in self.files + self._pending_close:
            f.try_close()
        self.files = []
        self._pending_close = []
