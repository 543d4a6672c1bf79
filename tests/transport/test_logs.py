"""Library log events read well under plain stdlib logging and under rocklet's rendering."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import structlog

from rocklet.logging import configure_logging
from rocklet.transport.logs import get_logger


@contextmanager
def plain_handler(name: str, level: int = logging.INFO) -> Iterator[io.StringIO]:
    """A stdlib handler with a stdlib formatter on logger ``name``, as an application has."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger(name)
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield out
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


@contextmanager
def server_logging(*, as_json: bool) -> Iterator[io.StringIO]:
    """rocklet's configure_logging writing to a buffer; the previous set-up restored after."""
    out = io.StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    structlog_config = structlog.get_config()
    configure_logging(json=as_json, level="INFO", stream=out)
    try:
        yield out
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        structlog.configure(**structlog_config)


def test_a_plain_logging_handler_reads_the_event_and_its_fields() -> None:
    log = get_logger("rocklet.test.plain")
    with plain_handler("rocklet.test.plain") as out:
        log.warning("heartbeat failed", broker="127.0.0.1:10911", error="connection refused")
        log.info("queue assigned", group="CG", offset=42)
        log.debug("not shown at INFO", group="CG")
    assert out.getvalue().splitlines() == [
        "WARNING rocklet.test.plain: heartbeat failed"
        ' broker=127.0.0.1:10911 error="connection refused"',
        "INFO rocklet.test.plain: queue assigned group=CG offset=42",
    ]


def test_a_plain_handler_gets_the_traceback_of_a_logged_exception() -> None:
    log = get_logger("rocklet.test.plain")
    with plain_handler("rocklet.test.plain") as out:
        try:
            raise RuntimeError("listener exploded")
        except RuntimeError:
            log.exception("listener raised", topic="T")
        log.error("background failure", where="rebalance", exc_info=ValueError("bad offset"))
    text = out.getvalue()
    assert text.startswith("ERROR rocklet.test.plain: listener raised topic=T\nTraceback")
    assert "RuntimeError: listener exploded" in text
    assert "background failure where=rebalance\nValueError: bad offset" in text
    assert "exc_info" not in text


def test_disabled_levels_build_no_text() -> None:
    rendered: list[str] = []

    class Spy:
        def __str__(self) -> str:
            rendered.append("built")
            return "spy"

    log = get_logger("rocklet.test.cheap")
    with plain_handler("rocklet.test.cheap", logging.WARNING) as out:
        log.debug("skipped", value=Spy())
        log.info("skipped too", value=Spy())
        assert rendered == []
        log.warning("kept", value=Spy())
    assert rendered  # built once per handler that formats it (pytest's capture too)
    assert out.getvalue() == "WARNING rocklet.test.cheap: kept value=spy\n"


def test_the_servers_key_value_rendering_still_shows_the_fields() -> None:
    log = get_logger("rocklet.test.server")
    with server_logging(as_json=False) as out:
        log.warning("heartbeat failed", broker="127.0.0.1:10911", error="refused")
    line = out.getvalue()
    assert "heartbeat failed" in line and "[rocklet.test.server]" in line
    assert "broker=127.0.0.1:10911" in line and "error=refused" in line
    assert "{" not in line  # rendered by structlog, not a dict's repr


def test_the_servers_json_rendering_keeps_structured_fields() -> None:
    log = get_logger("rocklet.test.server")
    with server_logging(as_json=True) as out:
        log.warning("heartbeat failed", broker="127.0.0.1:10911", code=17)
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            log.exception("step failed", step="persist")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["event"] == "heartbeat failed"
    assert (first["broker"], first["code"]) == ("127.0.0.1:10911", 17)
    assert (first["level"], first["logger"]) == ("warning", "rocklet.test.server")
    assert "timestamp" in first
    assert second["event"] == "step failed" and second["step"] == "persist"
    (exception,) = second["exception"]
    assert (exception["exc_type"], exception["exc_value"]) == ("RuntimeError", "boom")
