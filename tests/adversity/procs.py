"""Real broker processes for fault-injection tests: start, kill -9, restart, measure.

A :class:`BrokerProcess` is ``rocklet standalone`` (name server and broker in one
process) on free loopback ports, with a broker.conf built from a dict of RocketMQ
properties and a data directory the test owns. It can be killed with SIGKILL and
started again on the same directory (new ports: read them from the object again),
and it reports its resident memory. Its log is collected by a reader task so the pipe
never fills, and readiness is a log line, never a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

__all__ = ["BrokerProcess", "running_broker"]

_NAMESRV_LINE: Final = re.compile(r"namesrv listening.*port=(\d+)")
_BROKER_LINE: Final = re.compile(r"broker listening.*port=(\d+)")
#: How long a start (recovery included) may take before the test fails.
START_TIMEOUT_S: Final = 60.0


class BrokerProcess:
    """One ``rocklet standalone`` process over a data directory that outlives it.

    Args:
        root: Holds ``broker.conf`` and the store (``root/store``).
        properties: broker.conf entries (RocketMQ property names).
        extra_args: More ``rocklet standalone`` arguments.
    """

    def __init__(
        self, root: Path, properties: Mapping[str, str], extra_args: tuple[str, ...] = ()
    ) -> None:
        self.root = root
        self.store = root / "store"
        self.conf = root / "broker.conf"
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in properties.items()), encoding="utf-8")
        self._extra = extra_args
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[str] = []
        self._changed = asyncio.Condition()
        self._reader: asyncio.Task[None] | None = None
        self.namesrv_port = 0
        self.broker_port = 0
        self.starts = 0

    @property
    def namesrv_addr(self) -> str:
        """``127.0.0.1:<port>`` of the name server of the current run."""
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        """``127.0.0.1:<port>`` of the broker of the current run."""
        return f"127.0.0.1:{self.broker_port}"

    @property
    def pid(self) -> int:
        """The current run's process id."""
        assert self.proc is not None
        return self.proc.pid

    #: The servers whose "listening" line a start waits for (ports read from them).
    READY: tuple[str, ...] = ("namesrv", "broker")

    def command(self) -> list[str]:
        """The ``rocklet`` arguments of a run (subclasses run other commands)."""
        return [
            "standalone",
            "-c",
            str(self.conf),
            "--data-dir",
            str(self.store),
            "--namesrv-port",
            "0",
            "--listen-port",
            "0",
            *self._extra,
        ]

    async def start(self) -> None:
        """Start a run and wait until its servers listen (fails if it exits first)."""
        assert self.proc is None or self.proc.returncode is not None, "already running"
        self.lines.clear()
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "rocklet",
            *self.command(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        self.starts += 1
        self._reader = asyncio.create_task(self._pump(self.proc))
        if "namesrv" in self.READY:
            self.namesrv_port = int((await self.wait_line(_NAMESRV_LINE, START_TIMEOUT_S))[1])
        if "broker" in self.READY:
            self.broker_port = int((await self.wait_line(_BROKER_LINE, START_TIMEOUT_S))[1])

    async def _pump(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            async with self._changed:
                self.lines.append(line.decode(errors="replace"))
                self._changed.notify_all()
        await proc.wait()
        async with self._changed:
            self._changed.notify_all()

    async def wait_line(self, pattern: re.Pattern[str], timeout_s: float) -> re.Match[str]:
        """Wait for a line of the current run's log that matches ``pattern``.

        Raises:
            AssertionError: The process ended, or the time ran out, without one.
        """

        def found() -> re.Match[str] | None:
            for line in self.lines:
                if match := pattern.search(line):
                    return match
            return None

        def done() -> bool:
            return found() is not None or (
                self.proc is not None and self.proc.returncode is not None
            )

        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait_for(done), timeout_s)
        match = found()
        if match is None:
            raise AssertionError(
                f"no {pattern.pattern!r} in the broker's log:\n{''.join(self.lines[-60:])}"
            )
        return match

    async def kill9(self) -> None:
        """SIGKILL the run (no flush, no checkpoint, the abort marker stays)."""
        await self._end(signal.SIGKILL)

    async def stop(self) -> int:
        """SIGTERM the run and wait for a clean stop; return its exit code."""
        return await self._end(signal.SIGTERM)

    async def restart(self) -> None:
        """Kill nothing: start the next run over the same directory."""
        await self.start()

    async def _end(self, signum: int) -> int:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return proc.returncode if proc is not None and proc.returncode is not None else 0
        proc.send_signal(signum)
        code = await asyncio.wait_for(proc.wait(), START_TIMEOUT_S)
        if self._reader is not None:
            await asyncio.wait_for(self._reader, START_TIMEOUT_S)
        return code

    def rss_bytes(self) -> int:
        """The run's resident memory now (``/proc/<pid>/status`` VmRSS)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def peak_rss_bytes(self) -> int:
        """The run's peak resident memory so far (VmHWM)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    def open_fds(self) -> int:
        """How many file descriptors the run has open."""
        return len(os.listdir(f"/proc/{self.pid}/fd"))


@asynccontextmanager
async def running_broker(
    root: Path, properties: Mapping[str, str], extra_args: tuple[str, ...] = ()
) -> AsyncIterator[BrokerProcess]:
    """Start a :class:`BrokerProcess`; kill whatever run is left at the end."""
    broker = BrokerProcess(root, properties, extra_args)
    await broker.start()
    try:
        yield broker
    finally:
        proc = broker.proc
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        if broker._reader is not None:
            await broker._reader
