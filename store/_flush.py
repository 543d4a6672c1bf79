"""Flushing: the commitlog (async interval or sync group commit) and the derived files.

One flush thread does all disk syncs, so no appending thread ever waits on the disk.
SYNC_FLUSH puts get a ``concurrent.futures.Future`` completed once their bytes are
durable; every put that arrived before a sync shares it (group commit, RocketMQ's
``GroupCommitService``). ASYNC_FLUSH syncs every ``flush_interval_ms`` when at least
``flush_least_pages`` are dirty, or everything every ``flush_thorough_interval_ms``
(``FlushRealTimeService``); a durability future asked for explicitly (:meth:`request`,
e.g. before delayed delivery records its progress) is served at once in either mode.
Consume queues, index and checkpoint follow every ``flush_consume_queue_interval_ms``
(``FlushConsumeQueueService``).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError

import structlog

from rocklet.store._checkpoint import Checkpoint
from rocklet.store._commitlog import CommitLog
from rocklet.store.config import FlushDiskType, StoreConfig
from rocklet.transport.clock import Clock

__all__ = ["FlushService"]

log = structlog.get_logger(__name__)

_PAGE = 4096

#: Flushes the consume queues and index; returns (logics time, index time) snapshots.
LogicsFlusher = Callable[[], tuple[int, int]]


class FlushService:
    """The flush thread and its one-step methods.

    Args:
        config: Flush type and intervals.
        commitlog: The commitlog.
        checkpoint: Updated after flushes.
        flush_logics: Flushes consume queues and index, returning the store times they
            are durable up to (snapshotted before syncing).
        clock: Interval timing.
    """

    def __init__(
        self,
        config: StoreConfig,
        commitlog: CommitLog,
        checkpoint: Checkpoint,
        flush_logics: LogicsFlusher,
        clock: Clock,
    ) -> None:
        self.config = config
        self.commitlog = commitlog
        self.checkpoint = checkpoint
        self.flush_logics = flush_logics
        self.clock = clock
        self.sync_mode = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._cond = threading.Condition()
        self._pending: deque[tuple[int, Future[bool]]] = deque()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._last_thorough = clock.monotonic_ms()
        self._last_logics = clock.monotonic_ms()
        #: Commitlog offset known durable.
        self.flushed_offset = commitlog.max_offset()
        #: Number of commitlog sync rounds that synced at least one file.
        self.sync_count = 0
        self._least_bytes = config.flush_least_pages * _PAGE
        self._wake_pending = False
        #: Each told ``(offset, ok)`` from the flush thread after a round that settled
        #: durability requests: durable up to ``offset``, or (``ok`` false) the sync
        #: failed for every request up to it. Lets a waiter of many puts (the broker's
        #: SYNC_FLUSH sends) hop to its loop once per group commit, not once per put.
        #: Append before puts are made.
        self.progress_listeners: list[Callable[[int, bool], None]] = []

    def request(self, end_offset: int) -> Future[bool]:
        """Register a put whose bytes end at ``end_offset``. Appending thread.

        Args:
            end_offset: Commitlog offset just past the put's bytes.

        Returns:
            A future set to True once those bytes are durable.
        """
        fut: Future[bool] = Future()
        with self._cond:
            if end_offset <= self.flushed_offset:
                fut.set_result(True)
                return fut
            self._pending.append((end_offset, fut))
            self._cond.notify()
        return fut

    def wakeup(self) -> None:
        """Wake the flush thread now. Any thread."""
        with self._cond:
            self._cond.notify()

    def wakeup_if_due(self, end_offset: int) -> None:
        """Wake the flush thread if a put made enough bytes dirty (async mode). Any thread.

        RocketMQ wakes its flush thread after every put; in Python each wake-up is a
        GIL hand-off that slows the appending thread, and below ``flush_least_pages`` the
        thread would only go back to sleep, so the interval timer covers smaller backlogs.
        """
        if self._wake_pending or end_offset - self.flushed_offset < self._least_bytes:
            return
        self._wake_pending = True
        with self._cond:
            self._cond.notify()

    def run_once(self, *, force: bool = False) -> int:
        """One commitlog flush round. Flush thread (or close, after the thread stopped).

        Args:
            force: Flush even below the least-pages threshold.

        Returns:
            Segments synced.
        """
        # Time first, then offset: the checkpoint time never runs ahead of the data.
        ts = self.commitlog.last_store_timestamp
        target = self.commitlog.max_offset()
        dirty = target - self.flushed_offset
        now = self.clock.monotonic_ms()
        thorough = now - self._last_thorough >= self.config.flush_thorough_interval_ms
        needed = self.sync_mode or force or thorough or bool(self._pending)
        if not needed and dirty < self.config.flush_least_pages * _PAGE:
            return 0
        if thorough:
            self._last_thorough = now
        synced = self.commitlog.flush() if dirty > 0 else 0
        if synced:
            self.sync_count += 1
        settled = False
        with self._cond:
            self.flushed_offset = max(self.flushed_offset, target)
            while self._pending and self._pending[0][0] <= self.flushed_offset:
                _settle(self._pending.popleft()[1], True)
                settled = True
        if settled:
            for listener in self.progress_listeners:
                listener(self.flushed_offset, True)
        if dirty > 0:
            self.checkpoint.physic_ts = max(self.checkpoint.physic_ts, ts)
        return synced

    def flush_logics_once(self) -> None:
        """Flush consume queues and index, then write the checkpoint. Flush thread."""
        logics_ts, index_ts = self.flush_logics()
        self.checkpoint.logics_ts = max(self.checkpoint.logics_ts, logics_ts)
        self.checkpoint.index_ts = max(self.checkpoint.index_ts, index_ts)
        self.checkpoint.flush()
        self._last_logics = self.clock.monotonic_ms()

    def start(self) -> None:
        """Start the flush thread (idempotent). Owner thread."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="rocklet-flush", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        failing = False
        while True:
            with self._cond:
                if not self._stopped and not self._pending:
                    self._cond.wait(self.config.flush_interval_ms / 1000)
                if self._stopped:
                    return
                self._wake_pending = False
            try:
                self.run_once()
                since = self.clock.monotonic_ms() - self._last_logics
                if since >= self.config.flush_consume_queue_interval_ms:
                    self.flush_logics_once()
            except Exception:  # a failed sync must not kill the thread silently
                # A failing disk fails every round: log the first of a run of failures.
                if not failing:
                    log.exception("flush failed; retrying every flush interval")
                failing = True
                self._fail_pending()
            else:
                if failing:
                    log.info("flush works again")
                failing = False

    def _fail_pending(self) -> None:
        failed_up_to = -1
        with self._cond:
            while self._pending:
                end, future = self._pending.popleft()
                _settle(future, OSError("flush failed"))
                failed_up_to = max(failed_up_to, end)
        if failed_up_to >= 0:
            for listener in self.progress_listeners:
                listener(failed_up_to, False)

    def stop(self) -> None:
        """Stop and join the thread, then flush everything once more (idempotent)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self.run_once(force=True)
        self.flush_logics_once()


def _settle(future: Future[bool], outcome: bool | BaseException) -> None:
    """Complete a durability future unless its waiter already cancelled it.

    A waiter that gives up may cancel its future from another thread; that must not
    fail the flush round (and with it every other future of the group commit).
    """
    try:
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
    except InvalidStateError:
        pass  # cancelled by its waiter
