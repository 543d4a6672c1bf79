"""Fixed-size memory-mapped files and the ordered queue of them (``MappedFileQueue``).

A file is named by the global offset of its first byte, zero-padded to 20 digits, and
mapped ``MAP_SHARED``. Small appends are stores into the map; page-sized and larger
ones (commitlog batches) use ``pwrite`` into the same page cache, which costs less
than one write fault per fresh page. Either way the bytes are visible through the map
at once and a flush is just ``os.fdatasync`` on the descriptor (which releases the GIL
and, on Linux, writes back the pages dirtied either way). Index files pre-fault what
they are about to write (``MADV_POPULATE_WRITE``). Readers get zero-copy
``memoryview`` slices; while any slice is alive the map cannot be closed
(``BufferError``), so destroying a file is deferred until its views are gone, like
RocketMQ's destroy-with-interval.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sys
import threading
from pathlib import Path
from typing import Final

import structlog

from rocklet.store._files import (
    ALLOCATING_SUFFIX,
    allocate_file,
    close_and_unlink,
    install_file,
    offset_name,
    reserve_file,
)
from rocklet.store.directory import StoreDamagedError

__all__ = ["PWRITE_MIN", "MappedFile", "MappedFileQueue"]

log = structlog.get_logger(__name__)

#: Appends this large go through ``pwrite`` rather than the map (see ``append``).
PWRITE_MIN = 4096
#: Bytes pre-faulted past a sequential write (see ``populate_ahead``).
_POPULATE_WINDOW = 128 * 1024
#: ``MADV_POPULATE_WRITE`` (Linux 5.14+; Python 3.11's mmap lacks the name).
_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23) if sys.platform == "linux" else None
#: ``posix_fadvise``'s WILLNEED (absent on macOS and Windows: no page-ahead there).
_WILLNEED = getattr(os, "POSIX_FADV_WILLNEED", None)
#: Bytes asked for per ``posix_fadvise`` call by :meth:`MappedFile.load_ahead`.
_LOAD_STEP = 256 * 1024
#: ``MADV_RANDOM``: no read-around on faults (see ``MappedFile``'s ``read_around``).
_RANDOM = getattr(mmap, "MADV_RANDOM", None)
#: Python's mmap keeps a dup of the file's descriptor unless told not to (3.13+):
#: without it a mapped file holds one descriptor (ours, for pwrite and fdatasync),
#: not two. Nothing here uses what it would disable (``size()``, ``resize()``).
_NO_DUP: Final[dict[str, bool]] = {"trackfd": False} if sys.version_info >= (3, 13) else {}


class MappedFile:
    """One mapped file. Writers hold the owner's lock; flush runs in the flush thread.

    Args:
        path: File path; created (sparse) with ``size`` bytes if missing.
        size: Fixed size in bytes.
        from_offset: Global offset of the first byte.
        read_around: Let a fault read the pages around it ahead (the kernel's default).
            Off for files read and written a few entries at a time (consume queues,
            index): a fault into a fresh page then maps that page alone instead of
            filling the device's whole read-ahead window (often 8 MiB, 15-25 ms) on
            the writer's thread.
    """

    def __init__(
        self, path: Path, size: int, from_offset: int, *, read_around: bool = True
    ) -> None:
        self.path = path
        self.size = size
        self.from_offset = from_offset
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size != size:
                os.ftruncate(fd, size)
            self._mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, **_NO_DUP)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        if not read_around and _RANDOM is not None:
            self._mm.madvise(_RANDOM)
        self.view = memoryview(self._mm)
        #: Bytes written (the next append position).
        self.wrote_position = 0
        #: Bytes known durable.
        self.flushed_position = 0
        self._io_lock = threading.Lock()
        self._closed = False
        #: Bytes below this were populated by :meth:`populate_ahead` (writers test it first).
        self.populated = 0

    @property
    def end_offset(self) -> int:
        """Global offset just past this file."""
        return self.from_offset + self.size

    @property
    def wrote_offset(self) -> int:
        """Global offset of the next append."""
        return self.from_offset + self.wrote_position

    @property
    def free(self) -> int:
        """Bytes left after the write position."""
        return self.size - self.wrote_position

    @property
    def closed(self) -> bool:
        """Whether the map has been released."""
        return self._closed

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` to ``pos``. The owner's writer thread only.

        Args:
            pos: Position inside the file.
            data: Bytes to copy.
        """
        self._mm[pos : pos + len(data)] = data

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` at the write position and advance it. The writer thread only.

        Args:
            data: Bytes to append; the caller checked they fit.

        Returns:
            The position they were written at.

        Raises:
            OSError: The file system refused the write (e.g. disk full).
        """
        pos = self.wrote_position
        size = len(data)
        if size >= PWRITE_MIN:
            # Stores into fresh pages of a shared map take one write fault each
            # (page_mkwrite, no fault-around), ~2x the cost of copying the same bytes
            # with pwrite into the page cache the map shares; a full disk is then an
            # OSError instead of SIGBUS. Small writes are cheaper through the map.
            done = os.pwrite(self._fd, data, pos)
            while done < size:  # short writes only happen near ENOSPC
                more = os.pwrite(self._fd, memoryview(data)[done:], pos + done)
                if more <= 0:
                    raise OSError(f"pwrite to {self.path} wrote nothing at {pos + done}")
                done += more
        else:
            self._mm[pos : pos + size] = data
        self.wrote_position = pos + size
        return pos

    def populate(self, start: int, length: int) -> None:
        """Pre-fault ``[start, start+length)`` writable in one call. Writer thread only.

        On a VM one write fault into a fresh page costs 7-23 µs; populating does the
        same allocation for ~3.5 µs a page in one system call. Best effort: a kernel
        without ``MADV_POPULATE_WRITE`` leaves the pages to fault one by one.

        Args:
            start: First byte (rounded down to a page).
            length: Bytes.
        """
        if _POPULATE_WRITE is None:
            return
        first = start - start % mmap.PAGESIZE
        end = min(self.size, start + length)
        if end <= first:
            return
        # EINVAL before Linux 5.14; ENOSPC surfaces again on the real write.
        with contextlib.suppress(OSError):
            self._mm.madvise(_POPULATE_WRITE, first, end - first)

    def populate_ahead(self, start: int, end: int) -> None:
        """Before writing ``[start, end)``: populate it plus a 128 KiB window past it.

        For a file written sequentially through the map (index entries): one call per
        window instead of one fault per page. Populated pages are dirty, so the next
        flush writes at most one window of zeros early: fine for the one index file
        being written, not for thousands of mostly idle consume queues. Pages below
        ``start`` are left alone (populating written pages would dirty them again).

        The window is small because the call runs on the writer's thread, the event
        loop, and holds it (and the GIL) for ~3 µs a page: a 1 MiB window stalled the
        loop 1.2-1.6 ms under load (up to 5 ms) every 52k index entries; a 128 KiB one
        stalls it ~0.2 ms eight times as often, the same total.

        Args:
            start: First byte about to be written.
            end: Byte just past the write.
        """
        if end <= self.populated:
            return
        first = max(self.populated, start)
        target = min(self.size, end + _POPULATE_WINDOW)
        self.populate(first, target - first)
        self.populated = target

    def load_ahead(self, start: int, length: int) -> None:
        """Ask the kernel to bring ``[start, start+length)`` into the page cache. Any thread.

        ``posix_fadvise(WILLNEED)`` reads (or, for unwritten blocks, zero-fills) the
        missing pages in the calling thread with the GIL released, and leaves cached
        pages alone; it is asked for :data:`_LOAD_STEP` bytes at a time. Used ahead of
        the writer (:mod:`rocklet.store._page_ahead`).

        Args:
            start: First byte.
            length: Bytes.
        """
        if _WILLNEED is None:
            return
        with self._io_lock:  # a private descriptor: close may not reuse ours meanwhile
            if self._closed:
                return
            fd = os.dup(self._fd)
        try:
            # In steps: one call for a whole window (8 MiB, ~25 ms of zero-filling in
            # the kernel on a VM) held its vCPU so long that the event loops queued on
            # it, the broker's and a local client's, stalled as long. A step is <1 ms
            # and returning from each lets the scheduler run them in between.
            end = start + length
            while start < end:
                step = min(_LOAD_STEP, end - start)
                os.posix_fadvise(fd, start, step, _WILLNEED)
                start += step
        finally:
            os.close(fd)

    def mark_dirty(self) -> None:
        """Note a write made with :meth:`write_at` behind the position (index files)."""
        self.wrote_position = self.flushed_position + 1

    def flush(self) -> int:
        """Make written bytes durable with ``fdatasync``. Flush thread (any thread).

        Returns:
            The flushed position.
        """
        with self._io_lock:
            target = self.wrote_position
            if self._closed or target <= self.flushed_position:
                return self.flushed_position
            os.fdatasync(self._fd)
            self.flushed_position = max(self.flushed_position, target)
            return self.flushed_position

    def data_end(self, pos: int) -> int:
        """End of the non-zero bytes at or after ``pos`` (stale data a truncation clears).

        Stops at the first all-zero 64 KiB chunk, as :meth:`zero_from` does.

        Args:
            pos: Where to start looking.

        Returns:
            The position just past the last non-zero byte found, at least ``pos``.
        """
        chunk = 64 * 1024
        end = pos
        while pos < self.size:
            data = self._mm[pos : min(pos + chunk, self.size)]
            stripped = len(data.rstrip(b"\x00"))
            if stripped == 0:
                break
            end = pos + stripped
            pos += len(data)
        return end

    def find_bytes(self, sub: bytes, start: int, end: int) -> int:
        """Lowest position of ``sub`` in ``[start, end)``, or -1 (recovery's resync).

        Args:
            sub: The bytes to find (a record's magic).
            start: First position to look at.
            end: Position the match must end by.

        Returns:
            The position, or -1.
        """
        return self._mm.find(sub, start, end)

    def zero_from(self, pos: int) -> None:
        """Zero stale bytes from ``pos`` (truncating a torn tail). Writer thread only.

        Zeroes 64 KiB chunks until one is already all zero, so a fresh sparse file's
        tail is never touched; records are contiguous, so stale data has no such gap.

        Args:
            pos: First byte to clear.
        """
        chunk = 64 * 1024
        zeros = bytes(chunk)
        while pos < self.size:
            n = min(chunk, self.size - pos)
            if self._mm[pos : pos + n] == zeros[:n]:
                return
            self._mm[pos : pos + n] = zeros[:n]
            pos += n

    def try_close(self) -> bool:
        """Release the map and descriptor unless readers still hold views. Any thread.

        Returns:
            Whether the file is now closed.
        """
        with self._io_lock:
            if self._closed:
                return True
            self.view.release()
            try:
                self._mm.close()
            except BufferError:
                # A reader still holds a slice: keep the map alive; retry later.
                self.view = memoryview(self._mm)
                return False
            os.close(self._fd)
            self._closed = True
            return True


class MappedFileQueue:
    """The ordered files of one directory (commitlog or one consume queue).

    Not thread-safe: the store's writer holds its lock; the flush thread only
    calls :meth:`flush` through a snapshot of :attr:`files`.

    Args:
        directory: Where the files live (created if missing).
        file_size: Size of each file.
        read_around: Passed to each :class:`MappedFile`.
    """

    def __init__(self, directory: Path, file_size: int, *, read_around: bool = True) -> None:
        self.directory = directory
        self.file_size = file_size
        self.read_around = read_around
        self.files: list[MappedFile] = []
        #: Files removed from the queue whose maps were still exported.
        self.pending_destroy: list[MappedFile] = []
        #: Files reserved ahead (:meth:`reserve`), by start offset: temporary paths.
        self._reserved: dict[int, Path] = {}
        #: What :meth:`load` found in the directory that is not a segment file.
        self.ignored: list[Path] = []

    def load(self) -> None:
        """Map every segment file in name order; ignore anything else with a warning.

        A segment file is a regular file named by 20 digits. Anything else in the
        directory (an editor's backup ``...~``, a ``.tmp``, a README, a directory) is
        left alone, named in a warning and in :attr:`ignored`: refusing to start over a
        stray file would stop a broker for nothing it needs.

        Raises:
            StoreDamagedError: A segment's size differs from the configured size, or a
                segment is missing between two others (offsets would map to the wrong
                file); the message names the file and the offsets.
        """
        if not self.directory.exists():
            return
        names = []
        for path in sorted(self.directory.iterdir()):
            if path.name.endswith(ALLOCATING_SUFFIX) and path.is_file():
                path.unlink()  # an allocation a crash interrupted: never held data
            elif path.name.isdigit() and len(path.name) == 20 and path.is_file():
                names.append(path)
            else:
                log.warning("ignoring a file that is not a store file", path=str(path))
                self.ignored.append(path)
        for path in names:
            actual = path.stat().st_size
            if actual != self.file_size:
                raise StoreDamagedError(
                    f"{path} is {actual} bytes but files here are {self.file_size} bytes: "
                    "written with another file size setting, or cut short; start with the "
                    "setting it was written with, or restore the file from a backup"
                )
            expected = self.files[-1].end_offset if self.files else int(path.name)
            if int(path.name) != expected:
                raise StoreDamagedError(
                    f"{self.directory / offset_name(expected)} is missing (offsets {expected} "
                    f"to {int(path.name) - 1}, before {path.name}): restore it from a backup "
                    "before starting; offsets past it would be read from the wrong file"
                )
            mf = MappedFile(path, self.file_size, int(path.name), read_around=self.read_around)
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)

    @property
    def last(self) -> MappedFile | None:
        """The newest file, or None."""
        return self.files[-1] if self.files else None

    def min_offset(self) -> int:
        """Offset of the first byte of the oldest file (0 when empty)."""
        return self.files[0].from_offset if self.files else 0

    def max_offset(self) -> int:
        """Global write position (next append offset)."""
        files = self.files  # no property hops: every put asks, for several files
        if not files:
            return 0
        last = files[-1]
        return last.from_offset + last.wrote_position

    def create_file(self, from_offset: int) -> MappedFile:
        """Create and map the file starting at ``from_offset`` and append it to the queue.

        A file reserved with :meth:`reserve` is only renamed into place, which needs no
        room; otherwise it is allocated now.

        Args:
            from_offset: A multiple of the file size.

        Returns:
            The new file.

        Raises:
            NoSpaceError: It was not reserved and the disk has no room for it.
        """
        path = self.directory / offset_name(from_offset)
        reserved = self._reserved.pop(from_offset, None)
        if reserved is not None:
            install_file(reserved, path)
        else:
            self.directory.mkdir(parents=True, exist_ok=True)
            allocate_file(path, self.file_size)
        try:
            mf = MappedFile(path, self.file_size, from_offset, read_around=self.read_around)
        except BaseException:
            path.unlink(missing_ok=True)  # never leave a file the queue does not hold
            raise
        self.files.append(mf)
        return mf

    def reserve(self, end_offset: int, start_offset: int = 0) -> None:
        """Reserve on disk every file an append up to ``end_offset`` will create.

        Callers that must not fail half-way (a put writes the commitlog, then its
        consume-queue entries) reserve first: afterwards :meth:`create_file` only
        renames, so running out of room happens before anything was written.

        Args:
            end_offset: Global offset just past the bytes about to be appended.
            start_offset: Where the first file starts when the queue has none.

        Raises:
            NoSpaceError: The disk has no room (files reserved so far stay reserved).
        """
        last = self.last
        size = self.file_size
        offset = last.end_offset if last is not None else start_offset - start_offset % size
        while offset < end_offset:
            if offset not in self._reserved:
                self.directory.mkdir(parents=True, exist_ok=True)
                path = self.directory / offset_name(offset)
                self._reserved[offset] = reserve_file(path, size)
            offset += size

    def release_reserved(self) -> None:
        """Delete the files reserved ahead and not used (at close)."""
        for reserved in self._reserved.values():
            reserved.unlink(missing_ok=True)
        self._reserved.clear()

    def last_or_new(self, start_offset: int = 0) -> MappedFile:
        """The newest file if it has room, else a new one after it.

        Args:
            start_offset: Where to start the very first file.

        Returns:
            A file with free space.
        """
        files = self.files
        if not files:
            return self.create_file(start_offset - start_offset % self.file_size)
        last = files[-1]
        if last.wrote_position == last.size:
            return self.create_file(last.end_offset)
        return last

    def find(self, offset: int) -> MappedFile | None:
        """The file holding ``offset``, or None if it is outside the queue.

        Args:
            offset: A global offset.

        Returns:
            The file or None.
        """
        if not self.files:
            return None
        first = self.files[0].from_offset
        idx = (offset - first) // self.file_size
        if 0 <= idx < len(self.files):
            mf = self.files[idx]
            if mf.from_offset <= offset < mf.end_offset:
                return mf
        return None

    def set_write_position(self, offset: int) -> None:
        """Set every file's write position from a recovered end offset.

        Files wholly past ``offset`` are destroyed; the one containing it is zeroed
        from there (RocketMQ ``truncateDirtyFiles``).

        Args:
            offset: The first invalid global offset.
        """
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.end_offset <= offset:
                mf.wrote_position = mf.flushed_position = mf.size
            elif mf.from_offset <= offset:
                pos = offset - mf.from_offset
                mf.zero_from(pos)
                mf.wrote_position = mf.flushed_position = pos
            else:
                self._destroy(mf)
                continue
            keep.append(mf)
        self.files = keep

    def delete_first(self, unlink_later: list[Path] | None = None) -> MappedFile:
        """Remove the oldest file from the queue and destroy it (maybe deferred).

        Args:
            unlink_later: Where to put the closed file's path for the caller to unlink
                once it released the store lock (:func:`~rocklet.store._files.unlink_all`);
                ``None`` unlinks it now.

        Returns:
            The removed file.
        """
        mf = self.files.pop(0)
        self._destroy(mf, unlink_later)
        return mf

    def _destroy(self, mf: MappedFile, unlink_later: list[Path] | None = None) -> None:
        if close_and_unlink(mf, unlink_later):
            return
        log.info("destroy deferred: file still has readers", path=str(mf.path))
        self.pending_destroy.append(mf)

    def retry_destroy(self, unlink_later: list[Path] | None = None) -> int:
        """Close and unlink files whose destroy was deferred. Writer thread.

        Args:
            unlink_later: As for :meth:`delete_first`.

        Returns:
            How many are still pending.
        """
        self.pending_destroy = [
            mf for mf in self.pending_destroy if not close_and_unlink(mf, unlink_later)
        ]
        return len(self.pending_destroy)

    def flush(self) -> int:
        """Flush every file with unflushed bytes. Flush thread.

        Returns:
            How many files were synced.
        """
        synced = 0
        for mf in list(self.files):
            if mf.wrote_position > mf.flushed_position:
                mf.flush()
                synced += 1
        return synced

    def close(self) -> None:
        """Close every file (views still held by callers leave their maps to the GC)."""
        self.release_reserved()
        for mf in self.files + self.pending_destroy:
            if not mf.try_close():
                log.warning("closing store with live views", path=str(mf.path))
        self.files = []
        self.pending_destroy = []
