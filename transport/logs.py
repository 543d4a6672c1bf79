"""Loggers for library code (transport, SDK): structlog's API, stdlib ``logging`` below.

A library must not print unless its application asks: structlog's unconfigured default
writes every event to stdout, so library modules log through ``logging.getLogger(name)``
instead. Unconfigured, only warnings and errors reach stderr (logging's last-resort
handler); under ``rocklet``'s :func:`rocklet.logging.configure_logging` (or any
``structlog.stdlib.ProcessorFormatter``) the events render like the servers' own lines.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["get_logger"]

_PROCESSORS: list[Any] = [
    # First, so a disabled debug call costs one level check and nothing more.
    structlog.stdlib.filter_by_level,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=False),
    structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
]


def get_logger(name: str) -> Any:
    """Return a structlog-style logger writing through the stdlib logger ``name``."""
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=_PROCESSORS,
        wrapper_class=structlog.stdlib.BoundLogger,
    )
