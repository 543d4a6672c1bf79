"""What the store check shares: findings, counts, read-only maps of the store's files.

The check never writes: files are mapped ``ACCESS_READ``, a few at a time (each map
holds a descriptor, and a live broker must not run out of them because of a check).
A file that vanishes while the check runs (retention on a live store) is skipped.
"""

from __future__ import annotations

import mmap
import os
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from rocklet.store._files import ALLOCATING_SUFFIX
from rocklet.store.config import StoreConfig

__all__ = [
    "PROBLEM",
    "WARNING",
    "CheckContext",
    "Finding",
    "LiveLimits",
    "MapCache",
    "Severity",
    "data_end",
    "list_files",
]

Severity = Literal["problem", "warning"]
#: Something a broker would refuse, lose or serve wrong: ``rocklet store check`` exits 1.
PROBLEM: Final[Severity] = "problem"
#: Worth knowing, harmless to the data (a stray file, what recovery will repair).
WARNING: Final[Severity] = "warning"
_ZERO_CHUNK: Final = 64 * 1024


#: Findings of one severity listed per file; the rest are counted in one more line.
PER_FILE: Final = 20


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the check found.

    Attributes:
        severity: :data:`PROBLEM` or :data:`WARNING`.
        area: ``directory``, ``commitlog``, ``consumequeue``, ``index``, ``checkpoint``
            or ``config``.
        path: The file, relative to the store root when it lies inside it.
        offset: Commitlog offset (commitlog), queue offset (consume queue), entry
            number (index), or None.
        message: What is wrong, and what a broker does about it.
    """

    severity: Severity
    area: str
    path: str
    offset: int | None
    message: str


@dataclass(frozen=True, slots=True)
class LiveLimits:
    """How far a running store's files were written when its check started.

    Taken under the store lock; everything below these limits is immutable while the
    broker appends, so the check reads it without holding the lock.

    Attributes:
        commitlog_min: The commitlog's first offset.
        commitlog_end: The commitlog's write position.
        queue_ends: Per (topic, queue id), the consume queue's written bytes.
        index_counts: Per index file name, its entry count (``indexCount``).
    """

    commitlog_min: int
    commitlog_end: int
    queue_ends: dict[tuple[str, int], int]
    index_counts: dict[str, int]


@dataclass(slots=True)
class CheckContext:
    """State shared by the parts of one check. One thread.

    Attributes:
        config: Sizes and paths of the store.
        live: Limits of a running store, or None for a stopped one.
        crashed: The abort marker is there: the last run did not stop cleanly, so what
            crash recovery repairs (a torn tail, queues behind the log) is a warning.
        sizes_known: File sizes come from the broker's configuration, not a guess.
        findings: Everything found so far.
        counts: Summary figures.
        segments: Commitlog segments by first offset.
        commitlog_min: First commitlog offset.
        commitlog_end: Offset past the last whole record.
        damaged: Damaged commitlog ranges found, as (start, end).
        newest_store_ts: Store time of the newest record.
    """

    config: StoreConfig
    live: LiveLimits | None
    crashed: bool
    sizes_known: bool
    findings: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    segments: dict[int, Path] = field(default_factory=dict)
    commitlog_min: int = 0
    commitlog_end: int = 0
    damaged: list[tuple[int, int]] = field(default_factory=list)
    newest_store_ts: int = 0
    # Findings past PER_FILE in one file, by (severity, area, path): a missing segment
    # would otherwise list every consume-queue entry that points into it.
    held_back: dict[tuple[Severity, str, str], int] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        """The store root."""
        return self.config.store_path

    def where(self, path: Path) -> str:
        """``path`` relative to the store root when it lies inside it."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def add(
        self, severity: Severity, area: str, path: Path, offset: int | None, message: str
    ) -> None:
        """Record a finding (past :data:`PER_FILE` of a kind in one file, count it)."""
        where = self.where(path)
        key = (severity, area, where)
        seen = self.held_back.get(key, 0) + 1
        self.held_back[key] = seen
        if seen <= PER_FILE:
            self.findings.append(Finding(severity, area, where, offset, message))

    def close(self) -> None:
        """Say how many findings each file had beyond those listed."""
        for (severity, area, where), seen in self.held_back.items():
            if seen > PER_FILE:
                more = f"and {seen - PER_FILE} more {severity}s like these in this file"
                self.findings.append(Finding(severity, area, where, None, more))
        self.held_back.clear()

    def repairable(self) -> Severity:
        """Severity of what crash recovery repairs: expected after a crash only."""
        return WARNING if self.crashed and self.live is None else PROBLEM

    def count(self, name: str, n: int = 1) -> None:
        """Add to a summary figure."""
        self.counts[name] = self.counts.get(name, 0) + n


