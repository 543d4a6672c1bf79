"""Latency-fault avoidance: which brokers a producer should avoid for a while.

RocketMQ's ``MQFaultStrategy`` / ``LatencyFaultToleranceImpl`` with
``sendLatencyFaultEnable``. Pure: no I/O and no clock (callers pass monotonic times in).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from rocklet.protocol.bodies.queue import MessageQueue

__all__ = ["LatencyFaultTolerance"]

#: ``MQFaultStrategy.latencyMax`` / ``notAvailableDuration`` (ms): a broker whose call
#: took at least ``latency`` ms is avoided for ``duration`` ms.
_LATENCY_STEPS_MS: Final = (
    (15000, 600000),
    (3000, 180000),
    (2000, 120000),
    (1000, 60000),
    (550, 30000),
    (100, 0),
    (50, 0),
)


@dataclass(slots=True)
class _FaultItem:
    latency_ms: float
    available_at: float


class LatencyFaultTolerance:
    """Which brokers to avoid because they were slow or failed recently.

    ``MQFaultStrategy`` with ``sendLatencyFaultEnable``: after each send the producer
    records the broker and how long the call took. A latency of at least 550 ms makes
    the broker unavailable for 30 s, and more for slower calls (the table above); below
    that the broker stays available. A call that failed makes it unavailable for 30 s
    (:data:`FAILURE_AVOID_MS`). Java charges a failure as 30 s of latency, which its
    table turns into 10 minutes: one failed send during a rolling restart kept a broker
    out of use long after it was back. Here a broker still down after 30 s fails the
    next send fast (its connect is refused) and is avoided for another 30 s.

    Selection round-robins over the queues and skips unavailable brokers; when every
    broker is unavailable it picks the least bad one, as Java's ``pickOneAtLeast``
    does, so a send is always attempted.

    Times are monotonic seconds supplied by the caller.
    """

    __slots__ = ("_items",)

    #: Latency recorded for a failed call, ms (``MQFaultStrategy``: isolation => 30 s):
    #: it orders the brokers when every one is out.
    FAILURE_LATENCY_MS: Final = 30000.0
    #: How long a broker a call failed on is avoided, ms.
    FAILURE_AVOID_MS: Final = 30000

    def __init__(self) -> None:
        self._items: dict[str, _FaultItem] = {}

    def update(self, broker_name: str, latency_ms: float, now: float, *, failed: bool) -> None:
        """Record one call's outcome.

        Args:
            broker_name: The broker group called.
            latency_ms: How long the call took.
            now: Monotonic time of the outcome, seconds.
            failed: Whether the call failed (charged :attr:`FAILURE_LATENCY_MS`).
        """
        latency = self.FAILURE_LATENCY_MS if failed else latency_ms
        duration_ms = self.FAILURE_AVOID_MS if failed else _not_available_ms(latency)
        if duration_ms == 0 and broker_name not in self._items:
            return  # the common case: a fast broker we never had trouble with
        self._items[broker_name] = _FaultItem(latency, now + duration_ms / 1000)

    def is_available(self, broker_name: str, now: float) -> bool:
        """Whether ``broker_name`` may be used at ``now``."""
        item = self._items.get(broker_name)
        return item is None or now >= item.available_at

    def remove(self, broker_name: str) -> None:
        """Forget a broker's record (e.g. after a fast successful call)."""
        self._items.pop(broker_name, None)

    def select(
        self,
        queues: Sequence[MessageQueue],
        start: int,
        now: float,
        avoid: str | None = None,
    ) -> MessageQueue:
        """Pick a queue: the next available one from position ``start``, round-robin.

        Args:
            queues: Candidate queues (non-empty).
            start: Round-robin position (any int; taken modulo ``len(queues)``).
            now: Monotonic time, seconds.
            avoid: A broker to skip if anything else is available (the broker the
                previous attempt of this send failed on).

        Returns:
            The chosen queue.
        """
        n = len(queues)
        items = self._items
        if not items and avoid is None:
            return queues[start % n]
        for i in range(n):
            mq = queues[(start + i) % n]
            name = mq.broker_name
            if name != avoid and self.is_available(name, now):
                return mq
        # Everything is faulty or avoided: take the broker that recovers first, but not
        # the one just failed on when there is another.
        return min(
            (queues[(start + i) % n] for i in range(n)),
            key=lambda mq: (mq.broker_name == avoid, self._available_at(mq.broker_name)),
        )

    def _available_at(self, broker_name: str) -> float:
        item = self._items.get(broker_name)
        return 0.0 if item is None else item.available_at


def _not_available_ms(latency_ms: float) -> int:
    for threshold, duration in _LATENCY_STEPS_MS:
        if latency_ms >= threshold:
            return duration
    return 0
