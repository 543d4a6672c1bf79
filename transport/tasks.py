"""Owned background tasks and periodic steps, and where their failures go.

The one implementation of "run this in the background" for the name server, the
broker and the SDK. Every task is kept until it ends and cancelled (and awaited) by
:meth:`BackgroundTasks.cancel_all`, so nothing dangles at shutdown. A failure is never
swallowed:

- *transient* failures (the exception types the owner names, e.g. a broker restarting)
  of a periodic step are logged as warnings and the step runs again at the next tick;
- any other failure is logged with its traceback and *reported*: to the error
  callbacks when there are any, otherwise kept and raised once by the owner's next
  call to :meth:`BackgroundTasks.check_errors` (aiokafka's ``check_errors``). A periodic
  step that failed this way still runs again at the next tick, as RocketMQ's
  scheduled executors do: one bad round must not stop a service.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from rocklet.transport.logs import get_logger

__all__ = ["BackgroundTasks", "ErrorCallback", "Step"]

_log = get_logger(__name__)

#: Receives unexpected background failures.
ErrorCallback = Callable[[BaseException], object]
#: One run of a periodic job.
Step = Callable[[], Awaitable[object]]


class BackgroundTasks:
    """The background tasks of one component. Event loop thread only.

    Args:
        owner: Names the tasks and log lines (``"broker"``, a consumer group...).
        on_error: Receives unexpected failures (more can be added with
            :meth:`add_error_callback`); while there is none, the first failure is
            kept for :meth:`check_errors`.
        transient: Exception types a periodic step may raise in normal operation:
            logged as a warning (no traceback) and not reported.
    """

    def __init__(
        self,
        owner: str,
        on_error: ErrorCallback | None = None,
        *,
        transient: tuple[type[BaseException], ...] = (),
    ) -> None:
        self._owner = owner
        self._callbacks: list[ErrorCallback] = [] if on_error is None else [on_error]
        self._transient = transient
        self._tasks: set[asyncio.Task[Any]] = set()
        self._error: BaseException | None = None

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(
        self, coro: Coroutine[Any, Any, Any], name: str, *, awaited: bool = False
    ) -> asyncio.Task[Any]:
        """Run ``coro`` as an owned task; an exception it ends with is reported.

        Args:
            coro: The coroutine.
            name: Task name (prefixed with the owner).
            awaited: Somebody awaits the task and gets its exception: do not report
                it (it is still retrieved, so an abandoned task never warns).

        Returns:
            The task.
        """
        task = asyncio.get_running_loop().create_task(coro, name=f"{self._owner}-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._forget if awaited else self._done)
        return task

    def every(self, interval_s: float, step: Step, name: str) -> asyncio.Task[Any]:
        """Spawn a task that runs ``step`` every ``interval_s`` seconds until cancelled.

        Args:
            interval_s: Seconds between runs (the first run is one interval away).
            step: One run.
            name: Task name.

        Returns:
            The task.
        """
        return self.spawn(self._every(interval_s, step), name)

    def when_asked(
        self, wanted: asyncio.Event, interval_s: float, step: Step, name: str
    ) -> asyncio.Task[Any]:
        """Spawn a task that runs ``step`` whenever ``wanted`` is set, and every interval.

        Args:
            wanted: Set to run ``step`` at once (it is cleared before each run).
            interval_s: Longest time between runs.
            step: One run.
            name: Task name.

        Returns:
            The task.
        """
        return self.spawn(self._when_asked(wanted, interval_s, step), name)

    async def run_step(self, step: Step) -> None:
        """Run ``step`` once: transient failures are logged, others reported."""
        try:
            await step()
        except self._transient as exc:
            _log.warning(
                "background step failed; retrying at the next tick",
                owner=self._owner,
                step=_name_of(step),
                error=str(exc),
            )
        except Exception as exc:
            self.report(exc, _name_of(step))

    def add_error_callback(self, callback: ErrorCallback) -> Callable[[], None]:
        """Send unexpected failures to ``callback`` too.

        Args:
            callback: Called with the exception, on the event loop; its own
                exceptions are logged.

        Returns:
            A function that removes the callback again.
        """
        self._callbacks.append(callback)

        def remove() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return remove

    def report(self, exc: BaseException, where: str) -> None:
        """Log an unexpected failure and pass it on (callbacks, or the next check).

        Args:
            exc: The failure.
            where: What was running.
        """
        _log.error("background failure", owner=self._owner, where=where, exc_info=exc)
        if not self._callbacks:
            if self._error is None:
                self._error = exc
            return
        for callback in list(self._callbacks):
            try:
                callback(exc)
            except Exception:
                _log.exception("error callback failed", owner=self._owner, where=where)

    def check_errors(self) -> None:
        """Raise, once, the first failure no callback received.

        Raises:
            BaseException: That failure.
        """
        exc, self._error = self._error, None
        if exc is not None:
            raise exc

    async def cancel_all(self) -> None:
        """Cancel every owned task (but the calling one) and wait for them to end."""
        current = asyncio.current_task()
        tasks = [task for task in self._tasks if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self.report(exc, task.get_name())

    def _forget(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()

    async def _every(self, interval_s: float, step: Step) -> None:
        while True:
            await asyncio.sleep(interval_s)
            await self.run_step(step)

    async def _when_asked(self, wanted: asyncio.Event, interval_s: float, step: Step) -> None:
        while True:
            try:
                async with asyncio.timeout(interval_s):
                    await wanted.wait()
            except TimeoutError:
                pass
            wanted.clear()
            await self.run_step(step)


def _name_of(step: Step) -> str:
    return str(getattr(step, "__name__", step))
