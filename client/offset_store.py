"""Where a consumer keeps its consume offsets: on the broker, or in a local file.

* :class:`RemoteOffsetStore` (clustering, RocketMQ's ``RemoteBrokerOffsetStore``):
  offsets live in memory and are committed to the queue's master broker with
  UPDATE_CONSUMER_OFFSET (15); a queue new to this consumer reads its committed offset
  with QUERY_CONSUMER_OFFSET (14). The broker is the truth, because another consumer
  of the group takes the queue over after a rebalance.
* :class:`LocalFileOffsetStore` (broadcasting, ``LocalFileOffsetStore``): every
  consumer reads every message, so each keeps its own offsets, in one JSON file per
  group written atomically (temporary file, fsync, rename). The file uses Java's
  ``OffsetSerializeWrapper`` form, ``{"offsetTable":{<MessageQueue>:offset}}``.

Both are used from the event loop only; file I/O runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Final, Protocol

from rocklet.client.brokers import BrokerInvoker
from rocklet.client.errors import NoRouteError, error_for_code
from rocklet.protocol.bodies.consumer import ResetOffsetBody
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import BodyError
from rocklet.protocol.headers.consumer import (
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocklet.transport.logs import get_logger

__all__ = [
    "DEFAULT_OFFSETS_DIR",
    "BrokerInvoker",
    "LocalFileOffsetStore",
    "OffsetStore",
    "RemoteOffsetStore",
]

_log = get_logger(__name__)

#: Where broadcasting consumers keep offset files unless told otherwise.
DEFAULT_OFFSETS_DIR: Final = Path.home() / ".rocklet" / "offsets"


class OffsetStore(Protocol):
    """What consumers need from an offset store."""

    async def load(self) -> None:
        """Read persisted offsets (a no-op for the remote store)."""
        ...

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        """Set the in-memory offset of ``mq``."""
        ...

    def read_memory(self, mq: MessageQueue) -> int | None:
        """The in-memory offset of ``mq``, or ``None``."""
        ...

    async def read_store(self, mq: MessageQueue) -> int | None:
        """The persisted offset of ``mq`` (also kept in memory), or ``None`` if none."""
        ...

    async def persist(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the in-memory offsets of ``mqs`` to where they are kept."""
        ...

    def remove(self, mq: MessageQueue) -> None:
        """Forget ``mq``'s in-memory offset."""
        ...

    def snapshot(self) -> dict[MessageQueue, int]:
        """Every in-memory offset."""
        ...

    def topic_snapshot(self, topic: str) -> dict[MessageQueue, int]:
        """The in-memory offsets of ``topic``'s queues (every queue's if ``topic`` is blank)."""
        ...


