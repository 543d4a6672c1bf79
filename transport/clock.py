"""Injected time, shared by the store, the servers and the SDK.

Components take a :class:`Clock` instead of reading :mod:`time`, so tests drive
retention, delayed delivery, lock and client expiry, route refreshes and ProcessQueue
ages with a :class:`ManualClock` instead of sleeping. :class:`SystemClock` is the only
place outside the benchmarks that reads the system clocks.
"""

from __future__ import annotations

import threading
import time
from typing import Final, Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """Wall-clock and monotonic time in milliseconds. Implementations are thread-safe."""

    def now_ms(self) -> int:
        """Wall-clock time, ms since the epoch (store timestamps, file names)."""
        ...

    def monotonic_ms(self) -> int:
        """Monotonic time, ms (intervals)."""
        ...


class SystemClock:
    """The real clocks. Any thread."""

    def now_ms(self) -> int:
        """Wall-clock time from :func:`time.time`, ms."""
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        """Monotonic time from :func:`time.monotonic`, ms."""
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when a test moves it. Any thread, takes its own lock.

    Args:
        start_ms: Initial wall-clock time; the monotonic time starts at 0.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._lock = threading.Lock()
        self._now = start_ms
        self._mono = 0

    def now_ms(self) -> int:
        """The current manual wall-clock time."""
        with self._lock:
            return self._now

    def monotonic_ms(self) -> int:
        """The current manual monotonic time."""
        with self._lock:
            return self._mono

    def advance(self, ms: int) -> None:
        """Move both clocks forward.

        Args:
            ms: Milliseconds to add (must not be negative).

        Raises:
            ValueError: ``ms`` is negative.
        """
        if ms < 0:
            raise ValueError("a clock never goes back")
        with self._lock:
            self._now += ms
            self._mono += ms

    def set(self, now_ms: int) -> None:
        """Set the wall clock (the monotonic clock moves by the same amount if forward).

        Args:
            now_ms: New wall-clock time.
        """
        with self._lock:
            if now_ms > self._now:
                self._mono += now_ms - self._now
            self._now = now_ms


#: The shared real clock (it holds no state).
SYSTEM_CLOCK: Final = SystemClock()
