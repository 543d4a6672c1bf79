"""Coarse deadlines: 10 ms slots behind one loop timer, and no expiry before its deadline.

The timers are the running loop's own; a thin wrapper counts the ones asked for.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from rocklet.client.errors import RequestTimeoutError
from rocklet.protocol import RemotingCommand
from rocklet.transport import ProcessorRegistry, RemotingServer, RequestContext
from rocklet.transport.connection import HandlerResult
from rocklet.transport.deadlines import RESOLUTION_S, Deadlines
from rocklet.transport.dial import open_connection

TIMEOUT = 5.0


class CountingLoop:
    """The running loop, with its ``call_at`` calls counted."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.timers = 0

    def time(self) -> float:
        return self.loop.time()

    def call_at(self, when: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
        self.timers += 1
        return self.loop.call_at(when, callback, *args)


class Expired(list[tuple[float, int]]):
    """``(loop time, entry)`` of each expiry, with an event per expiry."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    async def until(self, count: int) -> None:
        async with asyncio.timeout(TIMEOUT):
            while len(self) < count:
                self.changed.clear()
                await self.changed.wait()


def _deadlines() -> tuple[Expired, CountingLoop, Deadlines[int]]:
    """A fresh instance on the counting loop, recording what expires and when."""
    expired = Expired()
    counting = CountingLoop()

    def expire(entry: int) -> None:
        expired.append((counting.time(), entry))
        expired.changed.set()

    return expired, counting, Deadlines(cast(asyncio.AbstractEventLoop, counting), expire)


async def test_an_entry_expires_at_its_deadline_never_before() -> None:
    expired, counting, deadlines = _deadlines()
    deadline = counting.time() + 0.05
    deadlines.add(deadline, 7)
    await expired.until(1)
    [(at, entry)] = expired
    assert entry == 7
    # The loop's clock rounds timers to the millisecond; the slot only ever adds time.
    assert at >= deadline - 0.001
    assert len(deadlines) == 0


async def test_slots_share_one_timer_armed_for_the_earliest() -> None:
    expired, counting, deadlines = _deadlines()
    # Start at a slot boundary so that the first 100 deadlines (0.05 ms apart) share one.
    base = (int(counting.time() / RESOLUTION_S) + 2) * RESOLUTION_S + 0.0001
    for n in range(100):
        deadlines.add(base + n * 0.00005, n)
    assert counting.timers == 1
    assert len(deadlines) == 100
    deadlines.add(base + RESOLUTION_S, 100)  # the next slot: the same timer serves it
    assert counting.timers == 1
    await expired.until(100)
    # The first slot fired and re-armed the timer for the second.
    assert deadlines.timer_armed
    await expired.until(101)
    assert [entry for _, entry in expired] == list(range(101))
    assert counting.timers == 2
    assert not deadlines.timer_armed
    assert len(deadlines) == 0


async def test_discarded_entries_never_expire_and_leave_no_timer() -> None:
    """Answered entries drop out: once every slot is empty, the timer is not re-armed."""
    expired, counting, deadlines = _deadlines()
    now = counting.time()
    for n in range(50):  # 50 slots' worth of requests, each answered at once
        deadlines.add(now + 0.02 + n * RESOLUTION_S, n)
        deadlines.discard(n)
    deadlines.discard(7)  # twice: nothing
    deadlines.discard(1000)  # never added: nothing
    assert len(deadlines) == 0
    deadlines.add(now + 0.6, -1)  # a marker, left waiting
    await expired.until(1)
    assert [entry for _, entry in expired] == [-1]
    # One timer for the first slot; when it fired in vain it went straight to the marker.
    assert counting.timers == 2
    assert not deadlines.timer_armed


async def test_a_long_run_of_answered_slots_is_cleared_in_bounded_passes() -> None:
    """Slots emptied by answers (each waiting out its timeout) cost a few short passes,
    not one long one, and a slot emptied and filled again is queued once."""
    expired, counting, deadlines = _deadlines()
    base = (int(counting.time() / RESOLUTION_S) + 2) * RESOLUTION_S
    slots = 150
    for n in range(300):
        for again in range(3):  # filled, answered, filled again...
            entry = n * 3 + again
            deadlines.add(base + n * RESOLUTION_S / 10, entry)  # 30 slots in all
            deadlines.discard(entry)
    for n in range(slots):  # one slot per 10 ms for 1.5 s, all answered
        deadlines.add(base + 0.3 + n * RESOLUTION_S, n)
        deadlines.discard(n)
    deadlines.add(base + 0.3 + slots * RESOLUTION_S, -1)  # a marker, left waiting
    await expired.until(1)
    assert [entry for _, entry in expired] == [-1]
    at, _ = expired[0]
    assert at >= base + 0.3 + slots * RESOLUTION_S - 0.001
    # 180 emptied slots, 64 dropped per firing: the first timer, 2-3 re-arms, the marker.
    assert 3 <= counting.timers <= 2 + (30 + slots) // 64 + 1
    assert not deadlines.timer_armed


async def test_the_timer_follows_the_earliest_deadline() -> None:
    """A short timeout added after a long one is not kept waiting for it, and an entry
    added again keeps only its new deadline."""
    expired, counting, deadlines = _deadlines()
    now = counting.time()
    deadlines.add(now + 30.0, 1)
    deadlines.add(now + 0.02, 5)  # earlier than the armed slot: re-arms
    deadlines.add(now + 0.08, 5)  # again: moved
    deadlines.add(now + 0.05, 6)
    assert len(deadlines) == 3
    await expired.until(2)
    [(_, first), (at5, second)] = expired
    assert (first, second) == (6, 5)
    assert now + 0.08 - 0.001 <= at5 < now + 1.0
    deadlines.discard(5)  # after it expired: nothing
    assert len(deadlines) == 1
    assert deadlines.timer_armed  # for the 30 s one
    deadlines.clear()
    assert len(deadlines) == 0
    assert not deadlines.timer_armed


async def test_clear_cancels_every_timer() -> None:
    expired, counting, deadlines = _deadlines()
    now = counting.time()
    for n in range(5):
        deadlines.add(now + 0.02 + n * RESOLUTION_S, n)
    deadlines.clear()
    assert len(deadlines) == 0
    # Past every deadline, with a marker entry of a fresh instance as the clock.
    marker, _, later = _deadlines()
    later.add(now + 0.02 + 6 * RESOLUTION_S, -1)
    await marker.until(1)
    assert expired == []


# -- requests on a connection -------------------------------------------------------

ANSWERS = 3000
NEVER = 3001


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer]:
    registry = ProcessorRegistry()
    never = asyncio.Event()

    async def answers(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        return cmd.make_response(0, body=b"x" * 4096)

    async def hangs(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        await never.wait()
        return cmd.make_response(0)

    registry.register(ANSWERS, answers)
    registry.register(NEVER, hangs)
    async with RemotingServer("127.0.0.1", 0, registry) as srv:
        yield srv
        never.set()  # the stuck request's handler ends, so stopping does not wait


async def test_a_late_slot_does_not_fail_a_later_request(server: RemotingServer) -> None:
    """Requests answered before their slot fires are untouched by it; a stuck one
    times out while the others in its slot were answered."""
    conn = await open_connection("127.0.0.1", server.port)
    try:
        stuck = asyncio.create_task(conn.request(RemotingCommand(NEVER), 0.1))
        quick = [conn.request(RemotingCommand(ANSWERS), 0.1) for _ in range(5)]
        answers = await asyncio.gather(*quick)
        assert len(answers) == 5
        with pytest.raises(RequestTimeoutError):
            await asyncio.wait_for(stuck, TIMEOUT)
        # Past that slot, the connection answers as before.
        answer = await conn.request(RemotingCommand(ANSWERS), TIMEOUT)
        assert len(answer.body) == 4096
        assert conn.pending_requests == 0
    finally:
        await conn.close()
