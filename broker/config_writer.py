"""Group commit for the config files under ``<store>/config/``.

A topic or group change must be on disk before the answer that announces it goes out,
yet a burst of changes (a thousand consumers' heartbeats each creating a retry topic,
a storm of offset commits) must not cost one fsync each. Each file has one
:class:`ConfigWriter`:

- its manager calls :meth:`ConfigWriter.changed` for every change, which returns the
  change's *generation* (a counter);
- a processor about to answer awaits :meth:`ConfigWriter.durable` with that generation;
- at most one write runs at a time. It snapshots the table on the event loop, then
  serialises and writes it in a worker thread (temp file, fsync, rename, directory
  fsync: :func:`rocklet.broker.json_file.persist_json`). Every change that arrives
  while a write runs is carried by the next one, so N concurrent changes cost at most
  two writes.

An *urgent* change (topics, groups) starts a write at once even if nobody waits; a lazy
one (offsets committed without an answer) waits for the next waiter or for
:meth:`ConfigWriter.flush`, which the broker calls every ``flushConsumerOffsetInterval``.
A failed write fails the waiters it would have released with :class:`ConfigWriteError`
and is retried by the next change, waiter or flush.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

import structlog

__all__ = ["ConfigWriteError", "ConfigWriter"]

log = structlog.get_logger(__name__)

S = TypeVar("S")


class ConfigWriteError(Exception):
    """A config file could not be written: the change is in memory only.

    Args:
        name: The file (``topics.json``).
        cause: What the write raised.
    """

    def __init__(self, name: str, cause: BaseException) -> None:
        super().__init__(f"{name} could not be saved: {cause}")
        self.name = name


class ConfigWriter(Generic[S]):
    """Coalesced, durable writes of one config file. Event loop only.

    Args:
        name: The file's name, for logs and errors.
        snapshot: Returns the file's content as of now (called on the loop; it must
            copy whatever the loop may change later).
        write: Writes a snapshot durably (called in a worker thread).
    """

    def __init__(self, name: str, snapshot: Callable[[], S], write: Callable[[S], None]) -> None:
        self.name = name
        self._snapshot = snapshot
        self._write = write
        self._generation = 0
        self._saved = 0
        self._wanted = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
        # Serialises writes of this file across threads: a write abandoned by a
        # cancelled task may still run when the next one starts.
        self._file_lock = threading.Lock()
        #: Called on the loop with the generation just saved.
        self.on_saved: Callable[[int], None] | None = None
        #: Completed writes (the cost of group commit is measured with it).
        self.writes = 0

    @property
    def generation(self) -> int:
        """The latest change's generation (0: nothing changed since start)."""
        return self._generation

    @property
    def saved(self) -> int:
        """The latest generation known to be on disk."""
        return self._saved

    def changed(self, *, urgent: bool) -> int:
        """Record a change of the table.

        Args:
            urgent: Start a write now, even if nobody waits for it.

        Returns:
            The change's generation, for :meth:`durable`.
        """
        self._generation += 1
        if urgent:
            self._want(self._generation)
        return self._generation

    async def durable(self, generation: int | None = None) -> None:
        """Wait until a change is on disk, writing it if no write is on its way.

        Args:
            generation: The change's generation; ``None``: every change so far.

        Raises:
            ConfigWriteError: The write that should have carried it failed.
        """
        wanted = self._generation if generation is None else generation
        if wanted <= self._saved:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((wanted, waiter))
        self._want(wanted)
        await waiter

    async def flush(self) -> None:
        """Write every change not on disk yet (the periodic step and the stop).

        Raises:
            ConfigWriteError: The write failed.
        """
        await self.durable()

    def _want(self, generation: int) -> None:
        self._wanted = max(self._wanted, generation)
        if self._task is not None:
            return  # the running write loop sees the new want before it ends
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a manager used on its own): flush() writes it later
        self._task = loop.create_task(self._drain(), name=f"config-writer-{self.name}")

    async def _drain(self) -> None:
        try:
            while self._saved < self._wanted:
                generation = self._generation
                snapshot = self._snapshot()
                try:
                    await asyncio.to_thread(self._write_locked, snapshot)
                except OSError as exc:
                    log.error("config file write failed", file=self.name, error=str(exc))
                    self._release(generation, exc)
                    # Only waiters that came during the failed write ask for another
                    # try; a failing disk is not retried in a tight loop.
                    self._wanted = max((g for g, _ in self._waiters), default=self._saved)
                    continue
                self.writes += 1
                self._saved = generation
                self._release(generation, None)
                if self.on_saved is not None:
                    self.on_saved(generation)
        finally:
            self._task = None

    def _write_locked(self, snapshot: S) -> None:
        with self._file_lock:
            self._write(snapshot)

    def _release(self, generation: int, error: OSError | None) -> None:
        keep: list[tuple[int, asyncio.Future[None]]] = []
        for wanted, waiter in self._waiters:
            if wanted > generation:
                keep.append((wanted, waiter))
            elif not waiter.done():  # a cancelled request leaves a done waiter
                if error is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(ConfigWriteError(self.name, error))
        self._waiters = keep
