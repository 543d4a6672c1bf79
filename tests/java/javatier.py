"""The Java compatibility tier's machinery: the release, the driver, and the two systems.

The tests run the driver in ``drivers/`` (main class ``ClientDriver``), compiled once
per session against the official RocketMQ 4.9.4 client jars, as child processes
printing one JSON event per line, against a real Rocklet (``rocklet standalone``) and
a real RocketMQ 4.9.4.

The release is ``$ROCKETMQ_HOME``, else ``/tmp/anchor/rocketmq-4.9.4``. A release whose
``lib/`` lacks netty (that snapshot has no netty, bcprov or zstd jars) gets them from
``$ROCKETMQ_EXTRA_CLASSPATH``, else from the ``classpath.txt`` beside it, as
``tests/compat/test_vs_rocketmq.py`` uses too. :func:`missing` says plainly what is absent
when the tier cannot run, and the tests skip with that reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import quote

import pytest

from rocklet.benchsuite.vsrmq.release import RocketMqRelease, find_java
from rocklet.benchsuite.vsrmq.servers import start_rocketmq
from tests.compat.harness import Driver, create_topic, log_tail, running_standalone, wait_for_route

__all__ = [
    "DRIVER_SOURCES",
    "RELEASE",
    "Event",
    "JavaClient",
    "JavaDriver",
    "OutgoingMessage",
    "System",
    "compile_driver",
    "extra_classpath",
    "make_topic",
    "missing",
    "rocketmq_system",
    "rocklet_system",
]

RELEASE: Final = Path(os.environ.get("ROCKETMQ_HOME", "/tmp/anchor/rocketmq-4.9.4"))
#: The driver's sources (``ClientDriver`` is its main class).
DRIVER_SOURCES: Final = Path(__file__).with_name("drivers")
_ANCHOR_CLASSPATH: Final = RELEASE.parent / "classpath.txt"
#: The driver's JVM: a client, not a server.
_CLIENT_HEAP: Final = "128m"
#: RocketMQ's graceful stop takes seconds of shutdown hooks; its store is thrown away,
#: so its process group is killed right after the SIGTERM.
_NO_GRACE_S: Final = 0.0
#: A RocketMQ name server or broker, to come up (a busy two-core box is slow at it).
_BOOT_TIMEOUT_S: Final = 120.0

T = TypeVar("T")
Event = dict[str, Any]


# --- what the tier needs --------------------------------------------------------------------


def extra_classpath() -> str:
    """Jars put after the release's ``lib/*``: netty and friends when it lacks them."""
    if "ROCKETMQ_EXTRA_CLASSPATH" in os.environ:
        return os.environ["ROCKETMQ_EXTRA_CLASSPATH"]
    if any((RELEASE / "lib").glob("netty-*.jar")) or not _ANCHOR_CLASSPATH.is_file():
        return ""
    lib = str(RELEASE / "lib")
    entries = _ANCHOR_CLASSPATH.read_text().strip().split(":")
    return ":".join(e for e in entries if e and not e.startswith(lib))


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def missing() -> str | None:
    """Why the Java tier cannot run here, or ``None`` when it can."""
    if not (RELEASE / "lib").is_dir():
        return (
            f"Java tier not run: no RocketMQ 4.9.4 release at {RELEASE} "
            "(set ROCKETMQ_HOME to an unpacked binary release)"
        )
    if not any((RELEASE / "lib").glob("rocketmq-client-*.jar")):
        return f"Java tier not run: {RELEASE / 'lib'} has no rocketmq-client-*.jar"
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        return "Java tier not run: no java (set JAVA_HOME or put java on PATH)"
    if _javac() is None:
        return "Java tier not run: no javac, a JDK is needed (set JAVA_HOME or put javac on PATH)"
    return None


def tier_marks(timeout_s: int = 300) -> list[pytest.MarkDecorator]:
    """The ``pytestmark`` of every Java tier module.

    Slow and compat, skipped with the plain reason when no release or JDK is found,
    and a per-test time limit.
    """
    reason = missing()
    return [
        pytest.mark.slow,
        pytest.mark.compat,
        pytest.mark.skipif(reason is not None, reason=reason or ""),
        pytest.mark.timeout(timeout_s),
    ]


