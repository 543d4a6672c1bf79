"""The real RocketMQ 4.9.4 ``mqadmin``, many verbs in one JVM, and a normaliser of its output.

:class:`MqAdmin` runs ``drivers/AdminDriver.java`` (compiled with the other drivers by
``javatier.compile_driver``): one JVM for many verbs, each run through the tool's own
entry point ``MQAdminStartup.main0`` with its stdout and stderr captured, so a verb costs
a round trip instead of a JVM start (1-2 s). ``mqadmin`` exits 0 whether a verb worked
or not and prints the exception instead: tests judge the printed text.

:func:`normalise` masks what differs between two runs and two systems (addresses, ports,
client ids, message ids, timestamps, hash codes), so outputs can be compared.
"""

from __future__ import annotations

import asyncio
import json
import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self
from urllib.parse import quote

from tests.compat.harness import log_tail
from tests.java.javatier import RELEASE, JavaDriver

__all__ = ["JavaProcess", "MqAdmin", "MqAdminError", "normalise"]

#: One verb: they talk to the name server and a broker, each call with a 3-5 s timeout.
VERB_TIMEOUT_S: Final = 60.0
#: The JVM's start (class loading of the tool and the client).
START_TIMEOUT_S: Final = 60.0
#: A state the broker reaches in time (offsets are committed every 5 s, statistics
#: sampled every 10 s, traces sent in the background), waited on by :meth:`MqAdmin.wait_output`.
STATE_TIMEOUT_S: Final = 60.0
#: Between two runs of a verb waited on: a poll interval, not a synchronisation (two
#: cores are shared with the JVMs).
POLL_S: Final = 0.25


class MqAdminError(AssertionError):
    """The driver died, timed out, or ``main0`` threw (diagnostics in the message)."""


