"""Saving updates to a Java properties file (broker.conf, namesrv.conf).

The text itself is read, written and edited by :mod:`rocklet.protocol.properties_text`;
here is the file side UPDATE_BROKER_CONFIG and UPDATE_NAMESRV_CONFIG share.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from pathlib import Path

from rocklet.protocol.properties_text import rewrite_properties
from rocklet.store.durable_file import replace_file

__all__ = ["save_properties"]


def save_properties(path: Path, updates: Mapping[str, str], *, new_mode: int) -> None:
    """Set ``updates`` in the file, keeping the rest of its text; blocking (a thread).

    As ``MixAll.string2File``: ``FILE.tmp``, the old file kept as ``FILE.bak``, rename
    (plus the fsyncs :func:`~rocklet.store.durable_file.replace_file` adds). The file
    keeps its permissions (it may hold a secret).

    Args:
        path: The file; created when it does not exist.
        updates: Property name to new value.
        new_mode: Permission bits of a file that has to be created.

    Raises:
        OSError: The file could not be read or written.
        UnicodeError: The file is not UTF-8.
    """
    try:
        text = path.read_text(encoding="utf-8")
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        text, mode = "", new_mode
    replace_file(path, rewrite_properties(text, updates).encode("utf-8"), mode=mode)
