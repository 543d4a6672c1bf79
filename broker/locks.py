"""Queue locks for orderly consumers (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).

RocketMQ's ``RebalanceLockManager``: a queue of a group is held by one client id; the
holder renews it by locking again (the C++ client re-locks every 20 s), and a lock not
renewed for ``rebalance.lockMaxLiveTime`` (60 s) may be taken by another client.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.transport.clock import Clock

__all__ = ["LOCK_MAX_LIVE_MS", "RebalanceLockManager"]

LOCK_MAX_LIVE_MS: Final = 60_000


@dataclass(slots=True)
class _Lock:
    client_id: str
    last_update_ms: int


class RebalanceLockManager:
    """Locks per (group, queue). Not thread-safe: event loop only.

    Args:
        clock: Time source.
        max_live_ms: How long a lock lives without renewal.
    """

    def __init__(self, clock: Clock, *, max_live_ms: int = LOCK_MAX_LIVE_MS) -> None:
        self._clock = clock
        self._max_live_ms = max_live_ms
        self._locks: dict[str, dict[MessageQueue, _Lock]] = {}

    def try_lock(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str
    ) -> set[MessageQueue]:
        """Lock (or renew) queues for a client.

        Returns:
            The queues the client holds afterwards.
        """
        now = self._clock.now_ms()
        table = self._locks.setdefault(group, {})
        held: set[MessageQueue] = set()
        for mq in mqs:
            lock = table.get(mq)
            if lock is None or lock.client_id == client_id or self._expired(lock, now):
                table[mq] = _Lock(client_id, now)
                held.add(mq)
        return held

    def unlock(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """Release the given queues if this client holds them."""
        table = self._locks.get(group)
        if not table:
            return
        for mq in mqs:
            lock = table.get(mq)
            if lock is not None and lock.client_id == client_id:
                del table[mq]

    def holder(self, group: str, mq: MessageQueue) -> str | None:
        """Return the client id holding a live lock on a queue, if any."""
        lock = self._locks.get(group, {}).get(mq)
        if lock is None or self._expired(lock, self._clock.now_ms()):
            return None
        return lock.client_id

    def _expired(self, lock: _Lock, now_ms: int) -> bool:
        return now_ms - lock.last_update_ms > self._max_live_ms
