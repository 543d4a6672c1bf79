"""Durable JSON config files under ``<store>/config/`` (topics, offsets, groups).

RocketMQ's ``ConfigManager.persist`` writes the new text to a temp file, keeps the
previous version as ``<name>.bak`` and renames; on load it falls back to the ``.bak``
when the main file is missing or unreadable. We do the same, adding an fsync of the
temp file and of the directory (:func:`rocklet.store.durable_file.replace_file`), so
the file is on disk when :func:`persist_json` returns and a crash never leaves a
half-written config behind.
Files RocketMQ wrote use fastjson's unquoted integer keys; :mod:`rocklet.protocol.fastjson`
reads both styles, and we write standard JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from rocklet.protocol import fastjson
from rocklet.store.durable_file import replace_file

__all__ = ["load_json", "persist_json"]

log = structlog.get_logger(__name__)


def load_json(path: Path) -> Any | None:
    """Read a config file, falling back to its ``.bak`` copy.

    Not thread-safe; call it from the thread that owns the manager.

    Args:
        path: The file, e.g. ``config/consumerOffset.json``.

    Returns:
        The decoded JSON, or ``None`` when neither the file nor its backup is usable.
    """
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        if not text.strip():
            continue
        try:
            return fastjson.loads(text)
        except ValueError as exc:
            log.warning("config file unreadable", path=str(candidate), error=str(exc))
    return None


def persist_json(path: Path, obj: Any) -> None:
    """Write a config file atomically, keeping the previous version as ``.bak``.

    Blocking (fsync): the broker calls it from a worker thread, never on the loop.

    Args:
        path: Destination file; its directory is created if needed.
        obj: A JSON-serializable value.

    Raises:
        OSError: The file could not be written (the previous version stays).
    """
    replace_file(path, fastjson.dumps(obj).encode())
