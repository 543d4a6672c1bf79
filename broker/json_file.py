"""Durable JSON config files under ``<store>/config/`` (topics, offsets, groups).

RocketMQ's ``ConfigManager.persist`` writes the new text to a temp file, keeps the
previous version as ``<name>.bak`` and renames; on load it falls back to the ``.bak``
when the main file is missing or unreadable. We do the same, adding an fsync of the
temp file and of the directory (:func:`rocklet.store.durable_file.replace_file`), so
the file is on disk when :func:`persist_json` returns and a crash never leaves a
half-written config behind. When neither file is a table (not JSON, or JSON of another
shape), the broker refuses to start, as RocketMQ does, rather than start empty and
overwrite both at the next change.
Files RocketMQ wrote use fastjson's unquoted integer keys; :mod:`rocklet.protocol.fastjson`
reads both styles, and we write standard JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import structlog

from rocklet.protocol import fastjson
from rocklet.store.directory import StoreDamagedError
from rocklet.store.durable_file import replace_file

__all__ = ["load_json", "persist_json"]

log = structlog.get_logger(__name__)
T = TypeVar("T")


def _as_is(obj: Any) -> Any:
    return obj


def load_json(path: Path, decode: Callable[[Any], T] = _as_is) -> T | None:
    """Read a config file, falling back to its ``.bak`` copy.

    Not thread-safe; call it from the thread that owns the manager.

    Args:
        path: The file, e.g. ``config/consumerOffset.json``.
        decode: Turns the parsed JSON into the table; raises ``ValueError`` when it is
            not one (:mod:`rocklet.store.config_files`).

    Returns:
        The decoded file, else its decoded backup; ``None`` when neither exists or
        both are empty (a new store).

    Raises:
        StoreDamagedError: One of them has content but neither decodes. Starting
            empty would forget every entry and overwrite the file at the next change.
    """
    problems: list[str] = []
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{candidate.name}: {exc}")
            continue
        if not text.strip():
            continue
        try:
            value = decode(fastjson.loads(text))
        except ValueError as exc:  # JSON syntax, or not the table the file holds
            log.warning("config file unusable", path=str(candidate), error=str(exc))
            problems.append(f"{candidate.name}: {exc}")
            continue
        if problems:
            log.warning("config file read from its backup", path=str(candidate))
        return value
    if problems:
        raise StoreDamagedError(
            f"{path} cannot be read ({'; '.join(problems)}): repair it or restore it from "
            "a backup; a broker started without it would forget what it holds"
        )
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
