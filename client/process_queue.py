"""ProcessQueue: a consumer's snapshot of one message queue (seed 004).

A push consumer keeps one :class:`ProcessQueue` per assigned queue. Pulled messages
are put into a sorted map keyed by queue offset; the consume service takes them out
as the listener finishes them. The map answers the two questions the consumer keeps
asking:

* *How much is cached?* Count, bytes and the span between the lowest and highest
  cached offset drive flow control: the pull loop pauses a queue when any passes its
  threshold (RocketMQ's defaults: 1000 messages, 100 MiB, span 2000).
* *What may be committed?* Concurrent listeners finish messages out of order, so
  the committable offset is the lowest offset still cached (everything below it is
  done), or one past the highest offset ever cached when the map is empty. That is
  what :meth:`ProcessQueue.remove` returns, as Java's ``removeMessage`` does.

The map holds *runs* rather than single messages: a run is one pull's messages (a
list in offset order), keyed by its lowest cached offset, and runs never overlap.
Java's TreeMap pays a tree insertion per message on put and a deletion per message on
remove; here the usual put (a pull past everything cached) adds one entry, and the
usual remove (the listener finished a whole pull, or the head of one) drops or cuts
one run, whatever the number of messages. Messages finished out of order, re-pulls
that overlap the cache and batches put back by an orderly consumer take a slower path
that rebuilds only the runs they touch; every answer (count, bytes, span, lowest and
highest offset) is the same as a per-message sorted map's, which
``tests/client/test_process_queue_model.py`` checks under random operations.

Orderly consumption uses a twin map: :meth:`~ProcessQueue.take` moves the head batch
into it, :meth:`~ProcessQueue.commit` forgets the batch and returns the offset after
it, and :meth:`~ProcessQueue.make_consume_again` moves a failed batch back.

Thread-safety: every method that reads or changes the maps takes one
``threading.Lock``, because a plain-function listener runs in a thread pool and
removes its messages from there while the event loop puts new ones. The lock is
never held across a call out of this class. Plain attributes (``dropped``,
``locked``, timestamps) are single assignments, atomic under the GIL, as Java makes
them ``volatile``. :attr:`~ProcessQueue.consume_lock` is an asyncio lock and is for
the event loop only.

Time comes from an injected :class:`~rocklet.transport.clock.Clock` (its wall-clock
milliseconds, because the timestamps are reported to the broker in running info,
where Java puts ``System.currentTimeMillis()``).
"""

from __future__ import annotations

import asyncio
import operator
import threading
from collections.abc import Sequence
from typing import Any, Final, Generic, Protocol, TypeVar

from sortedcontainers import SortedDict  # type: ignore[import-untyped]

from rocklet.protocol.bodies.running import ProcessQueueInfo
from rocklet.transport.clock import SYSTEM_CLOCK, Clock

__all__ = [
    "LOCK_MAX_LIVE_MS",
    "PULL_MAX_IDLE_MS",
    "ProcessQueue",
    "QueuedMessage",
]

#: A broker lock not renewed for this long is treated as lost by the client
#: (``rocketmq.client.rebalance.lockMaxLiveTime``; brokers expire theirs at 60 s).
LOCK_MAX_LIVE_MS: Final = 30_000
#: A queue not pulled for this long is rebuilt by the next rebalance
#: (``rocketmq.client.pull.pullMaxIdleTime``).
PULL_MAX_IDLE_MS: Final = 120_000
#: At most this many expired heads are looked at per clean-up round (Java's 16).
_CLEAN_BATCH: Final = 16
_MIB: Final = 1024 * 1024
_OFFSET: Final = operator.attrgetter("queue_offset")
_BODY: Final = operator.attrgetter("body")


class QueuedMessage(Protocol):
    """What a ProcessQueue needs from a message: its queue offset and body size."""

    @property
    def queue_offset(self) -> int:
        """Index of the message in its consume queue."""
        ...

    @property
    def body(self) -> bytes:
        """The body; its length is what cached-size flow control counts."""
        ...


M = TypeVar("M", bound=QueuedMessage)


