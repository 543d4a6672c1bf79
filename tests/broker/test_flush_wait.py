"""SYNC_FLUSH waits: a failed or slow sync becomes a remark, never a traceback."""

from __future__ import annotations

from concurrent.futures import Future

from rocklet.broker.flush_wait import wait_flushed
from rocklet.store.results import PutMessageStatus, PutResult


def put(durable: Future[bool] | None) -> PutResult:
    return PutResult(PutMessageStatus.PUT_OK, durable=durable)


async def test_durable_and_async_puts_need_no_remark() -> None:
    assert await wait_flushed(put(None), 1.0) is None  # ASYNC_FLUSH: nothing to wait for
    done: Future[bool] = Future()
    done.set_result(True)
    assert await wait_flushed(put(done), 1.0) is None


async def test_a_failed_sync_is_a_remark() -> None:
    # What the flush thread completes every pending future with when a sync raises.
    failed: Future[bool] = Future()
    failed.set_exception(OSError(5, "Input/output error"))
    remark = await wait_flushed(put(failed), 1.0)
    assert remark is not None and "flush to disk failed" in remark and "Input/output" in remark


async def test_a_timeout_leaves_the_group_commit_future_alone() -> None:
    slow: Future[bool] = Future()
    remark = await wait_flushed(put(slow), 0.05)
    assert remark is not None and "timed out" in remark
    # The future belongs to the flush thread's group commit: it must not be cancelled.
    assert not slow.cancelled()
    slow.set_result(True)
