"""Capture the SDK's log events (stdlib records whose msg is the event dict: transport/logs.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["PlainLog", "capture_sdk_logs", "plain_sdk_log"]


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.events: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        event = record.msg if isinstance(record.msg, dict) else {"event": record.getMessage()}
        self.events.append({**event, "log_level": record.levelname.lower()})


@contextmanager
def capture_sdk_logs(name: str = "rocklet") -> Iterator[list[dict[str, Any]]]:
    """Collect every event logged under ``name`` (debug included) while inside."""
    logger = logging.getLogger(name)
    collector = _Collector()
    previous = logger.level
    logger.addHandler(collector)
    logger.setLevel(logging.DEBUG)
    try:
        yield collector.events
    finally:
        logger.removeHandler(collector)
        logger.setLevel(previous)


class PlainLog(logging.Handler):
    """What an application with plain ``logging`` sees: ``"LEVEL name: message"`` lines.

    Each line wakes :meth:`wait_for` (lines may come from any thread).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        self.lines: list[str] = []
        self._loop = loop
        self._changed = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))
        self._loop.call_soon_threadsafe(self._changed.set)

    def matching(self, *parts: str) -> list[str]:
        """The lines containing every one of ``parts``."""
        return [line for line in self.lines if all(p in line for p in parts)]

    async def wait_for(self, predicate: Callable[[PlainLog], bool], timeout_s: float) -> None:
        """Wait until ``predicate(self)`` holds, checked after each new line."""
        async with asyncio.timeout(timeout_s):
            while not predicate(self):
                self._changed.clear()
                await self._changed.wait()


@contextmanager
def plain_sdk_log(name: str = "rocklet") -> Iterator[PlainLog]:
    """A stdlib handler and formatter on logger ``name`` (debug included) while inside."""
    logger = logging.getLogger(name)
    handler = PlainLog(asyncio.get_running_loop())
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
