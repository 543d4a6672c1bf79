"""The name server's key/value configuration (RocketMQ's ``KVConfigManager``).

Namespaces of string pairs; ``ORDER_TOPIC_CONFIG`` is the one RocketMQ itself reads
(``brokerName:queueNums`` per ordered topic). Not thread-safe: the event loop owns it.

With a file (``kvConfigPath``) the table is RocketMQ's ``kvConfig.json``
(``{"configTable": {namespace: {key: value}}}``), so a name server replacing a RocketMQ
one keeps its table. Each change is written by a
:class:`~rocklet.broker.config_writer.ConfigWriter` (temp file, fsync, rename, previous
version kept as ``.bak``); the processors answer a PUT or DELETE only once it is on
disk, where RocketMQ answers first and logs a failed write. Without a file the table
lives in memory (a name server used as a library, tests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import structlog

from rocklet.broker.config import ConfigError
from rocklet.broker.config_writer import ConfigWriter
from rocklet.broker.json_file import load_json, persist_json
from rocklet.protocol.names import ORDER_TOPIC_CONFIG
from rocklet.store.directory import StoreDamagedError

__all__ = ["ORDER_TOPIC_CONFIG", "KVConfigManager"]

log = structlog.get_logger(__name__)

#: The file's one key (RocketMQ's ``KVConfigSerializeWrapper``).
_TABLE_KEY: Final = "configTable"


class KVConfigManager:
    """Namespace -> key -> value, optionally kept in a file.

    Args:
        path: RocketMQ's ``kvConfig.json`` to load and keep up to date; ``None``: the
            table lives in memory only.
    """

    def __init__(self, path: Path | None = None) -> None:
        self._table: dict[str, dict[str, str]] = {}
        self.path = path
        #: Writes the file (``None`` without one); await :meth:`saved` after a change.
        self.writer: ConfigWriter[dict[str, Any]] | None = None
        if path is not None:
            self.writer = ConfigWriter(path.name, self._snapshot, self._write)

    def load(self) -> int:
        """Read the file (or its ``.bak``); a missing file is an empty table.

        Returns:
            The number of pairs loaded.

        Raises:
            ConfigError: The file exists but neither it nor its backup is a table:
                starting empty would overwrite it at the next change.
        """
        if self.path is None:
            return 0
        backup = self.path.with_name(self.path.name + ".bak")
        try:
            obj = load_json(self.path)
        except StoreDamagedError:
            obj = None
        if obj is None:
            if self.path.exists() or backup.exists():
                raise ConfigError(_damaged(self.path, "not JSON"))
            return 0
        # "{}" is an empty table too (written by hand; RocketMQ writes the key).
        table = obj.get(_TABLE_KEY, {} if obj == {} else None) if isinstance(obj, dict) else None
        if not isinstance(table, dict) or not all(
            isinstance(ns, str)
            and isinstance(pairs, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in pairs.items())
            for ns, pairs in table.items()
        ):
            raise ConfigError(_damaged(self.path, f'no "{_TABLE_KEY}" of string pairs'))
        self._table = {ns: dict(pairs) for ns, pairs in table.items() if pairs}
        return sum(len(pairs) for pairs in self._table.values())

    def put(self, namespace: str, key: str, value: str) -> int:
        """Set a value.

        Args:
            namespace: The namespace.
            key: The key.
            value: The value.

        Returns:
            The change's generation, for :meth:`saved` (0 without a file).
        """
        self._table.setdefault(namespace, {})[key] = value
        return self._changed()

    def get(self, namespace: str, key: str) -> str | None:
        """Read a value.

        Args:
            namespace: The namespace.
            key: The key.

        Returns:
            The value, or ``None``.
        """
        return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> int:
        """Remove a value (absent keys are fine); an emptied namespace disappears.

        Args:
            namespace: The namespace.
            key: The key.

        Returns:
            The change's generation, for :meth:`saved` (0 when nothing changed or
            without a file).
        """
        entries = self._table.get(namespace)
        if entries is None or entries.pop(key, None) is None:
            return 0
        if not entries:
            del self._table[namespace]
        return self._changed()

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """Every pair of a namespace.

        Args:
            namespace: The namespace.

        Returns:
            A copy of its pairs, or ``None`` when it has none.
        """
        entries = self._table.get(namespace)
        return None if entries is None else dict(entries)

    async def saved(self, generation: int) -> None:
        """Wait until the change of ``generation`` is on disk (at once without a file).

        Raises:
            ConfigWriteError: The file could not be written; the change is in memory.
        """
        if self.writer is not None and generation:
            await self.writer.durable(generation)

    async def flush(self) -> None:
        """Write whatever is not on disk yet (the name server's stop).

        Raises:
            ConfigWriteError: The file could not be written.
        """
        if self.writer is not None:
            await self.writer.flush()

    def _changed(self) -> int:
        return 0 if self.writer is None else self.writer.changed(urgent=True)

    def _snapshot(self) -> dict[str, Any]:
        return {_TABLE_KEY: {ns: dict(pairs) for ns, pairs in self._table.items()}}

    def _write(self, snapshot: dict[str, Any]) -> None:
        assert self.path is not None
        persist_json(self.path, snapshot)


def _damaged(path: Path, why: str) -> str:
    return (
        f"the KV config file {path} is damaged ({why}), and so is its .bak or there is "
        "none: repair it, or move it away to start with an empty KV table"
    )
