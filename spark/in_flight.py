"""A window of sends in flight: the sink's batch sends, the exactly-once half messages.

Both keep several sends running on one producer so the round trips overlap, give up
at the first failure (the Spark task fails and is retried), and must not leave sends
running behind them when they do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Self

__all__ = ["InFlight"]


class InFlight:
    """Runs up to ``window`` sends at once; the first failure fails them all.

    :meth:`submit` waits for a free place and :meth:`drain` for every send; both raise
    the first failure they see. Leaving the ``async with`` block cancels the sends
    still running (after a failure, or when the caller itself fails).

    Args:
        window: Sends running at once, at least 1.
    """

    def __init__(self, window: int) -> None:
        if window < 1:
            raise ValueError(f"a window of {window} sends")
        self._window = window
        self._tasks: set[asyncio.Task[object]] = set()

    async def submit(self, send: Coroutine[Any, Any, object]) -> None:
        """Start ``send`` once fewer than ``window`` run; it keeps its own results."""
        try:
            while len(self._tasks) >= self._window:
                await self._wait(asyncio.FIRST_COMPLETED)
        except BaseException:
            send.close()  # never started: no "never awaited" warning
            raise
        self._tasks.add(asyncio.get_running_loop().create_task(send))

    async def drain(self) -> None:
        """Wait for every send; raise as soon as one failed."""
        while self._tasks:
            await self._wait(asyncio.FIRST_EXCEPTION)

    async def _wait(self, when: str) -> None:
        done, self._tasks = await asyncio.wait(self._tasks, return_when=when)
        failure: BaseException | None = None
        for task in done:  # every failure retrieved, the first one raised
            exc = asyncio.CancelledError() if task.cancelled() else task.exception()
            if failure is None:
                failure = exc
        if failure is not None:
            raise failure

    async def cancel(self) -> None:
        """Cancel the sends still running and wait until they stopped."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.cancel()
