"""Replacing a small file durably and atomically (config and offset files).

RocketMQ's ``MixAll.string2File`` writes ``<name>.tmp``, keeps the previous content as
``<name>.bak`` and renames the temp file over ``<name>``; its readers fall back to the
``.bak`` when the file is missing or unreadable. We do the same and add the two fsyncs
it leaves out (of the temp file before the rename, of the directory after it), so the
new content is on disk when this returns and a crash at any point leaves either the old
or the new version readable, never a torn one.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["replace_file"]


def replace_file(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` atomically and durably, keeping the old file as ``.bak``.

    Blocking (two fsyncs): call it from a worker thread, never on an event loop.

    Args:
        path: Destination file; its directory is created if needed.
        data: The new content.
        mode: Permission bits of the new file, set when the temp file is created (so a
            file holding secrets is never readable by others, not even for a moment);
            ``None``: the process umask's default.

    Raises:
        OSError: The file could not be written; the previous version is still there
            (as ``path`` or ``path.bak``).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if mode is not None:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()  # a stale temp file would keep its own, wider, mode
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode))
        os.chmod(tmp, mode)  # the umask may have narrowed it; set exactly what was asked
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    if path.exists():
        # Between these two renames only the .bak exists, and readers fall back to it.
        os.replace(path, path.with_name(path.name + ".bak"))
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
