"""Capture the SDK's log events (stdlib records whose msg is the event dict: transport/logs.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["capture_sdk_logs"]


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
