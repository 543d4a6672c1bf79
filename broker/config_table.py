"""What the topic and group tables share: configs by name in one JSON file.

Both files have RocketMQ's shape (``{"dataVersion": ..., "<table>": {name: config}}``),
both bump the data version on every change, and both save through one
:class:`~rocklet.broker.config_writer.ConfigWriter` with the changed names listed in
:attr:`ConfigTable.unsaved` until their write is durable. The subclasses add what
differs: their system entries, creation rules and the file's snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from rocklet.broker.config_writer import ConfigWriteError, ConfigWriter
from rocklet.broker.json_file import load_json
from rocklet.protocol.bodies.topic import DataVersion
from rocklet.protocol.errors import BodyError
from rocklet.store.config_files import decode_table
from rocklet.transport.clock import Clock

__all__ = ["ConfigTable"]

C = TypeVar("C")
S = TypeVar("S")


class ConfigTable(Generic[C, S]):
    """Configs of type ``C`` by name, written as snapshots of type ``S``. Event loop only.

    Args:
        path: The JSON file.
        clock: Time source for data versions.
        parse: One config from its JSON object (raises ``BodyError`` when malformed).
    """

    #: The file's key of the table (``topicConfigTable``, ``subscriptionGroupTable``).
    TABLE_KEY: ClassVar[str]

    def __init__(self, path: Path, clock: Clock, parse: Callable[[Any], C]) -> None:
        self._path = path
        self._clock = clock
        self._parse = parse
        self._table: dict[str, C] = {}
        self.data_version = DataVersion()
        #: Called after any change (the topic table re-registers with name servers).
        self.on_change: Callable[[], None] | None = None
        #: Names whose latest change is not on disk yet -> that change's generation.
        #: Empty almost always: hot paths test it before calling :meth:`saved`.
        self.unsaved: dict[str, int] = {}
        # Names in unsaved -> their config on disk (None: not there), to undo a change
        # whose write failed: what is served must be what a restart would load.
        self._on_disk: dict[str, C | None] = {}
        self.writer: ConfigWriter[S] = ConfigWriter(path.name, self.wrapper, self._write_file)
        self.writer.on_saved = self._forget_saved

    def wrapper(self) -> S:
        """The snapshot the writer saves (and the admin GET_ALL_* answer)."""
        raise NotImplementedError

    def _write_file(self, snapshot: S) -> None:
        raise NotImplementedError

    def _loads(self, name: str) -> bool:
        """Whether an entry of the file is taken on load (all by default)."""
        return True

    def load(self) -> None:
        """Load the file, or its backup when the file is not a table.

        Raises:
            StoreDamagedError: Neither is a table (an entry that does not read makes
                the whole file unusable, as in RocketMQ: skipping it would forget it).
        """

        def decode(obj: Any) -> tuple[dict[str, C], DataVersion]:
            table = decode_table(obj, self.TABLE_KEY, self._parse)
            try:
                version = DataVersion.from_dict(obj.get("dataVersion", {}))
            except BodyError:
                version = DataVersion()  # only orders changes; the next one renews it
            return table, version

        loaded = load_json(self._path, decode)
        if loaded is None:
            return
        table, self.data_version = loaded
        self._table.update((n, c) for n, c in table.items() if self._loads(n))

    def _replace(self, table: Mapping[str, C], version: DataVersion) -> bool:
        """Take a master's whole table unless its data version is the one held."""
        if version == self.data_version:
            return False
        self._table = dict(table)
        self.data_version = version
        generation = self.writer.changed(urgent=True)
        for name in self._table:
            self.unsaved[name] = generation
        if self.on_change is not None:
            self.on_change()
        return True

    def delete(self, name: str) -> bool:
        """Delete an entry; returns whether it existed."""
        if name not in self._table:
            return False
        self._put(name, None)
        return True

    def _put(self, name: str, config: C | None) -> None:
        """Set (or with ``None`` remove) an entry and schedule the file's write."""
        if name not in self.unsaved:
            self._on_disk[name] = self._table.get(name)
        if config is None:
            del self._table[name]
        else:
            self._table[name] = config
        self._changed(name)

    async def saved(self, *names: str) -> None:
        """Wait until the latest change of each named entry is on disk.

        Returns at once for names not in :attr:`unsaved`. When the write fails, the
        changes of ``names`` are undone in memory (and the name servers told), so the
        broker does not serve a topic or group that a restart would not have.

        Raises:
            ConfigWriteError: The file could not be written.
        """
        unsaved = self.unsaved
        pending = [unsaved[n] for n in names if n in unsaved]
        if not pending:
            return
        try:
            await self.writer.durable(max(pending))
        except ConfigWriteError:
            self._undo([n for n in names if n in self.unsaved])
            raise

    def _undo(self, names: list[str]) -> None:
        undone = False
        for name in names:
            if name not in self._on_disk:
                continue  # a master's whole table (a slave's sync): retried as a whole
            before = self._on_disk.pop(name)
            del self.unsaved[name]
            if before is None:
                self._table.pop(name, None)
            else:
                self._table[name] = before
            undone = True
        if undone:
            self.data_version = self.data_version.next_version(self._clock.now_ms())
            if self.on_change is not None:
                self.on_change()

    def _forget_saved(self, generation: int) -> None:
        for name in [n for n, gen in self.unsaved.items() if gen <= generation]:
            del self.unsaved[name]
            self._on_disk.pop(name, None)

    def _changed(self, name: str) -> None:
        self.data_version = self.data_version.next_version(self._clock.now_ms())
        self.unsaved[name] = self.writer.changed(urgent=True)
        if self.on_change is not None:
            self.on_change()
