"""Warnings that a peer can trigger at will, logged at most so many a minute.

A stranger reconnecting in a loop, or a client sending garbage on connection after
connection, must not flood the log (nor the disk under it). Past the limit the warnings
of the minute are only counted, and the count is logged with the first warning of a
later minute.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["LimitedWarnings"]


class LimitedWarnings:
    """WARNINGs through ``log``, at most ``limit`` a minute.

    Args:
        log: The logger (a structlog bound logger), so lines keep their module's name.
        summary: The event that reports how many were left out.
        limit: WARNINGs per minute.
        clock: Seconds, monotonic (tests pass their own).
    """

    def __init__(
        self,
        log: Any,
        summary: str,
        limit: int = 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._summary = summary
        self._limit = limit
        self._clock = clock
        self._start = clock()
        self._logged = 0
        #: Warnings left out in the current minute.
        self.suppressed = 0

    def warn(self, event: str, **fields: object) -> None:
        """Log one warning, unless this minute's share is used up."""
        now = self._clock()
        if now - self._start >= 60:
            if self.suppressed:
                self._log.warning(self._summary, count=self.suppressed)
            self._start, self._logged, self.suppressed = now, 0, 0
        if self._logged < self._limit:
            self._logged += 1
            self._log.warning(event, **fields)
        else:
            self.suppressed += 1
