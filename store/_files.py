"""Creating and deleting a store's files: names, reserved blocks, install, unlink.

A segment (commitlog, consume queue, index) is made under a temporary name with its
blocks reserved and synced, then renamed into place and its directory synced, so a
crash leaves no file or a whole one, and a full disk fails when a file is created,
not at a later page fault of its map.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Protocol

__all__ = [
    "ALLOCATING_SUFFIX",
    "NoSpaceError",
    "allocate_file",
    "close_and_unlink",
    "fsync_directory",
    "install_file",
    "offset_name",
    "reserve_file",
    "unlink_all",
]


def offset_name(offset: int) -> str:
    """Name of a file starting at ``offset``: 20 zero-padded digits.

    Args:
        offset: Global offset of the file's first byte.

    Returns:
        The file name.
    """
    return f"{offset:020d}"


#: Suffix of a file being allocated (see :func:`allocate_file`); never a finished file.
ALLOCATING_SUFFIX = ".allocating"


def fsync_directory(directory: Path) -> None:
    """Make the directory's entries (a create, a rename) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: Errors that mean "the file system has no room" (a quota counts as no room).
_NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class NoSpaceError(OSError):
    """A new store file could not be reserved: its file system has no room for it.

    Attributes:
        path: The file that could not be created.
        size: Its size in bytes (the room a retry needs).
    """

    def __init__(self, path: Path, size: int, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror, str(path))
        self.path = path
        self.size = size


def reserve_file(path: Path, size: int) -> Path:
    """Reserve ``size`` bytes on disk for ``path`` under its allocating name.

    The blocks are reserved with ``posix_fallocate`` and synced, so writes into the file
    (through ``pwrite`` or the map) never need room again: a full disk fails here, with
    ``ENOSPC``, rather than with ``SIGBUS`` at a later page fault of the map. The file
    stays under ``<name>.allocating`` (deleted when a store loads) until
    :func:`install_file` gives it its name.

    Args:
        path: The final path.
        size: The file's size in bytes.

    Returns:
        The reserved file's temporary path.

    Raises:
        NoSpaceError: The file system has no room (``ENOSPC``, ``EDQUOT``); nothing is
            left behind.
        OSError: Another failure; nothing is left behind either.
    """
    tmp = path.with_name(path.name + ALLOCATING_SUFFIX)
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as exc:
            # A file system that cannot reserve blocks still gets a file of the right
            # size (sparse), as before; anything else (ENOSPC) is the caller's answer.
            if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise
            os.ftruncate(fd, size)
        os.fsync(fd)
    except BaseException as exc:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in _NO_SPACE_ERRNOS:
            raise NoSpaceError(path, size, exc) from exc
        raise
    os.close(fd)
    return tmp


def install_file(reserved: Path, path: Path) -> None:
    """Give a file reserved by :func:`reserve_file` its final name, durably.

    A rename needs no new blocks, so this does not fail for want of room.

    Args:
        reserved: The temporary path :func:`reserve_file` returned.
        path: The final path.
    """
    os.replace(reserved, path)
    fsync_directory(path.parent)


def allocate_file(path: Path, size: int) -> None:
    """Create ``path`` with ``size`` bytes reserved on disk, all or nothing.

    The file is built under a temporary name (:func:`reserve_file`) and renamed into
    place: a crash leaves either no file or a whole one (a zero-length segment after a
    crash used to stop the next start).

    Args:
        path: The final path; must not exist.
        size: Its size in bytes.

    Raises:
        NoSpaceError: The file system has no room for it.
        OSError: The file cannot be written.
    """
    install_file(reserve_file(path, size), path)


class _Closable(Protocol):
    @property
    def path(self) -> Path: ...

    def try_close(self) -> bool: ...


def close_and_unlink(f: _Closable, unlink_later: list[Path] | None) -> bool:
    """Close a segment dropped from its queue, then unlink it now or list it for later.

    Args:
        f: A mapped segment (commitlog, consume queue or index).
        unlink_later: Where to put its path for :func:`unlink_all` once the caller has
            released the store lock; ``None`` unlinks it now.

    Returns:
        False when readers still hold views of it: nothing was done, try again later.
    """
    if not f.try_close():
        return False
    if unlink_later is None:
        f.path.unlink(missing_ok=True)
    else:
        unlink_later.append(f.path)
    return True


def unlink_all(paths: list[Path]) -> None:
    """Delete the files :func:`close_and_unlink` listed; clears ``paths``.

    Called after the store lock is released: on ext4 unlinking a 1 GiB segment frees
    its blocks in the call, 65-290 ms on our test VM, and under the lock every put and
    pull would wait for it.
    """
    for path in paths:
        path.unlink(missing_ok=True)
    paths.clear()
