"""Committed consumer offsets per (topic, group, queue), persisted as consumerOffset.json.

File shape (RocketMQ ``ConsumerOffsetManager``): ``{"offsetTable": {"topic@group":
{queueId: offset}}}``; RocketMQ writes the queue ids unquoted, we accept both.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocklet.broker.json_file import load_json, persist_json

__all__ = ["ConsumerOffsetManager"]

_SEP = "@"


class ConsumerOffsetManager:
    """In-memory offset table with explicit persistence.

    Not thread-safe: mutate it from the event loop; :meth:`snapshot` gives a copy that
    a worker thread can write with :meth:`persist_snapshot`.

    Args:
        path: ``<store>/config/consumerOffset.json``.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._table: dict[str, dict[int, int]] = {}
        self._dirty = False

    def load(self) -> None:
        """Load the file (or its backup); a missing file means an empty table."""
        obj = load_json(self._path)
        table = obj.get("offsetTable", {}) if isinstance(obj, dict) else {}
        for key, queues in table.items():
            if isinstance(queues, dict):
                self._table[key] = {int(q): int(o) for q, o in queues.items()}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record a group's offset for a queue (the next message it will consume).

        Args:
            group: Consumer group.
            topic: Topic.
            queue_id: Queue id.
            offset: Offset to store.
        """
        queues = self._table.setdefault(f"{topic}{_SEP}{group}", {})
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """Return the committed offset, or ``None`` when the group never committed one."""
        return self._table.get(f"{topic}{_SEP}{group}", {}).get(queue_id)

    def offsets_of(self, group: str, topic: str) -> dict[int, int]:
        """Return a copy of every committed queue offset of a group on a topic."""
        return dict(self._table.get(f"{topic}{_SEP}{group}", {}))

    def topics_of(self, group: str) -> list[str]:
        """Return the topics a group has offsets for."""
        return [k.rpartition(_SEP)[0] for k in self._table if k.rpartition(_SEP)[2] == group]

    def groups_of(self, topic: str) -> list[str]:
        """Return the groups with offsets on a topic."""
        return [k.rpartition(_SEP)[2] for k in self._table if k.rpartition(_SEP)[0] == topic]

    def entries(self) -> Iterator[tuple[str, str, dict[int, int]]]:
        """Yield ``(topic, group, {queue: offset})`` for every entry."""
        for key, queues in self._table.items():
            topic, _, group = key.rpartition(_SEP)
            yield topic, group, dict(queues)

    def remove_group(self, group: str) -> None:
        """Forget every offset of a group (subscription group deleted)."""
        for key in [k for k in self._table if k.rpartition(_SEP)[2] == group]:
            del self._table[key]
            self._dirty = True

    def remove_topic(self, topic: str) -> None:
        """Forget every offset on a topic (topic deleted)."""
        for key in [k for k in self._table if k.rpartition(_SEP)[0] == topic]:
            del self._table[key]
            self._dirty = True

    def snapshot(self) -> dict[str, Any] | None:
        """Return the file content if anything changed since the last snapshot."""
        if not self._dirty:
            return None
        self._dirty = False
        return {"offsetTable": {k: dict(v) for k, v in self._table.items()}}

    def persist_snapshot(self, snapshot: dict[str, Any]) -> None:
        """Write a snapshot to disk (blocking; call from a worker thread)."""
        persist_json(self._path, snapshot)
