"""Child processes for the compatibility suite: ``rocklet standalone`` and the C++ driver.

Both run as real subprocesses on loopback. Their output is read line by line by owned
pumps, and tests wait on conditions over what was read, always with a deadline: no
sleeps. Every child is killed when its owner's context ends, whatever happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TypeVar

from rocklet.protocol.bodies.route import TopicRouteData
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.admin import CreateTopicRequestHeader
from rocklet.protocol.headers.pull import PullMessageRequestHeader, PullSysFlag
from rocklet.protocol.message import StoredMessage, iter_messages
from rocklet.transport.dial import open_connection

__all__ = [
    "DRIVER",
    "Driver",
    "DriverPool",
    "Standalone",
    "create_topic",
    "driver_pool",
    "route_of",
    "running_standalone",
    "stored_record",
    "wait_for_route",
]

DRIVER = Path(__file__).with_name("cpp_driver.py")
T = TypeVar("T")
Event = dict[str, Any]

_NAMESRV_LINE = re.compile(r"namesrv listening.*port=(\d+)")
_BROKER_LINE = re.compile(r"broker listening.*port=(\d+)")
#: Requests from the tests to the servers (the C++ client's own sync timeout is 3 s).
REQUEST_TIMEOUT_S = 5.0


# --- the broker: rocklet standalone -------------------------------------------------------


@dataclass
class Standalone:
    """A ``rocklet standalone`` child process and what its log said so far."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)
    namesrv_port: int = 0
    broker_port: int = 0

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def pump(self) -> None:
        """Read the log until the process ends (its own thread: the pipe must not fill)."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def wait_line(self, pattern: re.Pattern[str], timeout_s: float) -> re.Match[str]:
        """Wait for a log line matching ``pattern``."""

        def found() -> re.Match[str] | None:
            for line in self.lines:
                if match := pattern.search(line):
                    return match
            return None

        with self.changed:
            self.changed.wait_for(
                lambda: found() is not None or self.proc.poll() is not None, timeout_s
            )
            match = found()
        if match is None:
            raise AssertionError(f"no {pattern.pattern!r} in the log:\n{''.join(self.lines)}")
        return match


@contextlib.contextmanager
def running_standalone(root: Path, properties: dict[str, str]) -> Iterator[Standalone]:
    """Run ``rocklet standalone`` on free ports with a broker.conf made of ``properties``.

    Args:
        root: Directory for the config file and the store.
        properties: broker.conf entries (RocketMQ property names).

    Yields:
        The running process, once both servers listen.
    """
    conf = root / "broker.conf"
    conf.write_text("".join(f"{k} = {v}\n" for k, v in properties.items()), encoding="utf-8")
    args = ["standalone", "-c", str(conf), "--data-dir", str(root / "store")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocklet", *args, "--namesrv-port", "0", "--listen-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    broker = Standalone(proc)
    reader = threading.Thread(target=broker.pump, name="standalone-log", daemon=True)
    reader.start()
    try:
        broker.namesrv_port = int(broker.wait_line(_NAMESRV_LINE, 30)[1])
        broker.broker_port = int(broker.wait_line(_BROKER_LINE, 30)[1])
        yield broker
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(5)
        if proc.stdout is not None:
            proc.stdout.close()


# --- admin requests over the wire -----------------------------------------------------------


async def create_topic(broker_addr: str, topic: str, queues: int, perm: int = 6) -> None:
    """Create a topic with UPDATE_AND_CREATE_TOPIC, as ``mqadmin updateTopic`` does."""
    host, port = broker_addr.rsplit(":", 1)
    header = CreateTopicRequestHeader(
        topic=topic,
        default_topic="TBW102",
        read_queue_nums=queues,
        write_queue_nums=queues,
        perm=perm,
    )
    cmd = RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=header.to_ext_fields())
    async with await open_connection(host, int(port)) as conn:
        answer = await conn.request(cmd, REQUEST_TIMEOUT_S)
    assert answer.code == ResponseCode.SUCCESS, f"create {topic}: {answer.code} {answer.remark}"


async def stored_record(broker_addr: str, topic: str, queue_id: int, offset: int) -> StoredMessage:
    """Read one stored record with a plain PULL_MESSAGE, as the broker keeps it."""
    host, port = broker_addr.rsplit(":", 1)
    header = PullMessageRequestHeader(
        consumer_group="CG_COMPAT_INSPECT",
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=1,
        sys_flag=int(PullSysFlag.SUBSCRIPTION),
        subscription="*",
    )
    cmd = RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=header.to_ext_fields())
    async with await open_connection(host, int(port)) as conn:
        answer = await conn.request(cmd, REQUEST_TIMEOUT_S)
    assert answer.code == ResponseCode.SUCCESS, f"pull {topic}: {answer.code} {answer.remark}"
    (record,) = iter_messages(answer.body)
    return record


async def route_of(namesrv_addr: str, topic: str) -> TopicRouteData | None:
    """Ask the name server for a topic's route; ``None`` when it has none."""
    host, port = namesrv_addr.rsplit(":", 1)
    cmd = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic})
    async with await open_connection(host, int(port)) as conn:
        answer = await conn.request(cmd, REQUEST_TIMEOUT_S)
    if answer.code != ResponseCode.SUCCESS:
        return None
    return TopicRouteData.from_json(answer.body)