def release() -> RocketMqRelease:
    """The checked release, its classpath with the extra jars."""
    extras = tuple(p for p in extra_classpath().split(":") if p)
    found = RocketMqRelease(RELEASE, find_java(), extras)
    found.check()
    return found


@dataclass(frozen=True)
class JavaDriver:
    """The compiled driver and how to run it."""

    release: RocketMqRelease
    classes: Path

    def argv(
        self, home: Path, *args: str, main_class: str = "ClientDriver", props: tuple[str, ...] = ()
    ) -> list[str]:
        """The ``java`` command running the driver with ``args``; client logs under ``home``.

        ``main_class`` is ``ClientDriver`` or ``AdminDriver`` (mqadmin, see mqadmin.py);
        ``props`` are more JVM options.
        """
        runner = RocketMqRelease(
            self.release.home,
            self.release.java,
            (*self.release.extra_classpath, str(self.classes)),
            self.release.java_major,
        )
        return runner.java_argv(
            _CLIENT_HEAP, main_class, *args, props=(f"-Duser.home={home}", *props)
        )


def _sources() -> list[str]:
    return sorted(str(p) for p in DRIVER_SOURCES.glob("*.java"))


def compile_driver(out: Path) -> JavaDriver:
    """Compile the drivers (``drivers/*.java``: ``ClientDriver`` and ``AdminDriver``) against
    the release's jars (client and tools) into ``out``."""
    found = release()
    javac = _javac()
    assert javac is not None
    proc = subprocess.run(
        [javac, "-nowarn", "-d", str(out), "-cp", found.classpath(), *_sources()],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, f"javac failed:\n{proc.stdout}\n{proc.stderr}"
    return JavaDriver(found, out)


# --- the driver as a child process -------------------------------------------------------


@dataclass(frozen=True)
class OutgoingMessage:
    """One message for the driver's ``produce``: a line of its input file.

    Attributes:
        keys: The message's key (tests name messages by it).
        tags: Its tag, or ``None`` for none.
        props: User properties.
        body: The body text.
        queue: The queue id to send to, or ``None`` for the producer's choice.
        delay_level: The message's delay level (``setDelayTimeLevel``), or ``None``.
    """

    keys: str
    tags: str | None
    props: dict[str, str]
    body: str = ""
    queue: int | None = None
    delay_level: int | None = None

    def line(self) -> str:
        """The driver's input line (every field percent-encoded)."""
        props = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in self.props.items())
        fields = [
            quote(self.tags or "", safe=""),
            quote(self.keys, safe=""),
            props,
            quote(self.body, safe=""),
            "" if self.queue is None else str(self.queue),
            "" if self.delay_level is None else str(self.delay_level),
        ]
        return "\t".join(fields)


class JavaClient(Driver):
    """One running driver: its events as they arrive, and its stdin.

    Args:
        proc: The ``java`` child.
        name: A label for failure messages; its stderr is ``home/<name>.stderr``.
        home: The driver's ``user.home`` (client logs in ``logs/rocketmqlogs``).
    """

    async def exit_code(self, timeout_s: float) -> int:
        """Wait for the driver to exit (its output read to the end)."""
        code = await asyncio.wait_for(self.proc.wait(), timeout_s)
        await asyncio.wait_for(self._pump, timeout_s)
        return code

    async def close_stdin(self) -> None:
        """Close the driver's stdin: a push consumer then shuts down and exits."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await self.proc.stdin.wait_closed()

    async def kill(self) -> None:
        """Kill the driver if it still runs, stop reading it, and close its stdin."""
        await super().kill()
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()

    def diagnostics(self) -> str:
        """Recent events, stderr and the client log's tail, for failure messages."""
        recent = "\n".join(json.dumps(e)[:400] for e in self.events[-20:])
        stderr = log_tail(self.home / f"{self.name}.stderr", 20)
        logs = sorted((self.home / "logs" / "rocketmqlogs").glob("*.log"))
        client_log = "\n".join(log_tail(p, 20) for p in logs)
        return f"-- events\n{recent}\n-- stderr\n{stderr}\n-- client log\n{client_log}"


