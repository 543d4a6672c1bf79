"""The benchmarks' broker: ``rocklet standalone`` as a child process on free ports.

Shared by every script in bench/ so that each measures the same broker the same way.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Standalone", "proc_cpu_seconds", "profiled_launcher", "standalone"]

_LISTENING = {
    "namesrv": re.compile(r"namesrv listening.*port=(\d+)"),
    "broker": re.compile(r"broker listening.*port=(\d+)"),
}


_PROFILED = """
import cProfile, sys, time
from rocklet.cli import main
out = sys.argv.pop(1)
prof = cProfile.Profile(time.thread_time)
prof.enable()
try:
    code = main(sys.argv[1:])
finally:
    prof.disable()
    prof.dump_stats(out)
sys.exit(code)
"""


def profiled_launcher(out: Path) -> list[str]:
    """A ``launcher`` for :func:`standalone` that runs the CLI's thread under cProfile.

    Thread CPU time, not wall time, so waits do not count; the profile is written to
    ``out`` when the process stops cleanly (SIGTERM/SIGINT).
    """
    return [sys.executable, "-c", _PROFILED, str(out)]


def proc_cpu_seconds(stat: Path) -> float:
    """User + system CPU seconds from a ``/proc/<pid>[/task/<tid>]/stat`` file."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Standalone:
    """The ``rocklet standalone`` process and its ports."""

    proc: subprocess.Popen[str]
    namesrv_port: int
    broker_port: int

    @property
    def namesrv(self) -> str:
        """The name server's address."""
        return f"127.0.0.1:{self.namesrv_port}"

    def cpu_seconds(self) -> float:
        """User + system CPU the broker process (every thread) used so far."""
        return proc_cpu_seconds(Path(f"/proc/{self.proc.pid}/stat"))

    def thread_cpu(self) -> dict[str, float]:
        """CPU seconds so far of each broker thread, by ``name/tid``."""
        out = {}
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            try:
                name = (task / "comm").read_text().strip()
                if task.name == str(self.proc.pid):
                    name = "main (event loop)"
                out[f"{name}/{task.name}"] = proc_cpu_seconds(task / "stat")
            except OSError:
                continue  # the thread ended meanwhile
        return out


@contextmanager
def standalone(
    root: Path,
    *,
    extra_conf: str = "",
    launcher: Sequence[str] | None = None,
    timeout_s: float = 60,
) -> Iterator[Standalone]:
    """Run ``rocklet standalone`` (ASYNC_FLUSH) on free ports; SIGTERM it afterwards.

    Args:
        root: Directory for its broker.conf and data.
        extra_conf: More broker.conf lines (e.g. the pull cap).
        launcher: The command that runs ``rocklet``'s CLI with the arguments that follow
            (default: ``python -m rocklet``), e.g. one that profiles it.
        timeout_s: How long to wait for it to start, and to stop.
    """
    conf = root / "broker.conf"
    conf.write_text(
        "brokerIP1 = 127.0.0.1\nflushDiskType = ASYNC_FLUSH\n" + extra_conf, encoding="utf-8"
    )
    args = ["standalone", "-c", str(conf), "--data-dir", str(root / "store")]
    args += ["--namesrv-port", "0", "--listen-port", "0"]
    cmd = [*(launcher or [sys.executable, "-m", "rocklet"]), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ports: dict[str, int] = {}
    ready = threading.Event()

    def pump() -> None:  # keep reading: a full pipe would block the broker's logging
        assert proc.stdout is not None
        for line in proc.stdout:
            for name, pattern in _LISTENING.items():
                if match := pattern.search(line):
                    ports[name] = int(match[1])
            if len(ports) == len(_LISTENING):
                ready.set()
        ready.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        if not ready.wait(timeout_s) or len(ports) != len(_LISTENING):
            raise RuntimeError("rocklet standalone did not start")
        yield Standalone(proc, ports["namesrv"], ports["broker"])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(5)
