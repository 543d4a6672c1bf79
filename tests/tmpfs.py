"""Small file systems for full-disk tests: a tmpfs of a given size, always unmounted.

Mounting needs root (the test machines run as root). Where it is impossible the test
fails and says why: a skip would hide that the full-disk behaviour went untested.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["fill", "free_bytes", "mounted_tmpfs"]


@contextmanager
def mounted_tmpfs(path: Path, size_bytes: int) -> Iterator[Path]:
    """Mount a tmpfs of ``size_bytes`` on ``path`` (created) and unmount it afterwards.

    Whatever still has files open there (a store, a killed process's maps) is the
    caller's to close first; if the file system is still busy it is detached lazily,
    so a failing test never leaves a mount behind.

    Args:
        path: The mount point.
        size_bytes: The file system's size.

    Yields:
        ``path``, now an empty file system of that size.
    """
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.fail(f"a full-disk test mounts a tmpfs and needs root (uid is {os.geteuid()})")
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755", "tmpfs", str(path)]
    try:
        done = subprocess.run(mount, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        pytest.fail("a full-disk test mounts a tmpfs and needs the mount command")
    if done.returncode != 0:
        pytest.fail(f"cannot mount a {size_bytes}-byte tmpfs on {path}: {done.stderr.strip()}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def free_bytes(path: Path) -> int:
    """Bytes the current user can still write on ``path``'s file system."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(path: Path, leave: int = 0) -> int:
    """Create ``path`` (a ballast file) taking all the room but ``leave`` bytes.

    Args:
        path: The ballast file (must not exist).
        leave: Bytes to leave free (rounded to the block size by the file system).

    Returns:
        The ballast's size.
    """
    size = max(0, free_bytes(path.parent) - leave)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        if size:
            os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)
    return size