@dataclass
class JavaClients:
    """Starts drivers; :func:`java_clients` kills those still running at the end."""

    driver: JavaDriver
    home: Path
    namesrv: str
    started: list[JavaClient] = field(default_factory=list)

    async def spawn(self, name: str, *args: str) -> JavaClient:
        """Start the driver with ``args`` after its subcommand's name-server argument."""
        command, *rest = args
        argv = self.driver.argv(self.home, command, self.namesrv, *rest)
        with (self.home / f"{name}.stderr").open("wb") as stderr:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                cwd=self.home,
            )
        client = JavaClient(proc, name, self.home)
        self.started.append(client)
        return client

    async def start(self, name: str, *args: str, timeout_s: float = 90) -> JavaClient:
        """:meth:`spawn` a driver that announces ``started``, and wait until it has."""
        client = await self.spawn(name, *args)
        event = await client.wait_event(("started", "start_failed", "fatal"), timeout_s)
        assert event["event"] == "started", client.diagnostics()
        return client

    async def produce(self, name: str, topic: str, messages: list[OutgoingMessage]) -> list[Event]:
        """Send ``messages`` in order; returns their ``sent`` events (all must be SEND_OK)."""
        source = self.home / f"{name}.messages"
        source.write_text("".join(m.line() + "\n" for m in messages), encoding="utf-8")
        client = await self.spawn(name, "produce", topic, str(source))
        done = await client.wait_event(("done", "fatal"), 120)
        code = await client.exit_code(60)
        sent = client.of("sent")
        assert done["event"] == "done" and code == 0, client.diagnostics()
        assert [e["status"] for e in sent] == ["SEND_OK"] * len(messages), client.diagnostics()
        return sent


@asynccontextmanager
async def java_clients(driver: JavaDriver, home: Path, namesrv: str) -> AsyncIterator[JavaClients]:
    """A :class:`JavaClients` whose drivers are all killed when the block ends."""
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
    clients = JavaClients(driver, home, namesrv)
    try:
        yield clients
    finally:
        for client in clients.started:
            await client.kill()


# --- the systems ----------------------------------------------------------------------------


@dataclass(frozen=True)
class System:
    """A running name server and broker (either system).

    Attributes:
        name: ``"rocklet"`` or ``"rocketmq"``.
        namesrv: The name server's ``host:port``.
        broker: The broker's ``host:port``.
    """

    name: str
    namesrv: str
    broker: str


@contextlib.contextmanager
def rocklet_system(root: Path, properties: dict[str, str]) -> Iterator[System]:
    """``rocklet standalone`` on free loopback ports with a broker.conf of ``properties``."""
    root.mkdir(parents=True, exist_ok=True)
    with running_standalone(root, properties) as standalone:
        yield System("rocklet", standalone.namesrv_addr, standalone.broker_addr)


@contextlib.contextmanager
def rocketmq_system(root: Path, properties: dict[str, str]) -> Iterator[System]:
    """RocketMQ 4.9.4's name server and one broker, with ``properties`` added to its conf.

    The broker.conf is the vs-rocketmq benchmark's (one ASYNC_MASTER on loopback, a
    fresh store) followed by ``properties``, which override it. RocketMQ binds every
    interface; nothing else is reachable on them than for the benchmark.
    """
    root.mkdir(parents=True, exist_ok=True)
    running = start_rocketmq(release(), root, _BOOT_TIMEOUT_S, properties)
    try:
        yield System("rocketmq", running.namesrv, running.broker_addr)
    finally:
        running.stop(_NO_GRACE_S)


async def make_topic(system: System, topic: str, queues: int, timeout_s: float = 90) -> None:
    """Create ``topic`` on the broker and wait until the name server routes it."""
    await create_topic(system.broker, topic, queues)
    await wait_for_route(system.namesrv, topic, queues, timeout_s)