class MqAdmin:
    """``mqadmin`` against one name server, in one JVM (:class:`AdminDriver`).

    Use as a context manager (or :meth:`start` / :meth:`close`). :meth:`run` adds
    ``-n NAMESRV`` after the verb, as one types it.

    Args:
        driver: The compiled drivers.
        home: A directory of its own: the JVM's ``user.home`` (the tool's and the client's
            logs under ``logs/rocketmqlogs``) and working directory (``consumerStatus -s``
            writes files there), and ``admin.stderr``.
        namesrv: The name server's ``host:port``.
    """

    def __init__(self, driver: JavaDriver, home: Path, namesrv: str) -> None:
        self.driver = driver
        self.home = home
        self.namesrv = namesrv
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._reader: threading.Thread | None = None
        self._seq = 0

    def start(self) -> None:
        """Start the JVM and wait until it is ready for commands."""
        self.home.mkdir(parents=True, exist_ok=True)
        argv = self.driver.argv(
            self.home, main_class="AdminDriver", props=(f"-Drocketmq.home.dir={RELEASE}",)
        )
        with (self.home / "admin.stderr").open("wb") as stderr:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=self.home
            )
        self._reader = threading.Thread(target=self._pump, name="mqadmin-stdout", daemon=True)
        self._reader.start()
        ready = self._next_event(START_TIMEOUT_S, "the driver to start")
        if ready.get("event") != "ready":
            raise MqAdminError(f"mqadmin driver: unexpected {ready}\n{self.diagnostics()}")

    def _pump(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")  # end of output

    def _next_event(self, timeout_s: float, what: str) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            raise MqAdminError(
                f"mqadmin: gave up waiting for {what}\n{self.diagnostics()}"
            ) from None
        if not line:
            self._lines.put(b"")  # stays at the end for any later reader
            raise MqAdminError(f"mqadmin driver ended, waiting for {what}\n{self.diagnostics()}")
        event: dict[str, Any] = json.loads(line)
        return event

    def run(self, verb: str, *args: str, timeout_s: float = VERB_TIMEOUT_S) -> str:
        """``mqadmin VERB -n NAMESRV ARGS...``: everything it printed (stdout and stderr)."""
        return self.run_raw(verb, "-n", self.namesrv, *args, timeout_s=timeout_s)

    def run_raw(self, *argv: str, timeout_s: float = VERB_TIMEOUT_S) -> str:
        """``mqadmin ARGV...`` exactly as given (no ``-n`` added)."""
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise MqAdminError("mqadmin driver not started")
        self._seq += 1
        proc.stdin.write(("\t".join(quote(a, safe="") for a in argv) + "\n").encode())
        proc.stdin.flush()
        result = self._next_event(timeout_s, f"mqadmin {' '.join(argv)}")
        if result.get("event") != "result" or result.get("seq") != self._seq:
            raise MqAdminError(f"mqadmin driver: unexpected {result}\n{self.diagnostics()}")
        if "error" in result:
            raise MqAdminError(f"mqadmin {' '.join(argv)} threw {result['error']}")
        output: str = result["output"]
        return output

    async def arun(self, verb: str, *args: str, timeout_s: float = VERB_TIMEOUT_S) -> str:
        """:meth:`run` from a coroutine (in a worker thread: the loop keeps running)."""
        return await asyncio.to_thread(self.run, verb, *args, timeout_s=timeout_s)

    def wait_output(
        self,
        check: Callable[[str], bool],
        what: str,
        verb: str,
        *args: str,
        timeout_s: float = STATE_TIMEOUT_S,
    ) -> str:
        """Run a verb until its output passes ``check`` (a state the servers reach in
        time), at most ``timeout_s``; its last output.

        Raises:
            AssertionError: The output never passed, with the last one.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            output = self.run(verb, *args)
            if check(output):
                return output
            if time.monotonic() > deadline:
                raise AssertionError(f"gave up waiting for {what}; last output:\n{output}")
            time.sleep(POLL_S)

    async def await_output(
        self,
        check: Callable[[str], bool],
        what: str,
        verb: str,
        *args: str,
        timeout_s: float = STATE_TIMEOUT_S,
    ) -> str:
        """:meth:`wait_output` from a coroutine (in a worker thread)."""
        return await asyncio.to_thread(
            self.wait_output, check, what, verb, *args, timeout_s=timeout_s
        )

    def close(self, timeout_s: float = 30.0) -> None:
        """End the driver (stdin closed: it exits), killing it if it does not."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            if self._reader is not None:
                self._reader.join(timeout_s)
            if proc.stdout is not None:
                proc.stdout.close()

    def diagnostics(self) -> str:
        """The driver's stderr and the tool's log tails, for failure messages."""
        stderr = log_tail(self.home / "admin.stderr", 30)
        logs = sorted((self.home / "logs" / "rocketmqlogs").glob("*.log"))
        tails = "\n".join(f"-- {p.name}\n{log_tail(p, 15)}" for p in logs)
        return f"-- stderr\n{stderr}\n{tails}"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class JavaProcess:
    """A ``ClientDriver`` child (a push consumer, a producer) that outlives one test.

    The synchronous counterpart of ``javatier.JavaClient`` for module-scoped fixtures
    (no event loop outlives a test): its JSON events are read by a thread.

    Args:
        driver: The compiled drivers.
        home: The child's ``user.home`` and working directory; its stderr is
            ``home/<name>.stderr``.
        name: A label for failure messages.
        argv: The driver's command and arguments (the name server after the command).
    """

    def __init__(self, driver: JavaDriver, home: Path, name: str, *argv: str) -> None:
        self.name = name
        self.home = home
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._ended = False
        home.mkdir(parents=True, exist_ok=True)
        with (home / f"{name}.stderr").open("wb") as stderr:
            self._proc = subprocess.Popen(
                driver.argv(home, *argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=home,
            )
        self._reader = threading.Thread(target=self._pump, name=f"java-{name}", daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "noise", "text": line.decode(errors="replace")}
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def of(self, kind: str) -> list[dict[str, Any]]:
        """Its events of one kind so far."""
        with self._changed:
            return [e for e in self.events if e.get("event") == kind]

    def wait_event(self, kinds: tuple[str, ...], timeout_s: float) -> dict[str, Any]:
        """The first event of one of ``kinds``, waiting for it up to ``timeout_s``."""

        def first() -> dict[str, Any] | None:
            return next((e for e in self.events if e.get("event") in kinds), None)

        with self._changed:
            self._changed.wait_for(lambda: first() is not None or self._ended, timeout_s)
            found = first()
        if found is None:
            raise AssertionError(f"{self.name}: no event of {kinds}\n{self.diagnostics()}")
        return found

    def wait_count(self, kind: str, count: int, timeout_s: float) -> None:
        """Wait until it printed ``count`` events of ``kind``."""
        with self._changed:
            self._changed.wait_for(
                lambda: sum(e.get("event") == kind for e in self.events) >= count or self._ended,
                timeout_s,
            )
        got = len(self.of(kind))
        if got < count:
            raise AssertionError(f"{self.name}: {got}/{count} {kind}\n{self.diagnostics()}")

    def stop(self, timeout_s: float = 60.0) -> int:
        """Close its stdin (it shuts its client down and exits); kill it if it does not."""
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            code = self._proc.wait(timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            code = self._proc.wait()
        self._reader.join(timeout_s)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        return code

    def kill(self, timeout_s: float = 30.0) -> None:
        """Kill it outright: for a client whose shutdown would wait (the 4.9.4 client
        sleeps 10 s in each offset reset a broker sends it, holding its shutdown)."""
        self._proc.kill()
        self._proc.wait(timeout_s)
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._reader.join(timeout_s)
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def diagnostics(self) -> str:
        """Recent events and stderr, for failure messages."""
        with self._changed:
            recent = "\n".join(json.dumps(e)[:300] for e in self.events[-15:])
        return f"-- events\n{recent}\n-- stderr\n{log_tail(self.home / f'{self.name}.stderr', 20)}"


# --- comparing outputs ------------------------------------------------------------------------

_IP: Final = r"\d{1,3}(?:\.\d{1,3}){3}"
_MASKS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    # Client ids: ip@instanceName[@unitName] (the instance names are pids, millis, ...).
    (re.compile(rf"{_IP}@[\w#.\-]+(?:@[\w#.\-]+)?"), "<client>"),
    (re.compile(rf"/?{_IP}:\d+"), "<addr>"),
    (re.compile(rf"\b{_IP}\b"), "<ip>"),
    # Unique keys and offset message ids (IPv4 brokers): 32 hex digits.
    (re.compile(r"\b[0-9A-F]{32}\b"), "<msgid>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,3})?\b"), "<time>"),
    # Epoch milliseconds (2001-2286).
    (re.compile(r"\b1\d{12}\b"), "<millis>"),
    # Object.toString()'s identity hash codes: [B@1b2c3d, Foo@7a81197d.
    (re.compile(r"@[0-9a-f]{5,8}\b"), "@<hash>"),
)


def normalise(text: str) -> str:
    """``text`` with addresses, ports, client ids, message ids, times and hash codes masked."""
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return text
