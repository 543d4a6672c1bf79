"""What every benchmark case records: stamped bodies, percentiles and CPU accounting.

Latency follows the method in BENCHMARKS.md: the producer writes
``time.monotonic_ns()`` into the first bytes of each body and the consumer subtracts it
from its own ``time.monotonic_ns()`` at receipt (one clock, both sides on this host).

CPU is accounted per case from ``/proc``: the server's process group, the client
process, and the whole machine (``/proc/stat``); what is left over is "other load",
the noise figure that tells whether a run was disturbed by other work on the machine.
Latency cases also keep a :class:`HiccupMeter` beside the run: a thread that only
sleeps a millisecond at a time, so any late wake-up is the machine's own stall (a
virtual machine whose CPUs the host holds back, say), not the system under test.
"""

from __future__ import annotations

import os
import platform
import resource
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "STAMP_SIZE",
    "CpuWindow",
    "HiccupMeter",
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


def _machine_ticks() -> list[int]:
    """The first line of ``/proc/stat``: user nice system idle iowait irq softirq steal."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return [int(x) for x in fields[:8]]


def machine_busy_seconds() -> float:
    """CPU seconds every core spent busy since boot (``/proc/stat``, idle and iowait out)."""
    ticks = _machine_ticks()
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICK


def machine_steal_seconds() -> float:
    """CPU seconds the hypervisor ran something else while this machine's CPUs waited."""
    return _machine_ticks()[7] / _TICK


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
        self.wall_s = self.server_s = self.client_s = self.other_s = self.steal_s = 0.0
        self._marks: tuple[float, ...] = (0.0,) * 6

    def _sample(self) -> tuple[float, ...]:
        return (
            time.monotonic(),
            machine_busy_seconds(),
            machine_steal_seconds(),
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
        deltas = (b - a for a, b in zip(self._marks, now, strict=True))
        wall, busy, steal, server, client, harness = deltas
        self.wall_s, self.server_s, self.client_s, self.steal_s = wall, server, client, steal
        self.other_s = max(0.0, busy - server - client - harness)

    def __enter__(self) -> CpuWindow:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def as_dict(self) -> dict[str, float]:
        """The JSON form: seconds used by each side, the other load and steal in cores."""
        wall = max(self.wall_s, 1e-9)
        return {
            "wall_s": round(self.wall_s, 3),
            "server_cpu_s": round(self.server_s, 3),
            "client_cpu_s": round(self.client_s, 3),
            "other_cores": round(self.other_s / wall, 3),
            "steal_cores": round(self.steal_s / wall, 3),
        }


class HiccupMeter:
    """Late wake-ups of a thread that sleeps :attr:`TICK_S` at a time, with when.

    The thread does nothing else and asks for the real-time FIFO class where it may
    (root, or CAP_SYS_NICE), so the processes being measured cannot keep it waiting
    for a core: a wake-up that comes late means the machine held everything back,
    the host of a virtual machine slowing or pausing its CPUs, or the kernel busy
    where it cannot be preempted. Without that class (``realtime`` false in the
    summary) busy cores delay it too. Run it in a process that is otherwise idle
    (the runner, while a worker measures): in a busy interpreter it would measure
    the GIL instead. Each wake-up costs a few microseconds of CPU.
    """

    #: How long the thread sleeps each time.
    TICK_S: Final = 0.001
    #: Lateness worth keeping; the kernel's timer slack and scheduling stay below it.
    FLOOR_S: Final = 0.002
    #: Lateness counted as a stall in the summary.
    STALL_S: Final = 0.005
    _KEEP: Final = 100_000

    def __init__(self) -> None:
        self._late: list[tuple[float, float]] = []  # (monotonic wake-up, seconds late)
        self._realtime = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hiccup-meter", daemon=True)

    def _run(self) -> None:
        try:  # this thread only (pid 0); its wake-ups then preempt ordinary tasks
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            self._realtime = True
        except (OSError, AttributeError):
            pass  # not permitted (or not Linux): measure as an ordinary thread
        late, floor, tick = self._late, self.FLOOR_S, self.TICK_S
        while not self._stop.is_set():
            before = time.monotonic()
            time.sleep(tick)
            after = time.monotonic()
            if after - before - tick > floor and len(late) < self._KEEP:
                late.append((after, after - before - tick))

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it."""
        self._stop.set()
        self._thread.join()

    def __enter__(self) -> HiccupMeter:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def summary(self, began: float | None = None, ended: float | None = None) -> dict[str, float]:
        """The stalls that ended within [``began``, ``ended``] (monotonic; None: all).

        Returns:
            ``max_ms``, the longest; ``stalls``, how many were over :attr:`STALL_S`;
            ``stalled_ms``, their total; ``realtime``, whether the thread ran in the
            real-time class.
        """
        lo = float("-inf") if began is None else began
        hi = float("inf") if ended is None else ended
        seen = [late for at, late in self._late if lo <= at <= hi]
        stalls = [late for late in seen if late > self.STALL_S]
        return {
            "max_ms": round(max(seen, default=0.0) * 1e3, 1),
            "stalls": len(stalls),
            "stalled_ms": round(sum(stalls) * 1e3, 1),
            "realtime": self._realtime,
        }
