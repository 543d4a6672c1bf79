"""Child processes the suite starts: servers on loopback, bounded in time, stopped by PID.

Every server runs in its own session (so its helpers share its process group, and the
group is what CPU accounting and a last-resort kill address), writes its output to a
log file in its own temporary directory, and is stopped by PID: SIGTERM, a bounded
wait, then SIGKILL to its group. Nothing is looked up or killed by name. Should the
suite itself die without stopping them (SIGKILL), the kernel sends each server SIGTERM
(``PR_SET_PDEATHSIG``), so none outlives it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

__all__ = ["LOOPBACK", "PeerStartError", "ServerProcess", "free_port", "wait_for_port"]

LOOPBACK: Final = "127.0.0.1"
_POLL_S: Final = 0.05
_PR_SET_PDEATHSIG: Final = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM me when the process that started me dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class PeerStartError(RuntimeError):
    """A server did not come up in time (the message ends with its log's tail)."""


def free_port() -> int:
    """A TCP port free on loopback right now (the server binds it moments later)."""
    return free_ports(1)[0]


def free_ports(count: int) -> tuple[int, ...]:
    """``count`` distinct TCP ports free on loopback right now.

    Each is held until all are chosen: two ``free_port()`` calls in a row may return
    the same port, since the first is released before the second is asked for.
    """
    with contextlib.ExitStack() as held:
        ports = []
        for _ in range(count):
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((LOOPBACK, 0))
            ports.append(int(sock.getsockname()[1]))
        return tuple(ports)


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((LOOPBACK, port)) == 0


def wait_for_port(port: int, deadline: float, alive: ServerProcess | None = None) -> bool:
    """Poll until ``port`` accepts connections on loopback or ``deadline`` passes.

    Args:
        port: The port.
        deadline: ``time.monotonic()`` value to give up at.
        alive: Stop early (False) when this process has exited.

    Returns:
        Whether the port accepted a connection in time.
    """
    while time.monotonic() < deadline:
        if _accepts(port):
            return True
        if alive is not None and alive.exited():
            return False
        time.sleep(_POLL_S)  # a server's boot has no event to wait on but its port
    return False


class ServerProcess:
    """A server child process with its log file, started in a new session.

    Args:
        name: For messages.
        argv: The command.
        log_path: Where its stdout and stderr go.
        env: Environment (the suite's own when None).
        cwd: Working directory.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.log_path = log_path
        with log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # the suite forks servers from its only thread
            )

    @property
    def pid(self) -> int:
        """The process id (also its process group id)."""
        return self.proc.pid

    def exited(self) -> bool:
        """Whether the process has ended."""
        return self.proc.poll() is not None

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of its log, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def require_ports(self, ports: Sequence[int], timeout_s: float) -> None:
        """Wait until every port accepts connections.

        Raises:
            PeerStartError: A port stayed closed for ``timeout_s``, or the process died;
                the process is stopped first.
        """
        deadline = time.monotonic() + timeout_s
        for port in ports:
            if not wait_for_port(port, deadline, self):
                self.stop()
                raise PeerStartError(
                    f"{self.name} did not listen on {LOOPBACK}:{port} within {timeout_s:.0f} s"
                    f" (exit code {self.proc.returncode}); log tail:\n{self.log_tail()}"
                )

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM, wait up to ``timeout_s``, then SIGKILL its whole process group.

        Returns:
            The exit code (None if it had to be killed and still did not report).
        """
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout_s)
        # Helpers the server started in its group (port programs) go too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        try:
            return self.proc.wait(5)
        except subprocess.TimeoutExpired:
            return None