class _MemoryOffsets:
    """The in-memory table both stores share."""

    def __init__(self) -> None:
        self._table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        """Set ``mq``'s offset; with ``increase_only`` an older offset is ignored.

        Concurrent listeners finish out of order, so a late commit of a smaller offset
        must not move the offset back (Java's ``updateOffset(..., increaseOnly)``).

        Args:
            mq: The queue.
            offset: The next offset to consume.
            increase_only: Ignore ``offset`` when it is below the current one.
        """
        if offset < 0:
            return
        current = self._table.get(mq)
        if current is None or not increase_only or offset > current:
            self._table[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int | None:
        """Return ``mq``'s in-memory offset, or ``None``."""
        return self._table.get(mq)

    def remove(self, mq: MessageQueue) -> None:
        """Forget ``mq``."""
        self._table.pop(mq, None)

    def snapshot(self) -> dict[MessageQueue, int]:
        """Return a copy of every in-memory offset."""
        return dict(self._table)

    def topic_snapshot(self, topic: str) -> dict[MessageQueue, int]:
        """Return a copy of the offsets of ``topic``'s queues; all of them for a blank topic.

        What a consumer answers GET_CONSUMER_STATUS_FROM_CLIENT with (Java's
        ``cloneOffsetTable``, which treats a blank topic as every topic).
        """
        if not topic.strip():
            return dict(self._table)
        return {mq: off for mq, off in self._table.items() if mq.topic == topic}


class RemoteOffsetStore(_MemoryOffsets):
    """Offsets of a clustering consumer group, committed to the brokers.

    Args:
        group: The consumer group.
        invoker: Sends requests (the client instance).
        timeout_s: Per-request timeout. Default: 3.0.
    """

    def __init__(self, group: str, invoker: BrokerInvoker, *, timeout_s: float = 3.0) -> None:
        super().__init__()
        self._group = group
        self._invoker = invoker
        self._timeout_s = timeout_s

    async def load(self) -> None:
        """Nothing to load: offsets are read from the broker queue by queue."""

    def _addr(self, mq: MessageQueue) -> str:
        # The master, or a slave while the master is gone (findBrokerAddressInAdmin).
        addr = self._invoker.routes.admin_addr(mq.broker_name)
        if addr is None:
            raise NoRouteError(mq.topic, f"no address known for broker {mq.broker_name}")
        return addr

    async def read_store(self, mq: MessageQueue) -> int | None:
        """Ask the queue's broker for the group's committed offset.

        Args:
            mq: The queue.

        Returns:
            The committed offset (also stored in memory), or ``None`` when the broker
            has none (QUERY_NOT_FOUND).

        Raises:
            BrokerError: The broker answered with another error.
            NoRouteError: The queue's broker has no known address.
            TransportError: The broker could not be reached.
        """
        header = QueryConsumerOffsetRequestHeader(self._group, mq.topic, mq.queue_id)
        cmd = RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, ext_fields=header.to_ext_fields())
        addr = self._addr(mq)
        answer = await self._invoker.invoke(addr, cmd, self._timeout_s)
        if answer.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        if answer.code != ResponseCode.SUCCESS:
            raise error_for_code(answer.code, answer.remark, addr=addr)
        offset = QueryConsumerOffsetResponseHeader.from_ext_fields(answer.ext_fields).offset
        self.update(mq, offset, increase_only=False)
        return offset

    async def persist(self, mqs: Iterable[MessageQueue]) -> None:
        """Commit the in-memory offsets of ``mqs`` (queues with none are skipped).

        All commits are sent at once; the first failure is raised after every commit
        finished, so one unreachable broker does not hold back the others.

        Args:
            mqs: The queues to commit.

        Raises:
            BrokerError: A broker refused a commit.
            TransportError: A broker could not be reached.
        """
        jobs = [
            self._commit(mq, offset) for mq in mqs if (offset := self.read_memory(mq)) is not None
        ]
        results = await asyncio.gather(*jobs, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _commit(self, mq: MessageQueue, offset: int) -> None:
        header = UpdateConsumerOffsetRequestHeader(self._group, mq.topic, mq.queue_id, offset)
        cmd = RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=header.to_ext_fields())
        addr = self._addr(mq)
        answer = await self._invoker.invoke(addr, cmd, self._timeout_s)
        if answer.code != ResponseCode.SUCCESS:
            raise error_for_code(answer.code, answer.remark, addr=addr)


class LocalFileOffsetStore(_MemoryOffsets):
    """Offsets of a broadcasting consumer, kept in ``<directory>/<group>.json``.

    Args:
        group: The consumer group (names the file).
        directory: Where the file lives, a path or a string. Default:
            ``~/.rocklet/offsets``.
    """

    def __init__(self, group: str, directory: str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        # Path() also takes a str: callers pass offsets_dir as the user gave it.
        folder = DEFAULT_OFFSETS_DIR if directory is None else Path(directory)
        self.path = folder / f"{group}.json"
        self._stored: dict[MessageQueue, int] = {}
        self._write_lock = asyncio.Lock()

    async def load(self) -> None:
        """Read the file, if there is one, into memory.

        Raises:
            BodyError: The file exists but is not an offset table.
        """
        data = await asyncio.to_thread(_read_file, self.path)
        if data is None:
            return
        try:
            table = ResetOffsetBody.from_json(data).offset_table
        except (BodyError, ValueError) as exc:
            raise BodyError(f"offset file {self.path} is corrupt: {exc}") from exc
        self._stored = dict(table)
        for mq, offset in table.items():
            self.update(mq, offset, increase_only=False)

    async def read_store(self, mq: MessageQueue) -> int | None:
        """Return the offset last written to the file for ``mq`` (kept in memory too).

        Args:
            mq: The queue.

        Returns:
            The offset, or ``None`` when the file has none for ``mq``.
        """
        offset = self._stored.get(mq)
        if offset is not None:
            self.update(mq, offset, increase_only=False)
        return offset

    async def persist(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the in-memory offsets of ``mqs`` into the file, atomically.

        Offsets of other queues already in the file are kept (Java writes only the
        given queues; keeping the rest loses nothing if this consumer is restarted
        with fewer queues).

        Args:
            mqs: The queues to write.

        Raises:
            OSError: The file could not be written.
        """
        changed = False
        for mq in mqs:
            offset = self.read_memory(mq)
            if offset is not None and self._stored.get(mq) != offset:
                self._stored[mq] = offset
                changed = True
        if not changed:
            return
        async with self._write_lock:
            # Serialise inside the lock, so concurrent persists land newest-last.
            data = ResetOffsetBody(dict(self._stored)).to_json()
            await asyncio.to_thread(_write_atomically, self.path, data)


def _read_file(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _write_atomically(path: Path, data: bytes) -> None:
    # Write beside the target and rename over it: a crash leaves either the old or the
    # new file, never half of one (Java writes a .bak copy for the same reason).
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
