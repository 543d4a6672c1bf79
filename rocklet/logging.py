"""Process-wide logging set-up for the ``rocklet`` command.

Library modules only call ``structlog.get_logger(__name__)`` and log events with
key/value context; the command decides how lines look. Both structlog and standard
``logging`` records (asyncio, third-party libraries) go through one stdlib handler on
standard error, rendered the same way: ``key=value`` lines for humans, or one JSON
object per line for log collectors (``--log-json``).
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

__all__ = ["configure_logging"]

_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")


def configure_logging(
    json: bool = False, level: str = "INFO", stream: TextIO | None = None
) -> None:
    """Configure structlog and the standard library's logging for the whole process.

    Args:
        json: Write JSON lines instead of human-oriented ``key=value`` lines.
        level: Minimum level name (``DEBUG``, ``INFO``, ``WARNING``, ``ERROR``,
            ``CRITICAL``; any case).
        stream: Where lines go. Default: standard error.

    Raises:
        ValueError: Unknown level name.
    """
    level_name = level.upper()
    if level_name not in _LEVELS:
        raise ValueError(f"unknown log level {level!r}; choose one of {', '.join(_LEVELS)}")
    out = sys.stderr if stream is None else stream
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=False),
        structlog.processors.StackInfoRenderer(),
    ]
    renderer: Any
    final: list[Any] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if json:
        shared.append(structlog.processors.dict_tracebacks)
        # Library loggers (rocklet.transport.logs) bring their own processor chain
        # without it: turn their exc_info into the same "exception" field here.
        final.append(structlog.processors.dict_tracebacks)
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=out.isatty())
    structlog.configure(
        # filter_by_level first: a disabled debug call costs one level check, nothing more.
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[*final, renderer],
        )
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level_name)
