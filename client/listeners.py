"""Listeners of a push consumer: which one gets a batch, how it is called, what it said.

A listener is ``async def`` (awaited on the event loop) or a plain function (run in
a thread pool); it receives a list of :class:`~rocklet.client.message.MessageExt`
and returns a :class:`~rocklet.client.consume_result.ConsumeResult`. Listener exceptions are
the application's: they are logged and count as a failed batch, as in the Java and
C++ clients.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeAlias, cast

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.message import MessageExt
from rocklet.client.trace import ConsumeTracer
from rocklet.transport.logs import get_logger

__all__ = ["ConsumeStats", "Listener", "ListenerTable", "split_batches"]

_log = get_logger(__name__)

#: A push consumer's listener: messages in, verdict out; ``async def`` or plain.
Listener: TypeAlias = Callable[[list[MessageExt]], Awaitable[ConsumeResult] | ConsumeResult]


@dataclass(slots=True)
class ConsumeStats:
    """Counters behind running info's ``statusTable`` (one per topic)."""

    ok: int = 0
    failed: int = 0
    consume_ns: int = 0
    batches: int = 0


class ListenerTable:
    """Listeners by topic, and how to call them.

    Args:
        failure: What an exception or a ``None`` answer counts as.
        executor: Runs plain-function listeners. Default: a pool of ``threads``
            threads, made when a plain listener is first called and shut down by
            :meth:`close`.
        threads: Size of that pool.
        thread_name_prefix: Names its threads.
        tracer: Records each batch before and after its listener (message trace).
            Default: none.
    """

    def __init__(
        self,
        failure: ConsumeResult,
        executor: Executor | None = None,
        *,
        threads: int = 20,
        thread_name_prefix: str = "rocklet",
        tracer: ConsumeTracer | None = None,
    ) -> None:
        self._failure = failure
        self._tracer = tracer
        self._executor = executor
        self._own_executor: ThreadPoolExecutor | None = None
        self._threads = threads
        self._thread_name_prefix = thread_name_prefix
        self._listeners: dict[str, tuple[Listener, bool]] = {}
        self.stats: dict[str, ConsumeStats] = {}

    def add(self, topic: str, listener: Listener) -> None:
        """Register ``listener`` for ``topic``."""
        # Also an object whose ``__call__`` is ``async def``.
        is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
            type(listener).__call__
        )
        self._listeners[topic] = (listener, is_async)

    def __bool__(self) -> bool:
        return bool(self._listeners)

    def topics(self) -> list[str]:
        """The topics with a listener."""
        return list(self._listeners)

    def close(self) -> None:
        """Shut down the thread pool this table made (not one it was given)."""
        if self._own_executor is not None:
            self._own_executor.shutdown(wait=False, cancel_futures=True)

    def _get_executor(self) -> Executor:
        if self._executor is None:
            self._own_executor = ThreadPoolExecutor(
                self._threads, thread_name_prefix=self._thread_name_prefix
            )
            self._executor = self._own_executor
        return self._executor

    @property
    def needs_threads(self) -> bool:
        """Whether some listener is a plain function."""
        return any(not is_async for _, is_async in self._listeners.values())

    async def call_plain(self, msgs: list[MessageExt]) -> object:
        """Run the batch's listener and return whatever it returned.

        Exceptions propagate and nothing is counted: CONSUME_MESSAGE_DIRECTLY (309)
        reports them as they are (:mod:`rocklet.client.consume_directly`).
        """
        entry = self._listeners.get(msgs[0].topic)
        if entry is None:
            entry = next(iter(self._listeners.values()))
        listener, is_async = entry
        if is_async:
            return await cast(Awaitable[object], listener(msgs))
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._get_executor(), listener, msgs)

    async def call(self, msgs: list[MessageExt]) -> ConsumeResult:
        """Run the listener of the batch's topic; failures become ``failure``.

        Args:
            msgs: One batch, all of one topic.

        Returns:
            The listener's verdict.
        """
        topic = msgs[0].topic
        entry = self._listeners.get(topic)
        if entry is None:  # a retried message of a topic no longer subscribed
            entry = next(iter(self._listeners.values()))
        listener, is_async = entry
        stats = self.stats.get(topic)
        if stats is None:  # not setdefault: that would build a record on every call
            stats = self.stats[topic] = ConsumeStats()
        tracer = self._tracer
        traced = tracer.before(msgs) if tracer is not None else None
        raised = False
        # perf_counter, not the injected clock: this measures how long the listener
        # ran (running info's consumeRT), which needs sub-millisecond resolution and
        # no relation to wall-clock or test time.
        started = time.perf_counter_ns()
        try:
            if is_async:
                result = await cast(Awaitable[ConsumeResult], listener(msgs))
            else:
                loop = asyncio.get_running_loop()
                result = await loop.run_in_executor(self._get_executor(), listener, msgs)  # type: ignore[arg-type]
        except Exception:
            _log.exception("listener raised; the batch counts as failed", topic=topic)
            result, raised = self._failure, True
        elapsed_ns = time.perf_counter_ns() - started
        stats.consume_ns += elapsed_ns
        stats.batches += 1
        if traced is not None:
            assert tracer is not None
            tracer.after(traced, result, raised, elapsed_ns)
        if not isinstance(result, ConsumeResult):
            _log.warning("listener returned no ConsumeResult", topic=topic, result=repr(result))
            result = self._failure
        if result is ConsumeResult.SUCCESS:
            stats.ok += len(msgs)
        else:
            stats.failed += len(msgs)
        return result


def split_batches(msgs: Sequence[MessageExt], size: int) -> list[list[MessageExt]]:
    """Cut a pulled run into batches of at most ``size`` messages of one topic.

    A retry queue mixes messages of every subscribed topic (their original topics
    restored), and each topic may have its own listener.
    """
    out: list[list[MessageExt]] = []
    start = 0
    n = len(msgs)
    while start < n:
        topic = msgs[start].topic
        end = min(start + size, n)
        if msgs[end - 1].topic != topic:
            end = next(i for i in range(start, end) if msgs[i].topic != topic)
        out.append(list(msgs[start:end]))
        start = end
    return out
