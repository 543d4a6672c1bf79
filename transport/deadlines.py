"""Timeouts that almost never fire, kept with one loop timer per instance.

Every request a connection sends and every pull the broker parks carries a timeout
that its answer nearly always beats. One loop timer each costs an insert into the
loop's timer heap and, when cancelled, a handle close: 2.7 µs a request on uvloop,
measured in a warm loop (the end-to-end case paid it three times a 1 ms tick).

:class:`Deadlines` rounds each deadline up to the next :data:`RESOLUTION_S` and files
the entry in that slot. Once an entry is answered its owner calls
:meth:`~Deadlines.discard`, and a slot left empty is dropped. One loop timer serves
every slot: it is armed for the earliest slot known and, when it fires, expires the
slots due, drops emptied slots from the front of the time order (a bounded number per
firing) and re-arms for the new front. While answers beat their timeouts the timer
therefore wakes the loop a few times a second rather than once per slot (a hundred
times a second on a busy connection), and neither timer handles nor entries live long
enough to reach the garbage collector's old generation. A timeout fires up to
:data:`RESOLUTION_S` later than asked.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import sys
from collections.abc import Callable, Hashable
from typing import Final, Generic, TypeVar

__all__ = ["RESOLUTION_S", "Deadlines"]

#: How late a timeout may fire, and the width of one slot's time.
RESOLUTION_S: Final = 0.01

#: The armed slot when no timer is armed: later than any real slot.
_UNARMED: Final = sys.maxsize

#: Emptied slots dropped from the time order per firing: a long run of them (a busy
#: connection leaves ~100 a second, each waiting out its timeout) is cleared in passes
#: of ~30 µs, one every ~0.6 s, rather than in one long pass on the loop.
_PRUNE_PER_FIRE: Final = 64

T = TypeVar("T", bound=Hashable)


class Deadlines(Generic[T]):
    """Calls ``expire(entry)`` for each entry still here once its deadline has passed.

    Event loop thread only. An entry is a small hashable value, unique among the
    entries waiting (a request's opaque number, not the future for its answer).

    Args:
        loop: The loop whose clock (:meth:`asyncio.AbstractEventLoop.time`) the
            deadlines are on.
        expire: Called with each entry not discarded by (or up to
            :data:`RESOLUTION_S` after) its deadline.
    """

    __slots__ = (
        "_armed",
        "_expire",
        "_loop",
        "_order",
        "_queued",
        "_slot_of",
        "_slots",
        "_timer",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, expire: Callable[[T], object]) -> None:
        self._loop = loop
        self._expire = expire
        # Each slot's entries in the order they came (a dict as an ordered set).
        self._slots: dict[int, dict[T, None]] = {}
        self._slot_of: dict[T, int] = {}
        # Slot numbers in time order (a heap), each once; those of dropped slots linger
        # until popped, and a dropped slot filled again is not queued a second time.
        self._order: list[int] = []
        self._queued: set[int] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._armed = _UNARMED

    def __len__(self) -> int:
        """Entries waiting for their deadline."""
        return len(self._slot_of)

    @property
    def timer_armed(self) -> bool:
        """Whether a loop timer is set (for tests and tooling)."""
        return self._timer is not None

    def add(self, deadline: float, entry: T) -> None:
        """Expire ``entry`` at ``deadline`` (loop time, seconds) unless discarded first."""
        if entry in self._slot_of:  # a second deadline for one entry replaces the first
            self.discard(entry)
        slot = math.ceil(deadline / RESOLUTION_S)
        entries = self._slots.get(slot)
        if entries is None:
            entries = self._slots[slot] = {}
            if slot not in self._queued:
                self._queued.add(slot)
                heapq.heappush(self._order, slot)
            if slot < self._armed:
                self._arm(slot)
        entries[entry] = None
        self._slot_of[entry] = slot

    def discard(self, entry: T) -> None:
        """Forget ``entry``: it was answered. Does nothing for an unknown entry."""
        slot = self._slot_of.pop(entry, None)
        if slot is None:
            return
        entries = self._slots[slot]
        del entries[entry]
        if not entries:
            del self._slots[slot]

    def clear(self) -> None:
        """Drop every entry and cancel the timer (the owner is closing)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._armed = _UNARMED
        self._slots.clear()
        self._slot_of.clear()
        self._order.clear()
        self._queued.clear()

    def _arm(self, slot: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed = slot
        self._timer = self._loop.call_at(slot * RESOLUTION_S, self._fire, slot)

    def _fire(self, due: int) -> None:
        self._timer = None
        self._armed = _UNARMED
        order, queued, slots, slot_of = self._order, self._queued, self._slots, self._slot_of
        expired: list[T] = []
        while order and order[0] <= due:
            slot = heapq.heappop(order)
            queued.discard(slot)
            entries = slots.pop(slot, None)
            if entries:
                for entry in entries:
                    del slot_of[entry]
                expired.extend(entries)
        for _ in range(_PRUNE_PER_FIRE):
            if not order or order[0] in slots:
                break
            queued.discard(heapq.heappop(order))
        # The front may still be an emptied slot (a long run of them): the timer then
        # fires for nothing at its time and goes on dropping them.
        if order and self._timer is None:
            self._arm(order[0])
        expire = self._expire
        for entry in expired:
            expire(entry)
