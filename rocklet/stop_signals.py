"""Ctrl-C (SIGINT) and SIGTERM as a clean stop for commands that run until stopped.

``rocklet consume --timeout 0``, ``rocklet admin clusterRT`` and ``startMonitoring``
run until the user stops them. Rather than letting the signal raise
``KeyboardInterrupt`` wherever the loop happens to be (a traceback, and death by the
signal), :func:`stop_on_signals` turns it into an :class:`asyncio.Event` the command
waits on, so it ends as it would at its natural end, exit status 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Awaitable
from typing import Final, TypeVar

__all__ = ["STOP_SIGNALS", "stop_on_signals", "until_stopped"]

#: The signals that stop such a command.
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)

_T = TypeVar("_T")


@contextlib.asynccontextmanager
async def stop_on_signals() -> AsyncIterator[asyncio.Event]:
    """An event the first SIGINT or SIGTERM sets, while inside the ``async with``.

    The handlers are the running loop's (``loop.add_signal_handler``) and are removed
    on the way out, so a signal after that acts as usual again.

    Yields:
        The stop event.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    try:
        yield stop
    finally:
        for signum in STOP_SIGNALS:
            with contextlib.suppress(RuntimeError):
                loop.remove_signal_handler(signum)


async def until_stopped(stop: asyncio.Event, work: Awaitable[_T]) -> _T | None:
    """Run ``work`` until it returns or ``stop`` is set, whichever comes first.

    Args:
        stop: The stop event (:func:`stop_on_signals`).
        work: The command's work.

    Returns:
        What ``work`` returned, or ``None`` when ``stop`` was set first (``work`` is
        then cancelled and waited for, so its clean-up has run).

    Raises:
        Exception: What ``work`` raised (also while it was being cancelled).
    """
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # this caller is cancelled: so is the work
        task.cancel()
        raise
    finally:
        stopped.cancel()
    if task.done():
        return task.result()
    task.cancel()
    await asyncio.wait({task})  # its clean-up (a producer's close) runs before the exit
    if not task.cancelled() and (failed := task.exception()) is not None:
        raise failed
    return None
