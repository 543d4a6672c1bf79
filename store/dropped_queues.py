"""Queues dropped on purpose, so that no start or dispatch brings their records back.

``deleteTopic`` and ``cleanUnusedTopic`` delete a topic's consume-queue files, but the
topic's records stay in the commitlog until retention removes them. Without a record of
the drop, those records look like a queue whose files were lost: recovery would
dispatch the whole commitlog again to rebuild it, and the deleted topic (or a topic
made again under the same name) would get its old messages back.

So each drop is written down first, in ``droppedQueues.json`` in the store root (a file
RocketMQ ignores): per queue, the commitlog end at the drop. A record of that queue
below its mark belongs to the dropped queue; one at or above it to a queue made since.
A mark is forgotten once retention has deleted everything below it.

The file is small and rewritten whole, atomically and durably
(:func:`~rocklet.store.durable_file.replace_file`), before any file of the queue is
deleted: a crash in between leaves the queue's files with a mark, which only means the
records below the mark are not dispatched to it again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import structlog

from rocklet.store.durable_file import replace_file

__all__ = ["FILE_NAME", "DroppedQueues"]

log = structlog.get_logger(__name__)

#: The file, in the store root.
FILE_NAME: Final = "droppedQueues.json"


class DroppedQueues:
    """The marks of dropped queues: (topic, queue id) → commitlog end at the drop.

    Read by recovery and by dispatch (one truthiness test per record while there are
    no marks); changed under the store lock.

    Args:
        path: The file.
        marks: The marks read from it.
    """

    __slots__ = ("marks", "path")

    def __init__(self, path: Path, marks: dict[tuple[str, int], int] | None = None) -> None:
        self.path = path
        self.marks: dict[tuple[str, int], int] = marks or {}

    @classmethod
    def load(cls, root: Path) -> DroppedQueues:
        """Read the marks of the store at ``root`` (none when the file is missing).

        A file that does not parse (or its ``.bak``) is logged and read as empty: the
        worst it costs is a rebuild of dropped queues, never a record.
        """
        path = root / FILE_NAME
        for candidate in (path, path.with_name(FILE_NAME + ".bak")):
            try:
                return cls(path, _decode(candidate.read_bytes()))
            except FileNotFoundError:
                continue
            except (ValueError, TypeError, KeyError) as exc:
                log.warning("dropped-queue marks unreadable", path=str(candidate), error=str(exc))
        return cls(path)

    def below(self, key: tuple[str, int], commitlog_offset: int) -> bool:
        """Whether the record at ``commitlog_offset`` belongs to a dropped queue ``key``."""
        return commitlog_offset < self.marks.get(key, -1)

    def add(self, keys: list[tuple[str, int]], end: int, min_offset: int) -> None:
        """Mark ``keys`` dropped at commitlog end ``end``, on disk before returning.

        Args:
            keys: The queues about to be dropped.
            end: The commitlog's end now (every record of theirs lies below it).
            min_offset: The commitlog's min offset: marks at or below it are forgotten.

        Raises:
            OSError: The file could not be written (drop nothing then).
        """
        marks = {k: v for k, v in self.marks.items() if v > min_offset}
        for key in keys:
            marks[key] = max(end, marks.get(key, 0))
        replace_file(self.path, _encode(marks))
        self.marks = marks

    def forget_below(self, min_offset: int) -> None:
        """Forget, in memory, marks retention made useless (the file follows at the next drop)."""
        if any(v <= min_offset for v in self.marks.values()):
            self.marks = {k: v for k, v in self.marks.items() if v > min_offset}


def _encode(marks: dict[tuple[str, int], int]) -> bytes:
    rows = [[topic, queue_id, end] for (topic, queue_id), end in sorted(marks.items())]
    return json.dumps({"version": 1, "queues": rows}).encode()


def _decode(raw: bytes) -> dict[tuple[str, int], int]:
    doc = json.loads(raw)
    marks: dict[tuple[str, int], int] = {}
    for topic, queue_id, end in doc["queues"]:
        if not (isinstance(topic, str) and type(queue_id) is int and type(end) is int):
            raise ValueError(f"bad row {[topic, queue_id, end]!r}")
        marks[(topic, queue_id)] = end
    return marks
