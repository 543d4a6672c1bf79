"""Long polling: pulls that found nothing wait here until a message arrives.

RocketMQ's ``PullRequestHoldService`` parks a pull whose queue is caught up and
re-checks it every 5 s, plus when the reput service reports an arrival. We keep only
the push half: the store's dispatch listener calls :meth:`PullHoldService.notify_run`
once for each run of messages a put adds to a queue (:meth:`~PullHoldService.notify`
for a single one), which wakes exactly the pulls parked on that queue whose offset is
now readable and whose subscription matches a tag hash of the run. A parked pull costs
one future, not a polling loop, and the C++ client (which re-pulls at once on
PULL_NOT_FOUND) is kept from spinning (docs/protocol.md).

Everything here runs on the event loop; the store calls the listener from the thread
that appended, which is the loop too (puts happen on the loop; the broker hands a
worker thread's arrivals to the loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from rocklet.transport.deadlines import Deadlines

__all__ = ["PullHoldService"]


@dataclass(slots=True, eq=False)
class _Hold:
    offset: int
    tag_codes: Collection[int] | None
    future: asyncio.Future[bool] = field(repr=False)


class PullHoldService:
    """Parks pulls per (topic, queue) and wakes them on arrival.

    Not thread-safe: call every method from the event loop.
    """

    def __init__(self) -> None:
        self._holds: dict[tuple[str, int], list[_Hold]] = {}
        #: The queues with a pull parked (read-only for others: the store's arrival
        #: hook skips :meth:`notify` for the others, i.e. for most puts).
        self.parked_queues: Mapping[tuple[str, int], object] = self._holds
        self._closed = False
        self._changed = asyncio.Event()  # the number held changed
        # Deadline slots hold numbers, not futures, and a woken pull leaves its slot at
        # once: ~800 settled futures a second kept for a whole hold (15 s) reached the
        # garbage collector's old generation and set off its full collections (tens of
        # ms on the loop).
        self._deadlines: Deadlines[int] | None = None
        self._waiting: dict[int, asyncio.Future[bool]] = {}
        self._next_id = 0

    @property
    def held(self) -> int:
        """Number of pulls parked right now."""
        return sum(len(holds) for holds in self._holds.values())

    async def wait(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        timeout_s: float,
        tag_codes: Collection[int] | None = None,
    ) -> bool:
        """Wait until a message at or past ``offset`` arrives, or the timeout passes.

        Args:
            topic: Topic of the pull.
            queue_id: Queue of the pull.
            offset: The offset the pull asked for (the queue's max offset when parked).
            timeout_s: How long to hold (the pull's suspendTimeoutMillis).
            tag_codes: Tag hashes of the subscription, or ``None`` for every message.

        Returns:
            ``True`` when woken by an arrival, ``False`` on timeout or shutdown.
        """
        if self._closed or timeout_s <= 0:
            return False
        key = (topic, queue_id)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        hold = _Hold(offset, tag_codes, future)
        self._holds.setdefault(key, []).append(hold)
        self._changed.set()
        # The pull awaits its own future and its deadline settles it: an arrival wakes
        # the pull in the loop's next pass. ``asyncio.wait_for`` would put a second
        # future (and a pass) between the arrival and the answer, and a task per hold on
        # 3.12+. A coarse deadline slot costs less than a loop timer per hold.
        deadlines = self._deadlines
        if deadlines is None:
            deadlines = self._deadlines = Deadlines(loop, self._expire)
        hold_id = self._next_id
        self._next_id = hold_id + 1
        self._waiting[hold_id] = future
        deadlines.add(loop.time() + timeout_s, hold_id)
        try:
            return await future
        finally:
            del self._waiting[hold_id]
            deadlines.discard(hold_id)
            holds = self._holds.get(key)
            if holds is not None:
                if hold in holds:
                    holds.remove(hold)
                if not holds:
                    del self._holds[key]
            self._changed.set()

    async def wait_parked(self, count: int = 1) -> None:
        """Wait until at least ``count`` pulls are parked (for tests and tooling)."""
        await self.wait_held(lambda held: held >= count)

    async def wait_held(self, check: Callable[[int], bool]) -> None:
        """Wait until ``check(held)`` is true (for tests and tooling)."""
        while not check(self.held):
            self._changed.clear()
            await self._changed.wait()

    def notify(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None) -> None:
        """Wake the pulls parked on a queue that can now read something.

        Args:
            topic: Topic of the new message.
            queue_id: Its queue.
            max_offset: The queue's new max offset (next index to be written).
            tags_code: The message's tag hash (``None`` when unknown: wake every pull).
        """
        self.notify_run(topic, queue_id, max_offset - 1, (tags_code,))

    def notify_run(
        self, topic: str, queue_id: int, first_offset: int, tags_codes: Sequence[int | None]
    ) -> None:
        """Wake the parked pulls a run of new messages in one queue can answer.

        A pull wakes when one of the run's messages at or past its offset matches its
        tags, as if :meth:`notify` had been called for each message in turn, with one
        look-up for the whole run.

        Args:
            topic: Topic of the messages.
            queue_id: Their queue.
            first_offset: The run's first queue offset.
            tags_codes: Each message's tag hash, in queue order (``None``: unknown).
        """
        holds = self._holds.get((topic, queue_id))
        if not holds:
            return
        end = first_offset + len(tags_codes)
        for hold in holds:
            if hold.future.done() or hold.offset >= end:
                continue
            wanted = hold.tag_codes
            if wanted:
                start = max(0, hold.offset - first_offset)
                if not any(c is None or c in wanted for c in tags_codes[start:]):
                    continue
            hold.future.set_result(True)

    def _expire(self, hold_id: int) -> None:
        future = self._waiting.get(hold_id)
        if future is not None and not future.done():
            future.set_result(False)

    def close(self) -> None:
        """Release every parked pull (they answer as on timeout). Idempotent."""
        self._closed = True
        if self._deadlines is not None:
            self._deadlines.clear()
        for holds in self._holds.values():
            for hold in holds:
                if not hold.future.done():
                    hold.future.set_result(False)
