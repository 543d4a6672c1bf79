"""Start a coroutine inline and make a task of it only if it has to wait.

A remoting server answers most sends and pulls without ever waiting (the store call is
synchronous under ASYNC_FLUSH, a pull that finds messages answers at once), yet a task
per request cost a measurable share of each answer: creation, scheduling, one more
event-loop pass. :func:`start_eagerly` runs the coroutine's first step right away, in
the caller's callback; a coroutine that finishes there costs no task at all, one that
suspends continues in a task from where it stopped. Python 3.12's eager tasks
(``asyncio.Task(..., eager_start=True)``) do the same and are used there; 3.11 gets the
equivalent below.

The one difference from a task that matters: until its first real suspension the
coroutine runs outside any task, so it must not call :func:`asyncio.current_task` or
enter :func:`asyncio.timeout` before then (on 3.11).
"""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["start_eagerly"]


def start_eagerly(
    coro: Coroutine[Any, Any, None], loop: asyncio.AbstractEventLoop
) -> asyncio.Task[None] | None:
    """Run ``coro`` up to its first suspension now; continue it in a task if it has one.

    Args:
        coro: A coroutine not started yet that handles its own exceptions (one raised
            in the first step propagates to the caller on 3.11, and is kept in a
            finished task nobody sees on 3.12).
        loop: The running loop (tasks are created on it).

    Returns:
        ``None`` when the coroutine already finished, else the task that runs the rest.
    """
    if sys.version_info >= (3, 12):
        task = asyncio.Task(coro, loop=loop, eager_start=True)
        return None if task.done() else task
    try:
        waiting = coro.send(None)
    except StopIteration:
        return None
    return loop.create_task(_resume(coro, waiting))


async def _resume(coro: Coroutine[Any, Any, None], waiting: Any) -> None:
    await _carry_on(coro, waiting)


@types.coroutine
def _carry_on(coro: Coroutine[Any, Any, None], waiting: Any) -> Generator[Any, Any, None]:
    """Drive a coroutine that already ran up to ``waiting``, as ``yield from`` would.

    What the coroutine yields (a future it waits on, or ``None`` for a bare yield) goes
    to the task running us; what the task sends or throws in (a result, a
    cancellation) goes back into the coroutine.
    """
    while True:
        try:
            sent = yield waiting
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # cancellation included: it is the coroutine's
            try:
                waiting = coro.throw(exc)
            except StopIteration:
                return
        else:
            try:
                waiting = coro.send(sent)
            except StopIteration:
                return
