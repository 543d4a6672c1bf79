"""Committed consumer offsets per (topic, group, queue), persisted as consumerOffset.json.

File shape (RocketMQ ``ConsumerOffsetManager``): ``{"offsetTable": {"topic@group":
{queueId: offset}}}``; RocketMQ writes the queue ids unquoted, we accept both.

Commits are written lazily (:mod:`rocklet.broker.config_writer`): a commit that is
answered awaits :meth:`ConsumerOffsetManager.durable`, and all such commits arriving
together share one write; commits nobody waits for (oneway, or piggybacked on a pull)
are written by the next such write or by the broker's periodic flush
(``flushConsumerOffsetInterval``), whichever comes first.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocklet.broker.config_writer import ConfigWriter
from rocklet.broker.json_file import load_json, persist_json

__all__ = ["ConsumerOffsetManager"]

_SEP = "@"


class ConsumerOffsetManager:
    """In-memory offset table, written to its file by :attr:`writer`.

    Not thread-safe: use it from the event loop.

    Args:
        path: ``<store>/config/consumerOffset.json``.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._table: dict[str, dict[int, int]] = {}
        self.writer: ConfigWriter[dict[str, Any]] = ConfigWriter(
            path.name, self._file_content, self._write_file
        )

    def load(self) -> None:
        """Load the file (or its backup); a missing file means an empty table."""
        obj = load_json(self._path)
        table = obj.get("offsetTable", {}) if isinstance(obj, dict) else {}
        for key, queues in table.items():
            if isinstance(queues, dict):
                self._table[key] = {int(q): int(o) for q, o in queues.items()}

    def replace_from_master(self, table: dict[str, dict[int, int]]) -> None:
        """Take a master's offsets, key by key (a slave's sync: RocketMQ's ``putAll``).

        Args:
            table: ``topic@group`` to queue id to offset, as GET_ALL_CONSUMER_OFFSET has it.
        """
        changed = False
        for key, queues in table.items():
            if self._table.get(key) != queues:
                self._table[key] = dict(queues)
                changed = True
        if changed:
            self.writer.changed(urgent=False)

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
            self.writer.changed(urgent=False)

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
            self.writer.changed(urgent=False)

    def remove_topic(self, topic: str) -> None:
        """Forget every offset on a topic (topic deleted)."""
        for key in [k for k in self._table if k.rpartition(_SEP)[0] == topic]:
            del self._table[key]
            self.writer.changed(urgent=False)

    async def durable(self) -> None:
        """Wait until every change so far is on disk (shared with concurrent callers).

        Raises:
            ConfigWriteError: ``consumerOffset.json`` could not be written.
        """
        await self.writer.durable()

    def _file_content(self) -> dict[str, Any]:
        return {"offsetTable": {k: dict(v) for k, v in self._table.items()}}

    def _write_file(self, content: dict[str, Any]) -> None:
        persist_json(self._path, content)
