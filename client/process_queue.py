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
        self._msgs: Any = SortedDict()  # offset -> M, Java's msgTreeMap
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
            return not self._msgs

    def max_span(self) -> int:
        """Offset distance between the highest and lowest cached message (0 if empty).

        A large span means one slow message holds back the commit offset while many
        later ones are done; the pull loop stops pulling past the span limit.
        """
        with self._lock:
            if not self._msgs:
                return 0
            return int(self._msgs.peekitem(-1)[0] - self._msgs.peekitem(0)[0])

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
            tree, taken = self._msgs, self._taken
            first, last = msgs[0].queue_offset, msgs[-1].queue_offset
            if (
                last - first == len(msgs) - 1
                and (not tree or first > tree.keys()[-1])
                and (not taken or first > taken.keys()[-1])
            ):
                # The usual pull: consecutive offsets past everything cached, so none
                # can be a duplicate and no per-message membership test is needed.
                # (dict(zip()) reuses zip's pair tuple: no tuple per message.)
                new = dict(zip(map(_OFFSET, msgs), msgs, strict=True))
            else:
                new = {
                    m.queue_offset: m
                    for m in msgs
                    if m.queue_offset not in tree and m.queue_offset not in taken
                }
            if new:
                # One bulk update: about a third of the cost of a SortedDict insert per
                # message on the consume hot path.
                tree.update(new)
                self._count += len(new)
                self._size += sum(map(len, map(_BODY, new.values())))
                self.queue_offset_max = max(self.queue_offset_max, max(new))
            dispatch = bool(tree) and not self.consuming
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
            tree = self._msgs
            if not tree:
                return -1
            if msgs:
                self._consume_start.pop(msgs[0].queue_offset, None)
            removed = 0
            size = 0
            offsets = list(map(_OFFSET, msgs))
            keys = tree.keys()
            if keys[: len(offsets)] == offsets:
                # The usual case: the batch is the head of the map. One slice deletion
                # (the keys' list cut once, then the dict entries) instead of a pop per
                # message, each rebalancing the sorted list.
                del keys[: len(offsets)]
                removed = len(offsets)
                size = sum(map(len, map(_BODY, msgs)))
            else:
                for msg in msgs:
                    if tree.pop(msg.queue_offset, None) is not None:
                        removed += 1
                        size += len(msg.body)
            self._count -= removed
            self._size -= size
            if tree:
                return int(tree.peekitem(0)[0])
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
            for offset in self._msgs.islice(0, limit):
                started = self._consume_start.get(offset)
                if started is None or started >= deadline:
                    break
                out.append(self._msgs[offset])
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
            tree = self._msgs
            if not tree or tree.peekitem(0)[0] != msg.queue_offset:
                return -1
            del tree[msg.queue_offset]
            start = self._consume_start.pop(msg.queue_offset, None)
            if start is not None and tree:
                # The rest of its batch is still in the listener since the same time.
                self._consume_start.setdefault(int(tree.peekitem(0)[0]), start)
            self._count -= 1
            self._size -= len(msg.body)
            return int(tree.peekitem(0)[0]) if tree else self.queue_offset_max + 1

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
            tree = self._msgs
            while tree and len(out) < batch_size:
                offset, msg = tree.popitem(0)
                self._taken[offset] = msg
                out.append(msg)
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
                self._msgs[msg.queue_offset] = msg

    # -- lifecycle --------------------------------------------------------------------

    def clear(self) -> None:
        """Forget every cached message (the queue's offset was reset)."""
        with self._lock:
            self._msgs.clear()
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
            msgs, taken = self._msgs, self._taken
            return ProcessQueueInfo(
                commit_offset=commit_offset,
                cached_msg_min_offset=int(msgs.peekitem(0)[0]) if msgs else 0,
                cached_msg_max_offset=int(msgs.peekitem(-1)[0]) if msgs else 0,
                cached_msg_count=len(msgs),
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