class _Run(Generic[M]):
    """Cached messages of one pull (or of merged pulls), in ascending offset order."""

    __slots__ = ("msgs", "size")

    def __init__(self, msgs: list[M], size: int) -> None:
        self.msgs = msgs
        self.size = size  # their body bytes


def _increasing(offsets: list[int]) -> bool:
    """Whether ``offsets`` (not empty) strictly increase: a pull's usual order."""
    first = offsets[0]
    if offsets[-1] - first == len(offsets) - 1:  # consecutive, the unfiltered pull
        return offsets == list(range(first, first + len(offsets)))
    return len(set(offsets)) == len(offsets) and sorted(offsets) == offsets


def _body_bytes(msgs: Sequence[QueuedMessage]) -> int:
    return sum(map(len, map(_BODY, msgs)))


class ProcessQueue(Generic[M]):
    """The cached messages and consumption state of one assigned queue.

    Args:
        clock: The time source (its wall clock). Default: the system clock.
        lock_max_live_ms: Age after which a broker lock counts as expired.
            Default: 30000.
        pull_max_idle_ms: Pull silence after which the queue counts as stuck.
            Default: 120000.

    Attributes:
        dropped: The queue was taken away (rebalance, shutdown); its pull loop and
            consume tasks stop, and nothing more is committed for it.
        locked: Orderly only: this client holds the broker's lock on the queue.
        consuming: Orderly only: a consume task is draining the queue (set by
            :meth:`put` when it asks for a dispatch, cleared by :meth:`take`).
        try_unlock_times: Times a rebalance could not unlock the queue because a
            batch was being consumed.
        last_pull_timestamp: When a pull for this queue last completed.
        last_consume_timestamp: When messages were last removed or taken.
        last_lock_timestamp: When the broker lock was last confirmed.
        msg_acc_cnt: Messages on the broker beyond the last one pulled (lag).
        queue_offset_max: Highest offset ever cached.
        consume_lock: Orderly only, event loop only: held while a batch of this
            queue is in the listener, so a rebalance can wait before unlocking.
    """

    def __init__(
        self,
        *,
        clock: Clock = SYSTEM_CLOCK,
        lock_max_live_ms: int = LOCK_MAX_LIVE_MS,
        pull_max_idle_ms: int = PULL_MAX_IDLE_MS,
    ) -> None:
        # The bound method: read on every batch, one attribute look-up less.
        self._clock_ms = clock.now_ms
        self._lock_max_live_ms = lock_max_live_ms
        self._pull_max_idle_ms = pull_max_idle_ms
        self._lock = threading.Lock()
        # lowest offset -> _Run: Java's msgTreeMap, a run per pull instead of an entry
        # per message (the module docstring says why)
        self._runs: Any = SortedDict()
        self._taken: Any = SortedDict()  # offset -> M, Java's msgTreeMapTemp
        self._count = 0  # messages in both maps
        self._size = 0  # body bytes in both maps
        self._consume_start: dict[int, int] = {}  # batch head offset -> start ms
        now = clock.now_ms()
        self.queue_offset_max = 0
        self.dropped = False
        self.locked = False
        self.consuming = False
        self.try_unlock_times = 0
        self.msg_acc_cnt = 0
        self.last_pull_timestamp = now
        self.last_consume_timestamp = now
        self.last_lock_timestamp = now
        self.consume_lock = asyncio.Lock()

    # -- sizes ----------------------------------------------------------------------

    @property
    def count(self) -> int:
        """Messages cached, including an orderly batch being consumed."""
        return self._count

    @property
    def size(self) -> int:
        """Body bytes cached, including an orderly batch being consumed."""
        return self._size

    def is_empty(self) -> bool:
        """Whether no message waits in the map (a taken orderly batch not counted)."""
        with self._lock:
            return not self._runs

    def max_span(self) -> int:
        """Offset distance between the highest and lowest cached message (0 if empty).

        A large span means one slow message holds back the commit offset while many
        later ones are done; the pull loop stops pulling past the span limit.
        """
        with self._lock:
            runs = self._runs
            if not runs:
                return 0
            return int(runs.peekitem(-1)[1].msgs[-1].queue_offset - runs.peekitem(0)[0])

    # -- concurrent consumption -------------------------------------------------------

    def put(self, msgs: Sequence[M], broker_max_offset: int | None = None) -> bool:
        """Cache pulled messages.

        Args:
            msgs: Messages of one pull, in offset order; offsets already cached are
                ignored (a re-pull after a reset may return them again).
            broker_max_offset: The pull answer's ``maxOffset``, for the lag estimate
                (Java reads it from each message's MAX_OFFSET property).

        Returns:
            ``True`` when the caller should start draining the queue: it holds
            messages and no consume task is on it (only orderly consumption uses this;
            the flag it sets is cleared by :meth:`take`).
        """
        if not msgs:
            return False
        with self._lock:
            runs, taken = self._runs, self._taken
            offsets = list(map(_OFFSET, msgs))
            first = offsets[0]
            if (
                (not runs or first > runs.peekitem(-1)[1].msgs[-1].queue_offset)
                and (not taken or first > taken.keys()[-1])
                and _increasing(offsets)
            ):
                # The usual pull: in order, past everything cached, so none can be a
                # duplicate: one new run, no per-message work beyond its byte count.
                run = _Run(list(msgs), _body_bytes(msgs))
                runs[first] = run
                self._count += len(offsets)
                self._size += run.size
                self.queue_offset_max = max(self.queue_offset_max, offsets[-1])
            else:
                added = self._merge(msgs, replace=False)
                if added:
                    self._count += len(added)
                    self._size += _body_bytes(added)
                    self.queue_offset_max = max(self.queue_offset_max, *map(_OFFSET, added))
            dispatch = bool(runs) and not self.consuming
            if dispatch:
                self.consuming = True
            if broker_max_offset is not None:
                lag = broker_max_offset - msgs[-1].queue_offset
                if lag > 0:
                    self.msg_acc_cnt = lag
            return dispatch

    def remove(self, msgs: Sequence[M]) -> int:
        """Forget consumed messages and return the offset that is safe to commit.

        Args:
            msgs: Messages the listener finished (or that were sent back).

        Returns:
            The lowest offset still cached, or ``queue_offset_max + 1`` when nothing
            is left; ``-1`` when the queue was already empty (nothing to commit).
        """
        with self._lock:
            self.last_consume_timestamp = self._clock_ms()
            runs = self._runs
            if not runs:
                return -1
            if msgs:
                head = msgs[0].queue_offset
                self._consume_start.pop(head, None)
                run = runs.get(head)
                n = len(msgs)
                # The usual case: the listener finished a whole pull, or the head of
                # one (a list compare is a pointer compare per message when they are
                # the cached objects).
                if run is not None and run.msgs[:n] == msgs:
                    del runs[head]
                    if n == len(run.msgs):
                        removed, size = n, run.size
                    else:
                        removed, size = n, _body_bytes(msgs)
                        run.msgs = run.msgs[n:]
                        run.size -= size
                        runs[run.msgs[0].queue_offset] = run
                else:
                    removed, size = self._remove_scattered(msgs)
                self._count -= removed
                self._size -= size
            if runs:
                return int(runs.peekitem(0)[0])
            return self.queue_offset_max + 1

    def mark_consume_start(self, msgs: Sequence[M]) -> None:
        """Record that a batch was handed to the listener now.

        Only the batch's first offset is stamped: a batch is removed whole, so the
        head of the map is always the first message of some batch, which is all
        :meth:`expired_heads` looks at (Java stamps every message's
        CONSUME_START_TIME property instead).

        Args:
            msgs: The batch, in offset order.
        """
        if msgs:
            stamp = self._clock_ms()
            with self._lock:
                self._consume_start[msgs[0].queue_offset] = stamp

    def expired_heads(self, consume_timeout_ms: int, limit: int = _CLEAN_BATCH) -> list[M]:
        """Return the messages at the head that have been in the listener too long.

        RocketMQ's ``cleanExpiredMsg`` sends such messages back to the broker (delay
        level 3) and then drops them, so one stuck listener call cannot pin the
        commit offset forever. The caller sends each back and then calls
        :meth:`remove_if_head`.

        Args:
            consume_timeout_ms: How long a batch may stay in the listener.
            limit: At most this many messages are returned. Default: 16.

        Returns:
            Up to ``limit`` expired messages from the head, in offset order.
        """
        deadline = self._clock_ms() - consume_timeout_ms
        with self._lock:
            out: list[M] = []
            for run in self._runs.values():
                for msg in run.msgs:
                    if len(out) >= limit:
                        return out
                    started = self._consume_start.get(msg.queue_offset)
                    if started is None or started >= deadline:
                        return out
                    out.append(msg)
            return out

    def remove_if_head(self, msg: M) -> int:
        """Remove ``msg`` if it is still the lowest cached message.

        Args:
            msg: A message returned by :meth:`expired_heads`.

        Returns:
            The offset now safe to commit (as :meth:`remove`), or ``-1`` when ``msg``
            was not the head any more (it may have finished meanwhile).
        """
        with self._lock:
            runs = self._runs
            if not runs or runs.peekitem(0)[0] != msg.queue_offset:
                return -1
            key, run = runs.peekitem(0)
            head = run.msgs[0]
            del runs[key]
            if len(run.msgs) > 1:
                run.msgs = run.msgs[1:]
                run.size -= len(head.body)
                runs[run.msgs[0].queue_offset] = run
            start = self._consume_start.pop(key, None)
            if start is not None and runs:
                # The rest of its batch is still in the listener since the same time.
                self._consume_start.setdefault(int(runs.peekitem(0)[0]), start)
            self._count -= 1
            self._size -= len(head.body)
            return int(runs.peekitem(0)[0]) if runs else self.queue_offset_max + 1

    # -- orderly consumption ----------------------------------------------------------

    def take(self, batch_size: int) -> list[M]:
        """Move up to ``batch_size`` messages from the head into the consuming twin.

        Args:
            batch_size: Most messages to take.

        Returns:
            The batch in offset order; empty when nothing waits, which also clears
            :attr:`consuming` so the next :meth:`put` asks for a dispatch again.
        """
        with self._lock:
            self.last_consume_timestamp = self._clock_ms()
            out: list[M] = []
            runs = self._runs
            while runs and len(out) < batch_size:
                key, run = runs.peekitem(0)
                want = batch_size - len(out)
                del runs[key]
                if want < len(run.msgs):
                    part = run.msgs[:want]
                    run.msgs = run.msgs[want:]
                    run.size -= _body_bytes(part)
                    runs[run.msgs[0].queue_offset] = run
                    out += part
                else:
                    out += run.msgs
            self._taken.update(zip(map(_OFFSET, out), out, strict=True))
            if not out:
                self.consuming = False
            return out

    def commit(self) -> int:
        """Forget the batch being consumed (it succeeded).

        Returns:
            One past the batch's highest offset, the offset to commit; ``-1`` when
            no batch was taken.
        """
        with self._lock:
            taken = self._taken
            if not taken:
                return -1
            last = int(taken.peekitem(-1)[0])
            self._count -= len(taken)
            self._size -= sum(len(m.body) for m in taken.values())
            taken.clear()
            return last + 1

    def make_consume_again(self, msgs: Sequence[M]) -> None:
        """Put a taken batch back at the head, to be taken again later.

        Args:
            msgs: Messages previously returned by :meth:`take`.
        """
        with self._lock:
            for msg in msgs:
                self._taken.pop(msg.queue_offset, None)
            if msgs:
                self._merge(msgs, replace=True)

    def _merge(self, msgs: Sequence[M], *, replace: bool) -> list[M]:
        """Add ``msgs`` in any order, merging the runs they overlap into one.

        Returns the messages whose offsets were not cached. Without ``replace``, an
        offset already cached (in the map or taken) keeps its message; with it, the
        map takes the new one. The lock is held by the caller.
        """
        runs = self._runs
        offsets = list(map(_OFFSET, msgs))
        low, high = min(offsets), max(offsets)
        first = runs.bisect_right(low) - 1  # the run that may hold ``low``
        if first < 0 or runs.peekitem(first)[1].msgs[-1].queue_offset < low:
            first += 1
        merged: dict[int, M] = {}
        for key in list(runs.keys()[first : runs.bisect_right(high)]):
            for msg in runs.pop(key).msgs:
                merged[msg.queue_offset] = msg
        added: list[M] = []
        taken = self._taken
        for offset, msg in zip(offsets, msgs, strict=True):
            if offset in merged:
                if replace:
                    merged[offset] = msg
            elif replace or offset not in taken:
                merged[offset] = msg
                added.append(msg)
        if merged:
            ordered = [merged[offset] for offset in sorted(merged)]
            runs[ordered[0].queue_offset] = _Run(ordered, _body_bytes(ordered))
        return added

    def _remove_scattered(self, msgs: Sequence[M]) -> tuple[int, int]:
        """Remove any cached messages among ``msgs``; returns (messages, body bytes).

        The lock is held by the caller.
        """
        runs = self._runs
        keys = runs.keys()
        by_run: dict[int, set[int]] = {}
        for msg in msgs:
            at = runs.bisect_right(msg.queue_offset) - 1
            if at >= 0:
                by_run.setdefault(keys[at], set()).add(msg.queue_offset)
        removed = size = 0
        for key, offsets in by_run.items():
            run = runs[key]
            keep = [m for m in run.msgs if m.queue_offset not in offsets]
            if len(keep) == len(run.msgs):
                continue
            gone = run.size - _body_bytes(keep)
            removed += len(run.msgs) - len(keep)
            size += gone
            del runs[key]
            if keep:
                run.msgs = keep
                run.size -= gone
                runs[keep[0].queue_offset] = run
        return removed, size

    # -- lifecycle --------------------------------------------------------------------

    def clear(self) -> None:
        """Forget every cached message (the queue's offset was reset)."""
        with self._lock:
            self._runs.clear()
            self._taken.clear()
            self._consume_start.clear()
            self._count = 0
            self._size = 0
            self.queue_offset_max = 0

    def touch_pull(self) -> None:
        """Record that a pull for this queue just completed."""
        self.last_pull_timestamp = self._clock_ms()

    def set_locked(self, locked: bool) -> None:
        """Record the outcome of a lock request (a success renews the lock's age).

        Args:
            locked: Whether the broker granted (or confirmed) the lock.
        """
        self.locked = locked
        if locked:
            self.last_lock_timestamp = self._clock_ms()

    def is_lock_expired(self) -> bool:
        """Whether the broker lock was not confirmed within ``lock_max_live_ms``."""
        return self._clock_ms() - self.last_lock_timestamp > self._lock_max_live_ms

    def is_pull_expired(self) -> bool:
        """Whether no pull completed within ``pull_max_idle_ms``."""
        return self._clock_ms() - self.last_pull_timestamp > self._pull_max_idle_ms

    def snapshot(self, commit_offset: int) -> ProcessQueueInfo:
        """Describe the queue the way running info reports it (``fillProcessQueueInfo``).

        Args:
            commit_offset: The offset store's current offset for this queue.

        Returns:
            The snapshot.
        """
        with self._lock:
            runs, taken = self._runs, self._taken
            return ProcessQueueInfo(
                commit_offset=commit_offset,
                cached_msg_min_offset=int(runs.peekitem(0)[0]) if runs else 0,
                cached_msg_max_offset=(
                    int(runs.peekitem(-1)[1].msgs[-1].queue_offset) if runs else 0
                ),
                cached_msg_count=self._count - len(taken),
                cached_msg_size_in_mib=self._size // _MIB,
                transaction_msg_min_offset=int(taken.peekitem(0)[0]) if taken else 0,
                transaction_msg_max_offset=int(taken.peekitem(-1)[0]) if taken else 0,
                transaction_msg_count=len(taken),
                locked=self.locked,
                try_unlock_times=self.try_unlock_times,
                last_lock_timestamp=self.last_lock_timestamp,
                dropped=self.dropped,
                last_pull_timestamp=self.last_pull_timestamp,
                last_consume_timestamp=self.last_consume_timestamp,
            )