class MapCache:
    """Read-only maps of recently used files, at most ``capacity`` open at once.

    Args:
        capacity: Maps kept open.
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._maps: OrderedDict[Path, tuple[mmap.mmap, memoryview]] = OrderedDict()

    def get(self, path: Path) -> tuple[mmap.mmap, memoryview] | None:
        """The map of ``path``, or None if it is empty or gone.

        Args:
            path: A file.

        Returns:
            (map, view of it) or None.
        """
        hit = self._maps.get(path)
        if hit is not None:
            self._maps.move_to_end(path)
            return hit
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None  # deleted by retention while a live store was checked
        try:
            if os.fstat(fd).st_size == 0:
                return None
            mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self._maps[path] = (mm, memoryview(mm))
        while len(self._maps) > self._capacity:
            self._drop(next(iter(self._maps)))
        return self._maps[path]

    def _drop(self, path: Path) -> None:
        mm, view = self._maps.pop(path)
        view.release()
        mm.close()

    def close(self) -> None:
        """Unmap everything (views handed out must be released by then)."""
        for path in list(self._maps):
            self._drop(path)


def data_end(view: memoryview, pos: int) -> int:
    """End of the non-zero bytes at or after ``pos``, up to the first zero 64 KiB chunk.

    The same rule recovery uses for the bytes past the last record of the log.

    Args:
        view: A file.
        pos: Where to start.

    Returns:
        The position just past the last non-zero byte found, at least ``pos``.
    """
    end = pos
    while pos < len(view):
        chunk = bytes(view[pos : min(pos + _ZERO_CHUNK, len(view))])
        stripped = len(chunk.rstrip(b"\x00"))
        if stripped == 0:
            break
        end = pos + stripped
        pos += len(chunk)
    return end


def note_allocation(ctx: CheckContext, path: Path, area: str) -> bool:
    """Judge a file under its allocating name; False if ``path`` is not one.

    On a running broker the allocator may be reserving the next segment right
    now, so the file is expected and not reported; on a stopped store it is
    what a crash left mid-allocation (the next start removes it).
    """
    if not (path.name.endswith(ALLOCATING_SUFFIX) and path.is_file()):
        return False
    if ctx.live is None:
        ctx.add(WARNING, area, path, None, "an allocation a crash interrupted (removed at start)")
    return True


def sized_files(
    ctx: CheckContext, directory: Path, area: str, name_length: int
) -> Iterator[tuple[Path, int]]:
    """The store files of ``directory`` with their sizes; warn about anything else.

    Args:
        ctx: The check.
        directory: A commitlog, consume-queue or index directory.
        area: Its area, for findings.
        name_length: How many digits its files are named with.

    Yields:
        ``(path, size in bytes)`` in name order; a file that retention removes on a
        live store meanwhile is left out.
    """
    for path in list_files(ctx, directory, area):
        if len(path.name) != name_length:
            ctx.add(WARNING, area, path, None, "not a store file: ignored")
            ctx.count("ignored_files")
            continue
        try:
            actual = path.stat().st_size
        except FileNotFoundError:
            continue  # retention on a live store
        yield path, actual


def wrong_size(
    ctx: CheckContext, area: str, path: Path, offset: int | None, actual: int, expected: str
) -> None:
    """Report a store file whose size is not its kind's.

    A problem when the configured sizes are known to be the store's, else a warning
    (the check may have been given other sizes than the broker's).
    """
    severity = PROBLEM if ctx.sizes_known else WARNING
    ctx.add(severity, area, path, offset, f"{actual} bytes, but {expected}")


def list_files(ctx: CheckContext, directory: Path, area: str) -> list[Path]:
    """The regular files of ``directory`` named by digits; warn about anything else.

    Args:
        ctx: The check.
        directory: A commitlog, consume-queue or index directory.
        area: Its area, for findings.

    Returns:
        Digit-named regular files in name order (lengths are the caller's to judge).
    """
    out = []
    for path in sorted(directory.iterdir()):
        if path.name.isdigit() and path.is_file():
            out.append(path)
        elif note_allocation(ctx, path, area):
            continue
        else:
            ctx.add(WARNING, area, path, None, "not a store file: ignored")
            ctx.count("ignored_files")
    return out
