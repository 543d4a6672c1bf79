"""Committed consumer offsets per (topic, group, queue), persisted as consumerOffset.json.

File shape (RocketMQ ``ConsumerOffsetManager``): ``{"offsetTable": {"topic@group":
{queueId: offset}}}``; RocketMQ writes the queue ids unquoted, we accept both.

Commits are written lazily (:mod:`rocklet.broker.config_writer`): a commit that is
answered awaits :meth:`ConsumerOffsetManager.durable`, and all such commits arriving
together share one write; commits nobody waits for (oneway, or piggybacked on a pull)
are written by the next such write or by the broker's periodic flush
(``flushConsumerOffsetInterval``), whichever comes first.

Reset stamps (beyond RocketMQ, docs/replication.md "Consumer offsets never move
backwards"): every change that moves a stored offset backwards (a commit lower than the
stored one, which is what resetOffsetByTime and an admin's UPDATE_CONSUMER_OFFSET do)
stamps that queue with the time of the move, never less than its previous stamp + 1.
The stamps are saved in the same file as the offsets (key ``rockletResetStamps``,
written only when there is one; RocketMQ ignores it) and sent with
GET_ALL_CONSUMER_OFFSET, so a slave can tell a deliberate move back (a newer stamp)
from a master that restarted with older offsets (no newer stamp): see
:meth:`ConsumerOffsetManager.take_from_master`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocklet.broker.config_writer import ConfigWriter
from rocklet.broker.json_file import load_json, persist_json
from rocklet.store.config_files import decode_offsets
from rocklet.transport.clock import Clock, SystemClock

__all__ = ["RESET_STAMPS_KEY", "ConsumerOffsetManager"]

_SEP = "@"
#: Where the reset stamps sit in the file and in GET_ALL_CONSUMER_OFFSET's body.
RESET_STAMPS_KEY = "rockletResetStamps"


class ConsumerOffsetManager:
    """In-memory offset table, written to its file by :attr:`writer`.

    Not thread-safe: use it from the event loop.

    Args:
        path: ``<store>/config/consumerOffset.json``.
        clock: Time source of the reset stamps.
    """

    def __init__(self, path: Path, clock: Clock | None = None) -> None:
        self._path = path
        self._clock = clock or SystemClock()
        self._table: dict[str, dict[int, int]] = {}
        #: ``topic@group`` -> queue -> stamp of the latest move backwards (on a slave:
        #: the latest master's stamp taken).
        self._stamps: dict[str, dict[int, int]] = {}
        self.writer: ConfigWriter[dict[str, Any]] = ConfigWriter(
            path.name, self._file_content, self._write_file
        )

    def load(self) -> None:
        """Load the file (or its backup); a missing file means an empty table.

        Raises:
            StoreDamagedError: Neither the file nor its backup is an offset table.
        """
        loaded = load_json(
            self._path, lambda obj: (decode_offsets(obj), decode_offsets(obj, RESET_STAMPS_KEY))
        )
        if loaded is not None:
            self._table, self._stamps = loaded

    def take_from_master(
        self,
        table: dict[str, dict[int, int]],
        stamps: dict[str, dict[int, int]] | None,
    ) -> int:
        """Take a master's offsets (a slave's sync).

        With ``stamps`` (a Rocklet master), per queue: the master's offset is taken when
        it is ahead of the slave's, or when the master's reset stamp for the queue is
        newer than the last one taken (a deliberate move back, which then wins even if
        lower); otherwise the slave keeps its offset, so a master that came back with
        older offsets (a restart after a crash, a restored disk) never moves the slave
        back, and offsets consumers committed on the slave while the master was gone
        are kept. Without ``stamps`` (a RocketMQ master, which sends none) the master's
        offsets overwrite the slave's key by key, RocketMQ's ``putAll``.

        Args:
            table: ``topic@group`` to queue id to offset, as GET_ALL_CONSUMER_OFFSET has it.
            stamps: The master's reset stamps, same keys; ``None`` when it sent none.

        Returns:
            How many queue offsets the slave kept above the master's.
        """
        changed = False
        kept = 0
        for key, queues in table.items():
            if stamps is None:
                if self._table.get(key) != queues:
                    self._table[key] = dict(queues)
                    changed = True
                continue
            mine = self._table.setdefault(key, {})
            theirs = stamps.get(key, {})
            seen = self._stamps.setdefault(key, {})
            for queue_id, offset in queues.items():
                stamp = theirs.get(queue_id, 0)
                newer = stamp > seen.get(queue_id, 0)
                current = mine.get(queue_id)
                if current is None or offset > current or (newer and offset != current):
                    mine[queue_id] = offset
                    changed = True
                elif offset < current:
                    kept += 1
                if newer:
                    seen[queue_id] = stamp
                    changed = True
        if changed:
            self.writer.changed(urgent=False)
        return kept

    def reset_stamps(self) -> dict[str, dict[int, int]]:
        """Return a copy of the reset stamps (for GET_ALL_CONSUMER_OFFSET)."""
        return {key: dict(queues) for key, queues in self._stamps.items() if queues}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record a group's offset for a queue (the next message it will consume).

        Args:
            group: Consumer group.
            topic: Topic.
            queue_id: Queue id.
            offset: Offset to store.
        """
        key = f"{topic}{_SEP}{group}"
        queues = self._table.setdefault(key, {})
        current = queues.get(queue_id)
        if current != offset:
            if current is not None and offset < current:
                self._stamp(key, queue_id)
            queues[queue_id] = offset
            self.writer.changed(urgent=False)

    def _stamp(self, key: str, queue_id: int) -> None:
        # Strictly increasing per queue even if the clock stalls or steps back.
        stamps = self._stamps.setdefault(key, {})
        stamps[queue_id] = max(self._clock.now_ms(), stamps.get(queue_id, 0) + 1)

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
            self._stamps.pop(key, None)
            self.writer.changed(urgent=False)

    def remove_topic(self, topic: str) -> None:
        """Forget every offset on a topic (topic deleted)."""
        for key in [k for k in self._table if k.rpartition(_SEP)[0] == topic]:
            del self._table[key]
            self._stamps.pop(key, None)
            self.writer.changed(urgent=False)

    async def durable(self) -> None:
        """Wait until every change so far is on disk (shared with concurrent callers).

        Raises:
            ConfigWriteError: ``consumerOffset.json`` could not be written.
        """
        await self.writer.durable()

    def _file_content(self) -> dict[str, Any]:
        content: dict[str, Any] = {"offsetTable": {k: dict(v) for k, v in self._table.items()}}
        stamps = self.reset_stamps()
        if stamps:  # files without resets stay exactly RocketMQ's shape
            content[RESET_STAMPS_KEY] = stamps
        return content

    def _write_file(self, content: dict[str, Any]) -> None:
        persist_json(self._path, content)
