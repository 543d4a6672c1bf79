"""Loggers for library code (transport, SDK): structlog's API, stdlib ``logging`` below.

A library must not print unless its application asks: structlog's unconfigured default
writes every event to stdout, so library modules log through ``logging.getLogger(name)``
instead. Unconfigured, only warnings and errors reach stderr (logging's last-resort
handler).

Each event becomes one stdlib record whose ``msg`` is an :class:`Event`: the event
dict (what ``structlog.stdlib.ProcessorFormatter`` reads, so under ``rocklet``'s
:func:`rocklet.logging.configure_logging` the events render like the servers' own
lines, ``key=value`` or JSON), whose text is the event followed by its fields::

    heartbeat failed broker=127.0.0.1:10911 error="[Errno 111] Connect call failed"

so that an application using plain ``logging`` (``logging.basicConfig(level=INFO)``)
reads the same line, not a dict. An exception logged with the event is also attached
to the record (``exc_info``), so plain handlers print its traceback.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import structlog

__all__ = ["Event", "get_logger"]

#: Keys the processor chain below adds; a plain handler shows them its own way
#: (``%(levelname)s``, ``%(name)s``, ``%(asctime)s``), so the text leaves them out.
_ADDED_BY_CHAIN: Final = frozenset({"event", "level", "logger", "timestamp"})
#: Keys that go to the record's own fields instead of the text.
_RECORD_KEYS: Final = frozenset({"exc_info", "stack_info"})


class Event(dict[str, Any]):
    """An event dict that reads as ``"<event> key=value ..."`` when made a string.

    ``logging.LogRecord.getMessage`` calls ``str(record.msg)``, so plain handlers and
    formatters see the text; ``ProcessorFormatter`` copies the dict and renders it.
    The text is built only when a handler formats the record.
    """

    __slots__ = ()

    def __str__(self) -> str:
        parts = [str(self.get("event", ""))]
        parts.extend(
            f"{key}={_value_text(value)}"
            for key, value in self.items()
            if key not in _ADDED_BY_CHAIN and key not in _RECORD_KEYS
        )
        return " ".join(parts)


def _value_text(value: object) -> str:
    text = value if isinstance(value, str) else str(value)
    if text and not any(c.isspace() or c in '"=' for c in text):
        return text
    # logfmt's quoting: a value with spaces, quotes or '=' stays one readable token.
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _to_record(
    _logger: logging.Logger, method_name: str, event_dict: structlog.typing.EventDict
) -> tuple[tuple[Event], dict[str, Any]]:
    """The final processor: the arguments of the stdlib logging call.

    Like ``ProcessorFormatter.wrap_for_formatter`` (the ``_logger`` and ``_name``
    extras tell a ProcessorFormatter the record came from structlog), but the
    message is an :class:`Event`, readable without structlog.
    """
    kwargs: dict[str, Any] = {"extra": {"_logger": _logger, "_name": method_name}}
    exc_info = event_dict.get("exc_info")
    if exc_info:
        # The record carries it too, for plain handlers; ProcessorFormatter clears the
        # record's copy (keep_exc_info=False) and renders the dict's, so it shows once.
        kwargs["exc_info"] = exc_info
    return (Event(event_dict),), kwargs


_PROCESSORS: list[Any] = [
    # First, so a disabled debug call costs one level check and nothing more.
    structlog.stdlib.filter_by_level,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=False),
    _to_record,
]


def get_logger(name: str) -> Any:
    """Return a structlog-style logger writing through the stdlib logger ``name``.

    Args:
        name: The stdlib logger's name (the module's ``__name__``).

    Returns:
        A ``structlog.stdlib.BoundLogger``: ``log.warning("event", key=value)``.
    """
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=_PROCESSORS,
        wrapper_class=structlog.stdlib.BoundLogger,
    )
