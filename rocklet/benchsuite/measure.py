"""What every benchmark case records: stamped bodies, percentiles and CPU accounting.

Latency follows the method in BENCHMARKS.md: the producer writes
``time.monotonic_ns()`` into the first bytes of each body and the consumer subtracts it
from its own ``time.monotonic_ns()`` at receipt (one clock, both sides on this host).

CPU is accounted per case from ``/proc``: the server's process group, the client
process, and the whole machine (``/proc/stat``); what is left over is "other load",
the noise figure that tells whether a run was disturbed by other work on the machine.
"""

from __future__ import annotations

import os
import platform
import resource
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "STAMP_SIZE",
    "CpuWindow",
    "Percentiles",
    "filler",
    "group_cpu_seconds",
    "machine_busy_seconds",
    "own_cpu_seconds",
    "percentiles",
    "python_facts",
    "read_stamp",
    "stamped",
]

_STAMP: Final = struct.Struct("<qq")
#: Bytes at the head of every body: send time (monotonic ns) and a sequence number.
STAMP_SIZE: Final = _STAMP.size
_TICK: Final = os.sysconf("SC_CLK_TCK")


def filler(size: int) -> bytes:
    """Incompressible body bytes of ``size`` (the stamp overwrites the head).

    Random, so no client or server gains from compressing them.
    """
    return os.urandom(max(size, STAMP_SIZE))


def python_facts() -> dict[str, str]:
    """The interpreter running this process, which also runs the servers and workers.

    The same Python version can differ by 12 % in CPU per message between builds
    (with or without profile-guided and link-time optimisation), so the record names
    the binary, not just the version.
    """
    return {
        "version": platform.python_version(),
        "executable": os.path.realpath(sys.executable),
        "compiler": platform.python_compiler(),
        "built": " ".join(platform.python_build()[1].split()),  # the build date
    }


def stamped(body: bytes, seq: int) -> bytes:
    """``body`` with the current monotonic time and ``seq`` in its first 16 bytes."""
    return _STAMP.pack(time.monotonic_ns(), seq) + body[STAMP_SIZE:]


def read_stamp(body: bytes) -> tuple[int, int]:
    """The ``(send time ns, sequence)`` written by :func:`stamped`."""
    sent, seq = _STAMP.unpack_from(body)
    return int(sent), int(seq)


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Latency percentiles in milliseconds over ``count`` samples."""

    count: int
    p50: float
    p99: float
    p999: float

    def as_dict(self) -> dict[str, float]:
        """The JSON form."""
        return {"count": self.count, "p50": self.p50, "p99": self.p99, "p999": self.p999}


def percentiles(samples_ns: Sequence[int]) -> Percentiles | None:
    """Nearest-rank p50 / p99 / p99.9 of nanosecond samples, in ms (None when empty)."""
    if not samples_ns:
        return None
    ordered = sorted(samples_ns)
    last = len(ordered) - 1

    def rank(q: float) -> float:
        return ordered[min(last, int(q * len(ordered)))] / 1e6

    return Percentiles(len(ordered), rank(0.50), rank(0.99), rank(0.999))


def own_cpu_seconds() -> float:
    """User + system CPU of this process (every thread) so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def children_cpu_seconds() -> float:
    """User + system CPU of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine_busy_seconds() -> float:
    """CPU seconds every core spent busy since boot (``/proc/stat``, idle and iowait out)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICK


def group_cpu_seconds(pgid: int) -> float:
    """CPU of every live process in process group ``pgid``, with their reaped children.

    A server started in its own session is its own group, so this covers helper
    processes (Erlang's port programs, for instance) as well as the main one.
    """
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(entry.path, "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = raw.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid:  # pgrp
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / _TICK


class CpuWindow:
    """CPU used by a server group, a client and everything else, over a window.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. "Other" is the
    machine's busy time minus the server's, the client's and the harness's: work
    nobody in the benchmark did, the noise figure.

    Args:
        server_pgid: The server's process group, or None when there is none.
        client: Reads the client's CPU seconds so far (default: this process's
            children, as the suite's runner sees its workers).
        harness: Reads CPU to leave out of "other" as well (default: this process).
    """

    def __init__(
        self,
        server_pgid: int | None,
        client: Callable[[], float] = children_cpu_seconds,
        harness: Callable[[], float] | None = own_cpu_seconds,
    ) -> None:
        self.server_pgid = server_pgid
        self._client = client
        self._harness = harness
        self.wall_s = self.server_s = self.client_s = self.other_s = 0.0
        self._marks: tuple[float, float, float, float, float] = (0.0, 0.0, 0.0, 0.0, 0.0)

    def _sample(self) -> tuple[float, float, float, float, float]:
        return (
            time.monotonic(),
            machine_busy_seconds(),
            0.0 if self.server_pgid is None else group_cpu_seconds(self.server_pgid),
            self._client(),
            0.0 if self._harness is None else self._harness(),
        )

    def start(self) -> None:
        """Open the window."""
        self._marks = self._sample()

    def stop(self) -> None:
        """Close the window and compute the figures."""
        now = self._sample()
        wall, busy, server, client, harness = (b - a for a, b in zip(self._marks, now, strict=True))
        self.wall_s, self.server_s, self.client_s = wall, server, client
        self.other_s = max(0.0, busy - server - client - harness)

    def __enter__(self) -> CpuWindow:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def as_dict(self) -> dict[str, float]:
        """The JSON form: seconds used by each side and the other load in cores."""
        wall = max(self.wall_s, 1e-9)
        return {
            "wall_s": round(self.wall_s, 3),
            "server_cpu_s": round(self.server_s, 3),
            "client_cpu_s": round(self.client_s, 3),
            "other_cores": round(self.other_s / wall, 3),
        }
