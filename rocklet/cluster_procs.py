"""The supervised child processes of ``rocklet cluster``: start, log, readiness, stop.

Each child logs JSON lines to stderr; they are copied to its log file, and the ports in
its "... listening" lines are noted, so a child started on port 0 is found all the same.
"""

from __future__ import annotations

import asyncio
import json
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import structlog

__all__ = ["Child", "ClusterError", "kill", "pump", "terminate"]

log = structlog.get_logger(__name__)

STOP_TIMEOUT_S: Final = 20.0


class ClusterError(RuntimeError):
    """A child process could not start, or did not stop cleanly."""


@dataclass(slots=True, eq=False)
class Child:
    """A supervised process and what its log said."""

    name: str
    process: asyncio.subprocess.Process
    log_path: Path
    reader: asyncio.Task[None] | None = None
    ports: dict[str, int] = field(default_factory=dict)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    tail: list[str] = field(default_factory=list)


async def pump(child: Child, stream: asyncio.StreamReader, ready_event: str) -> None:
    """Copy the child's log lines to its file, noting ports from "... listening" lines."""
    with child.log_path.open("ab") as sink:
        while line := await stream.readline():
            sink.write(line)
            sink.flush()
            child.tail = [*child.tail[-19:], line.decode(errors="replace").rstrip()]
            _note_ports(child, line, ready_event)
    child.ready.set()  # the process ended: wake whoever waits for readiness


def _note_ports(child: Child, line: bytes, ready_event: str) -> None:
    try:
        entry = json.loads(line)
    except ValueError:
        return  # not a JSON log line (a traceback from an interpreter crash)
    event = entry.get("event") if isinstance(entry, dict) else None
    if isinstance(event, str) and event.endswith(" listening") and "port" in entry:
        child.ports[event.removesuffix(" listening")] = int(entry["port"])
    if event == ready_event:
        child.ready.set()


async def kill(child: Child) -> None:
    """SIGKILL the child (if alive) and wait for it and its log reader."""
    if child.process.returncode is None:
        child.process.kill()
    await child.process.wait()
    if child.reader is not None:
        await child.reader


async def terminate(child: Child) -> None:
    """SIGTERM the child and wait for a clean exit.

    Raises:
        ClusterError: It did not stop in time (then it is killed) or exited non-zero.
    """
    if child.process.returncode is None:
        child.process.send_signal(signal.SIGTERM)
    try:
        code = await asyncio.wait_for(child.process.wait(), STOP_TIMEOUT_S)
    except TimeoutError:
        await kill(child)
        raise ClusterError(f"{child.name} did not stop within {STOP_TIMEOUT_S:g} s") from None
    if child.reader is not None:
        await child.reader
    if code != 0:
        raise ClusterError(f"{child.name} exited with status {code}; see {child.log_path}")
    log.info("cluster process stopped", name=child.name)
