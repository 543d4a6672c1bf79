"""Injected time: the only module of the store that reads the system clocks.

Every store component takes a :class:`Clock`, so tests drive retention, delayed
delivery and index file naming with a :class:`ManualClock` instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "file_time_name", "local_hour"]


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


def local_hour(now_ms: int) -> int:
    """Hour of the day in local time, as RocketMQ's ``deleteWhen`` check uses.

    Args:
        now_ms: Wall-clock time, ms.

    Returns:
        0..23.
    """
    return time.localtime(now_ms / 1000).tm_hour


def file_time_name(now_ms: int) -> str:
    """Index file name for a creation time: ``yyyyMMddHHmmssSSS`` in local time.

    Args:
        now_ms: Wall-clock time, ms.

    Returns:
        17 digits, as RocketMQ's ``UtilAll.timeMillisToHumanString``.
    """
    return time.strftime("%Y%m%d%H%M%S", time.localtime(now_ms / 1000)) + f"{now_ms % 1000:03d}"
