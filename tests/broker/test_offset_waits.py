"""The FIFO that SYNC_MASTER and SYNC_FLUSH sends wait in, and its SYNC_FLUSH listener.

Deadlines are set apart by shifting the loop's clock for one registration (the loop's
``time`` patched for that call only), never by sleeping; every wait below ends on an
event or a callback.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, cast

import pytest

from rocklet.broker.flush_wait import FlushWaits, wait_flushed
from rocklet.broker.offset_waits import OffsetWaits
from rocklet.store.results import PutMessageStatus, PutResult

TIMEOUT = "timed out"


class Outcomes:
    """Callbacks that record what each entry was told, with an event per entry."""

    def __init__(self) -> None:
        self.told: dict[str, str | None] = {}
        self.order: list[str] = []
        self.events: dict[str, asyncio.Event] = {}

    def done(self, name: str) -> Any:
        self.events[name] = asyncio.Event()

        def callback(why: str | None) -> None:
            assert name not in self.told, f"{name} told twice"
            self.told[name] = why
            self.order.append(name)
            self.events[name].set()

        return callback

    async def wait(self, name: str, timeout_s: float = 5.0) -> str | None:
        await asyncio.wait_for(self.events[name].wait(), timeout_s)
        return self.told[name]


def add_later(waits: OffsetWaits, end: int, timeout_s: float, done: Any, shift: float) -> None:
    """Register as if ``shift`` seconds had passed (a later deadline, no sleep)."""
    loop = asyncio.get_running_loop()
    real = loop.time
    loop.time = lambda: real() + shift  # type: ignore[method-assign]
    try:
        waits.add(end, timeout_s, done)
    finally:
        del loop.time  # back to the class's method


async def test_progress_releases_the_head_in_order_and_nothing_beyond() -> None:
    waits, out = OffsetWaits(TIMEOUT), Outcomes()
    for n, end in enumerate((100, 200, 300)):
        waits.add(end, 5, out.done(f"s{n}"))
    waits.advance(250)
    assert out.order == ["s0", "s1"] and out.told == {"s0": None, "s1": None}
    assert len(waits) == 1
    waits.advance(300)
    assert out.order == ["s0", "s1", "s2"] and len(waits) == 0


async def test_the_head_times_out_while_the_ones_behind_it_are_acknowledged() -> None:
    waits, out = OffsetWaits(TIMEOUT), Outcomes()
    waits.add(100, 0.2, out.done("head"))
    add_later(waits, 200, 0.2, out.done("later"), shift=30)  # its deadline is 30 s on
    assert await out.wait("head") == TIMEOUT  # the single timer fired for the head
    assert "later" not in out.told and len(waits) == 1
    waits.advance(200)  # the acknowledgement comes after the head gave up
    assert out.told["later"] is None and out.order == ["head", "later"]


async def test_an_entry_out_of_order_keeps_its_own_deadline_and_offset() -> None:
    waits, out = OffsetWaits(TIMEOUT), Outcomes()
    add_later(waits, 500, 0.2, out.done("long"), shift=30)
    waits.add(600, 0.2, out.done("short"))  # an earlier deadline than the tail's
    waits.add(400, 30, out.done("low"))  # a lower offset than the tail's
    assert await out.wait("short") == TIMEOUT
    assert "long" not in out.told and "low" not in out.told
    waits.advance(450)  # releases the low one, not the one at 500 in front of it
    assert out.told["low"] is None and "long" not in out.told
    waits.fail_all("stopped")
    assert out.told["long"] == "stopped" and len(waits) == 0


async def test_fail_all_answers_everyone_once_and_a_failing_callback_does_not_stop_it() -> None:
    waits, out = OffsetWaits(TIMEOUT), Outcomes()

    def broken(_why: str | None) -> None:
        raise RuntimeError("a bug in one callback")

    waits.add(100, 0.1, broken)
    waits.add(200, 0.1, out.done("second"))
    waits.fail_all("no slave left")
    assert out.told == {"second": "no slave left"}
    # The timer was cancelled with the FIFO empty: nothing is told twice later.
    waits.add(300, 0.05, out.done("third"))
    assert await out.wait("third") == TIMEOUT
    assert out.order == ["second", "third"]


def _put(durable: Future[bool], end: int) -> PutResult:
    return PutResult(PutMessageStatus.PUT_OK, end - 10, 10, durable=durable)


async def _told(flush_waits: FlushWaits, result: PutResult) -> asyncio.Future[str | None]:
    told: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    now = flush_waits.on_flushed(result, told.set_result)
    if now is None or isinstance(now, str):
        told.set_result(now)
    return told


async def test_flush_waits_answer_as_wait_flushed_does() -> None:
    service = SimpleNamespace(progress_listeners=[])
    loop = asyncio.get_running_loop()
    flush_waits = FlushWaits(cast(Any, service), 0.2, loop)
    (listener,) = service.progress_listeners

    # Done before the wait starts: answered at once, with wait_flushed's remark.
    done: Future[bool] = Future()
    done.set_result(True)
    assert flush_waits.on_flushed(_put(done, 100), lambda _w: None) is None
    failed: Future[bool] = Future()
    failed.set_exception(OSError("flush failed"))
    assert flush_waits.on_flushed(_put(failed, 100), lambda _w: None) == await wait_flushed(
        _put(failed, 100), 0.2
    )

    # Progress comes from the flush thread: one hop to the loop releases up to it.
    a, b, c = (Future[bool]() for _ in range(3))
    told_a = await _told(flush_waits, _put(a, 100))
    told_b = await _told(flush_waits, _put(b, 200))
    told_c = await _told(flush_waits, _put(c, 300))
    threading.Thread(target=listener, args=(200, True)).start()
    assert await asyncio.wait_for(told_a, 5) is None
    assert await asyncio.wait_for(told_b, 5) is None
    assert not told_c.done()
    # A failed sync fails every request up to its offset, with wait_flushed's remark.
    threading.Thread(target=listener, args=(300, False)).start()
    expected = await wait_flushed(_put(failed, 300), 0.2)
    assert await asyncio.wait_for(told_c, 5) == expected

    # Nobody settles it: the timeout, worded as wait_flushed words it.
    slow: Future[bool] = Future()
    told_slow = await _told(flush_waits, _put(slow, 400))
    assert await asyncio.wait_for(told_slow, 5) == await wait_flushed(_put(slow, 400), 0.2)
    assert len(flush_waits) == 0


@pytest.mark.parametrize("ok", [True, False])
async def test_progress_after_the_loop_closed_is_dropped(ok: bool) -> None:
    closed = asyncio.new_event_loop()
    closed.close()
    service = SimpleNamespace(progress_listeners=[])
    FlushWaits(cast(Any, service), 1.0, closed)
    service.progress_listeners[0](100, ok)  # from the flush thread at store close: no error