async def wait_for_route(
    namesrv_addr: str, topic: str, queues: int, timeout_s: float = 10.0
) -> TopicRouteData:
    """Ask the name server until it routes ``topic`` with ``queues`` write queues.

    The broker re-registers as soon as its topic table changes; this waits out that one
    round trip. Clients started before it would see no route for 30 s (their refresh).
    """

    async def poll() -> TopicRouteData:
        while True:
            route = await route_of(namesrv_addr, topic)
            if route is not None and sum(q.write_queue_nums for q in route.queue_datas) == queues:
                return route

    return await asyncio.wait_for(poll(), timeout_s)


# --- the C++ client driver --------------------------------------------------------------------


class Driver:
    """One ``cpp_driver.py`` child: its events as they arrive, and control over stdin.

    Args:
        proc: The child process.
        name: A label for error messages.
        home: The child's ``HOME`` (the C++ client logs to ``~/logs/rocketmq-cpp``).
    """

    def __init__(self, proc: asyncio.subprocess.Process, name: str, home: Path) -> None:
        self.proc = proc
        self.name = name
        self.home = home
        self.events: list[Event] = []
        self._changed = asyncio.Condition()
        self._eof = False
        self._pump = asyncio.get_running_loop().create_task(self._read(), name=f"pump-{name}")

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "noise", "text": line.decode(errors="replace")}
            async with self._changed:
                self.events.append(event)
                self._changed.notify_all()
        async with self._changed:
            self._eof = True
            self._changed.notify_all()

    def of(self, kind: str) -> list[Event]:
        """Events of one kind (``sent``, ``consumed``, ...) so far."""
        return [e for e in self.events if e["event"] == kind]

    async def wait_for(self, check: Callable[[Self], T | None], timeout_s: float, what: str) -> T:
        """Wait until ``check(self)`` returns something other than ``None``.

        Raises:
            AssertionError: The deadline passed, or the driver ended first; the message
                carries the driver's recent events, its stderr and the C++ log tail.
        """

        def ready() -> bool:
            return check(self) is not None or self._eof

        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait_for(ready), timeout_s)
            result = check(self)
        if result is None:
            raise AssertionError(f"{self.name}: gave up waiting for {what}\n{self.diagnostics()}")
        return result

    async def wait_event(self, kind: str | tuple[str, ...], timeout_s: float) -> Event:
        """Wait for the first event of a kind (or of any of several kinds)."""
        kinds = (kind,) if isinstance(kind, str) else kind

        def first(d: Driver) -> Event | None:
            return next((e for e in d.events if e.get("event") in kinds), None)

        return await self.wait_for(first, timeout_s, f"an event of {kinds}")

    async def tell(self, line: str) -> None:
        """Write one line to the driver's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def finish(self, timeout_s: float) -> Event:
        """Wait for the summary line and the exit; returns the summary."""

        def end(d: Driver) -> Event | None:
            return next((e for e in d.events if e["event"] in ("done", "fatal")), None)

        summary = await self.wait_for(end, timeout_s, "the summary line")
        assert summary["event"] == "done", f"{self.name}: {summary}\n{self.diagnostics()}"
        await asyncio.wait_for(self.proc.wait(), timeout_s)
        return summary

    async def kill(self) -> None:
        """Kill the child if it still runs, and stop reading it."""
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        await asyncio.wait_for(self._pump, REQUEST_TIMEOUT_S)

    def diagnostics(self) -> str:
        """Recent events, stderr and the C++ client's log tail, for failure messages."""
        recent = "\n".join(json.dumps(e)[:300] for e in self.events[-15:])
        stderr = log_tail(self.home / f"{self.name}.stderr", 20)
        logs = sorted((self.home / "logs" / "rocketmq-cpp").glob("*.log*"))
        cpp = "\n".join(log_tail(p, 25) for p in logs)
        return f"-- events\n{recent}\n-- stderr\n{stderr}\n-- C++ log\n{cpp}"


def log_tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a file (each cut to 300 characters); "" if unreadable."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(line[:300] for line in text.splitlines()[-lines:])


@dataclass
class DriverPool:
    """Starts drivers with a private ``HOME``; :func:`driver_pool` kills them at the end."""

    home: Path
    namesrv_addr: str
    drivers: list[Driver] = field(default_factory=list)

    async def spawn(self, name: str, op: str, **command: Any) -> Driver:
        """Start a driver for one job (``op`` plus the job's fields; see cpp_driver.py)."""
        command = {"op": op, "namesrv": self.namesrv_addr, **command}
        env = {**os.environ, "HOME": str(self.home)}
        with (self.home / f"{name}.stderr").open("wb") as stderr:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                str(DRIVER),
                json.dumps(command),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                env=env,
            )
        driver = Driver(proc, name, self.home)
        self.drivers.append(driver)
        return driver

    async def produce(self, name: str, topic: str, sends: list[Event], **kw: Any) -> list[Event]:
        """Run a producer to the end; returns its ``sent`` events (all sends must succeed)."""
        driver = await self.spawn(name, "produce", topic=topic, sends=sends, **kw)
        summary = await driver.finish(30)
        assert summary["errors"] == 0, f"send errors:\n{driver.diagnostics()}"
        return driver.of("sent")


@asynccontextmanager
async def driver_pool(home: Path, namesrv_addr: str) -> AsyncIterator[DriverPool]:
    """A :class:`DriverPool` whose children are all killed when the block ends."""
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
    pool = DriverPool(home, namesrv_addr)
    try:
        yield pool
    finally:
        for driver in pool.drivers:
            await driver.kill()
