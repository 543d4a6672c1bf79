"""Owned background tasks of a consumer, and where their failures go.

Every task a consumer starts is kept here and cancelled (and awaited) by
:meth:`Background.cancel_all`; nothing dangles (style.md §8 item 10). A task that fails
unexpectedly is logged and its exception *reported*: to the ``on_error`` callback
when there is one, otherwise kept and raised by the consumer's next call through
:meth:`Background.check_errors` (aiokafka's ``_push_error_to_user`` /
``check_errors``), so a failure is never swallowed (item 11). Expected, transient
failures (a broker restarting: transport errors, broker error answers, a missing
route) are only logged by :meth:`Background.every`, and retried at the next tick.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from rocklet.client._log import get_logger
from rocklet.client.errors import BrokerError, NoRouteError, TransportError

__all__ = ["Background", "ErrorCallback"]

_log = get_logger(__name__)

#: Receives unexpected background failures.
ErrorCallback = Callable[[BaseException], object]


class Background:
    """The tasks of one consumer and the route of their failures. Event loop only.

    Args:
        owner: Names the tasks and log lines (the consumer group).
        on_error: Receives unexpected failures; ``None`` keeps the first for
            :meth:`check_errors`.
    """

    def __init__(self, owner: str, on_error: ErrorCallback | None) -> None:
        self._owner = owner
        self._on_error = on_error
        self._tasks: set[asyncio.Task[Any]] = set()
        self._error: BaseException | None = None

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coro`` as an owned task; an exception it ends with is reported."""
        task = asyncio.get_running_loop().create_task(coro, name=f"rocklet-{self._owner}-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self.report(exc, task.get_name())

    def report(self, exc: BaseException, where: str) -> None:
        """Log an unexpected failure and pass it on (callback, or the next call).

        Args:
            exc: The failure.
            where: What was running.
        """
        _log.error("consumer background failure", owner=self._owner, where=where, exc_info=exc)
        if self._on_error is not None:
            try:
                self._on_error(exc)
            except Exception:
                _log.exception("on_error callback failed", owner=self._owner)
        elif self._error is None:
            self._error = exc

    def check_errors(self) -> None:
        """Raise, once, the first failure no callback received.

        Raises:
            BaseException: That failure.
        """
        exc, self._error = self._error, None
        if exc is not None:
            raise exc

    async def cancel_all(self) -> None:
        """Cancel every owned task and wait for them to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def every(self, interval_s: float, step: Callable[[], Awaitable[None]]) -> None:
        """Run ``step`` every ``interval_s`` seconds until cancelled (a timer's body).

        Args:
            interval_s: Seconds between runs.
            step: One run; transient failures are logged, others reported.
        """
        while True:
            await asyncio.sleep(interval_s)
            await self.run_step(step)

    async def run_step(self, step: Callable[[], Awaitable[None]]) -> None:
        """Run ``step`` once, logging transient failures and reporting the rest."""
        try:
            await step()
        except (TransportError, BrokerError, NoRouteError) as exc:
            _log.warning("periodic consumer task failed", owner=self._owner, error=str(exc))
        except Exception as exc:
            self.report(exc, getattr(step, "__name__", "step"))

    async def when_asked(
        self, wanted: asyncio.Event, interval_s: float, step: Callable[[], Awaitable[None]]
    ) -> None:
        """Run ``step`` whenever ``wanted`` is set, and at least every ``interval_s``.

        Args:
            wanted: Set to run ``step`` at once (it is cleared before each run).
            interval_s: Longest time between runs.
            step: One run.
        """
        while True:
            try:
                async with asyncio.timeout(interval_s):
                    await wanted.wait()
            except TimeoutError:
                pass
            wanted.clear()
            await self.run_step(step)
