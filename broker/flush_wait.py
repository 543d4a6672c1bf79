"""SYNC_FLUSH: wait for a put's bytes to reach the disk before answering or moving on.

Under SYNC_FLUSH the store gives every put a durability future (its group commit);
under ASYNC_FLUSH it gives none and there is nothing to wait for. Every processor that
stores a message on a client's behalf (send, send-back, END_TRANSACTION's committed
copy, stored replies) and every service that moves a message and then records that it
did (transaction check-back) waits here, so under SYNC_FLUSH nothing is acknowledged,
and no progress is recorded, before the disk has the message.

Sends (and the other puts made on a client's behalf) wait through :class:`FlushWaits`:
no task, future or timer per put, one hop from the flush thread to the event loop per
group commit. :func:`wait_flushed` is the awaitable form, for services that move a
message and then record that they did.
"""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import Future
from typing import TYPE_CHECKING, Final

from rocklet.broker.offset_waits import Done, OffsetWaits
from rocklet.store.results import PutResult

if TYPE_CHECKING:
    from rocklet.store._flush import FlushService

__all__ = ["LATER", "FlushWaits", "outcome_of", "wait_flushed"]


async def wait_flushed(result: PutResult, timeout_s: float) -> str | None:
    """Wait, within ``syncFlushTimeout``, until a put is on disk.

    The event loop keeps serving other connections meanwhile. Giving up (timeout, or
    the caller cancelled) leaves the store's future alone: it belongs to the flush
    thread's group commit, which other puts share.

    Args:
        result: A successful put.
        timeout_s: ``syncFlushTimeout`` in seconds.

    Returns:
        ``None`` when the put is durable (or the store flushes asynchronously), else
        why not, for the answer's remark.
    """
    durable = result.durable
    if durable is None:
        return None
    inner = asyncio.wrap_future(durable)
    inner.add_done_callback(_retrieve)  # nobody may be left to read a late failure
    try:
        flushed = await asyncio.wait_for(asyncio.shield(inner), timeout_s)
    except TimeoutError:
        return f"flush to disk timed out after {timeout_s:g} s; the message is stored"
    except OSError as exc:
        return f"flush to disk failed ({exc}); the message is stored but may not be durable"
    if not flushed:
        return "flush to disk failed; the message is stored but may not be durable"
    return None


def _retrieve(future: asyncio.Future[bool]) -> None:
    if not future.cancelled():
        future.exception()


class FlushWaits:
    """SYNC_FLUSH waits of many puts, answered by callbacks: one loop hop per sync.

    :func:`wait_flushed` costs a future, a thread-safe wake-up of the loop and a timer
    per put. This instead listens to the flush thread's progress
    (``FlushService.progress_listeners``), hops to the event loop once per group commit, and
    releases the puts waiting in an :class:`~rocklet.broker.offset_waits.OffsetWaits`
    FIFO up to the flushed offset. The answers (and their remarks) are
    :func:`wait_flushed`'s. Event loop only, except the progress listener.

    Args:
        flush_service: The store's flush service (this listens to its progress).
        timeout_s: ``syncFlushTimeout`` in seconds.
        loop: The broker's event loop.
    """

    def __init__(
        self, flush_service: FlushService, timeout_s: float, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._timeout_s = timeout_s
        self._loop = loop
        self._waits = OffsetWaits(
            f"flush to disk timed out after {timeout_s:g} s; the message is stored"
        )
        flush_service.progress_listeners.append(self._on_progress)

    def __len__(self) -> int:
        return len(self._waits)

    def on_flushed(self, result: PutResult, done: Done) -> str | _Later | None:
        """Call ``done`` once ``result`` is durable, unless that is known now.

        Args:
            result: A successful put with a durability future (SYNC_FLUSH).
            done: Called later with ``None`` when durable, else the remark.

        Returns:
            ``None`` (durable) or the remark when known now; :data:`LATER` when
            ``done`` will be called.
        """
        durable = result.durable
        assert durable is not None
        if durable.done():  # already flushed (or failed) when the put returned
            return outcome_of(durable)
        self._waits.add(result.wrote_offset + result.wrote_bytes, self._timeout_s, done)
        return LATER

    def _on_progress(self, offset: int, ok: bool) -> None:
        # Flush thread: one hop to the loop per group commit round.
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            self._loop.call_soon_threadsafe(self._progress, offset, ok)

    def _progress(self, offset: int, ok: bool) -> None:
        if ok:
            self._waits.advance(offset)
        else:
            self._waits.fail_up_to(offset, _FAILED.format("flush failed"))


class _Later:
    """The type of :data:`LATER`."""

    __slots__ = ()


#: Returned when the outcome comes later, through the callback.
LATER: Final = _Later()

_FAILED = "flush to disk failed ({}); the message is stored but may not be durable"


def outcome_of(durable: Future[bool]) -> str | None:
    """:func:`wait_flushed`'s remark for a durability future that is done."""
    if durable.cancelled():
        return "flush to disk failed; the message is stored but may not be durable"
    exc = durable.exception()
    if exc is not None:
        return _FAILED.format(exc)
    if not durable.result():
        return "flush to disk failed; the message is stored but may not be durable"
    return None
