"""Callbacks waiting for the commitlog to reach an offset: one FIFO, one timer.

What a SYNC_FLUSH or SYNC_MASTER send waits for is "the disk (or a slave) has the
commitlog up to my end offset", with the same timeout for every send. Sends are
stored one after another on the event loop, so they register in the order of their
end offsets, and (the timeout being the same) of their deadlines too. A FIFO then
does what a heap, a future and a timer per send did: progress releases entries from
the head while their offset is reached, and a single timer, set for the head's
deadline, expires entries from the head while their deadline passed. No task, no
future, no timer per send.

An entry that would break either order (a smaller offset or an earlier deadline than
the FIFO's tail: a put registered late, a caller with a shorter timeout) goes to a side
list with a timer of its own instead, so every entry is released exactly when its
offset is reached and expires exactly at its deadline. The broker's sends never take
that path; it keeps the class correct for any caller.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

import structlog

__all__ = ["Done", "OffsetWaits"]

log = structlog.get_logger(__name__)

#: Called once with ``None`` when the offset was reached, else why not.
Done = Callable[[str | None], None]


class OffsetWaits:
    """A FIFO of ``(end offset, deadline, callback)``. Event loop only.

    Args:
        timeout_reason: What an expired entry's callback is told.
    """

    __slots__ = ("_fifo", "_loop", "_odd", "_timeout_reason", "_timer", "reached")

    def __init__(self, timeout_reason: str) -> None:
        self._fifo: deque[tuple[int, float, Done]] = deque()
        #: Entries out of the FIFO's order, each with its own timer.
        self._odd: list[_Odd] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timeout_reason = timeout_reason
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Highest offset reached so far.
        self.reached = 0

    def __len__(self) -> int:
        return len(self._fifo) + len(self._odd)

    def add(self, end_offset: int, timeout_s: float, done: Done) -> None:
        """Call ``done`` once ``end_offset`` is reached, or after ``timeout_s``.

        The caller has checked that it is not reached yet (:attr:`reached`).

        Args:
            end_offset: Offset just past what must be reached.
            timeout_s: The longest wait (the same for every entry).
            done: The callback.
        """
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        fifo = self._fifo
        if fifo and (end_offset < fifo[-1][0] or deadline < fifo[-1][1]):
            odd = _Odd(end_offset, done)
            odd.timer = loop.call_at(deadline, self._expire_odd, odd)
            self._odd.append(odd)
            return
        fifo.append((end_offset, deadline, done))
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire)

    def advance(self, offset: int) -> None:
        """The commitlog reached ``offset``: release every entry at the head up to it."""
        if offset > self.reached:
            self.reached = offset
        fifo = self._fifo
        while fifo and fifo[0][0] <= offset:
            _call(fifo.popleft()[2], None)
        if self._odd:
            self._settle_odd(lambda odd: odd.end <= offset, None)
        # The timer stays as it is: when it fires it finds the new head's deadline and
        # sets itself again (one timer call per timeout, not one reschedule per ack).

    def fail_up_to(self, offset: int, reason: str) -> None:
        """Call the callbacks of the entries at the head up to ``offset`` with ``reason``."""
        fifo = self._fifo
        while fifo and fifo[0][0] <= offset:
            _call(fifo.popleft()[2], reason)
        if self._odd:
            self._settle_odd(lambda odd: odd.end <= offset, reason)

    def fail_all(self, reason: str) -> None:
        """Call every waiting callback with ``reason`` now (nobody left to acknowledge)."""
        fifo = self._fifo
        while fifo:
            _call(fifo.popleft()[2], reason)
        if self._odd:
            self._settle_odd(lambda odd: True, reason)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _settle_odd(self, which: Callable[[_Odd], bool], outcome: str | None) -> None:
        settled = [odd for odd in self._odd if which(odd)]
        self._odd = [odd for odd in self._odd if not which(odd)]
        for odd in settled:  # after the list is updated: a callback may add entries
            if odd.timer is not None:
                odd.timer.cancel()
            _call(odd.done, outcome)

    def _expire_odd(self, odd: _Odd) -> None:
        if odd in self._odd:
            self._odd.remove(odd)
            _call(odd.done, self._timeout_reason)

    def _expire(self) -> None:
        self._timer = None
        loop = self._loop
        assert loop is not None
        now = loop.time()
        fifo = self._fifo
        reason = self._timeout_reason
        while fifo and fifo[0][1] <= now:
            _call(fifo.popleft()[2], reason)
        if fifo:
            self._timer = loop.call_at(fifo[0][1], self._expire)


class _Odd:
    """An entry out of the FIFO's order."""

    __slots__ = ("done", "end", "timer")

    def __init__(self, end: int, done: Done) -> None:
        self.end = end
        self.done = done
        self.timer: asyncio.TimerHandle | None = None


def _call(done: Done, outcome: str | None) -> None:
    # One callback's failure (a bug) must not leave the others unanswered.
    try:
        done(outcome)
    except Exception:
        log.exception("a put's wait callback failed")
