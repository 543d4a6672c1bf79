"""SYNC_FLUSH: wait for a put's bytes to reach the disk before answering or moving on.

Under SYNC_FLUSH the store gives every put a durability future (its group commit);
under ASYNC_FLUSH it gives none and there is nothing to wait for. Every processor that
stores a message on a client's behalf (send, send-back, END_TRANSACTION's committed
copy, stored replies) and every service that moves a message and then records that it
did (transaction check-back) waits here, so under SYNC_FLUSH nothing is acknowledged,
and no progress is recorded, before the disk has the message.
"""

from __future__ import annotations

import asyncio

from rocklet.store.results import PutResult

__all__ = ["wait_flushed"]


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
