"""The machine's physical limits, measured in the same run as the brokers.

* ``dd`` sequential writes: ``conv=fdatasync`` (the page cache, then one flush: what
  a broker with background flushing can reach) and ``oflag=direct``;
* the rate of small appends when each is followed by ``fdatasync`` (what a broker
  acknowledging only flushed writes can reach without group commit), 100 B and 1 KiB;
* loopback TCP bandwidth (two threads, 1 MiB ``sendall`` / ``recv_into``);
* the uvloop echo of :mod:`rocklet.benchsuite.echo`, one write per frame and one per
  read, 100 B and 1 KiB frames: the Python ceiling for request/response servers.

Each function returns a JSON-able mapping; :func:`measure_limits` runs them all.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rocklet.benchsuite.measure import percentiles
from rocklet.benchsuite.procs import LOOPBACK, ServerProcess, free_port

__all__ = [
    "LimitSettings",
    "dd_write",
    "echo_ceiling",
    "fdatasync_appends",
    "loopback_bandwidth",
    "measure_limits",
]

_MIB: Final = 1024 * 1024
_DD_COPIED: Final = re.compile(r"^(\d+) bytes .* copied, ([\d.]+) s", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class LimitSettings:
    """How long each limit is measured.

    Attributes:
        dd_mib: Size of each ``dd`` write.
        fsync_seconds: Time cap of each fdatasync-per-append loop.
        fsync_count: Most appends in that loop.
        loopback_seconds: Duration of the bandwidth test.
        echo_seconds: Duration of each echo measurement.
    """

    dd_mib: int = 1024
    fsync_seconds: float = 2.0
    fsync_count: int = 20_000
    loopback_seconds: float = 1.5
    echo_seconds: float = 1.5


def dd_write(directory: Path, mib: int, flag: str) -> dict[str, Any]:
    """``dd if=/dev/zero bs=1M count=mib`` with ``conv=fdatasync`` or ``oflag=direct``.

    Returns:
        bytes, seconds and MB/s (10^6 bytes per second) as dd reports them.
    """
    target = directory / "dd.bin"
    option = "conv=fdatasync" if flag == "fdatasync" else "oflag=direct"
    try:
        done = subprocess.run(
            ["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={mib}", option],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    finally:
        target.unlink(missing_ok=True)
    match = _DD_COPIED.search(done.stderr)
    if match is None:
        raise RuntimeError(f"cannot read dd's report: {done.stderr!r}")
    copied, seconds = int(match[1]), float(match[2])
    return {"bytes": copied, "seconds": seconds, "mb_s": round(copied / seconds / 1e6, 1)}


def fdatasync_appends(directory: Path, size: int, seconds: float, count: int) -> dict[str, Any]:
    """Append ``size`` bytes and ``fdatasync`` each time, up to ``count`` or ``seconds``.

    Returns:
        appends, rate per second and the latency percentiles of one write + flush.
    """
    target = directory / f"appends-{size}.bin"
    record = os.urandom(size)
    samples: list[int] = []
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o600)
    try:
        deadline = time.monotonic() + seconds
        began = time.monotonic()
        while len(samples) < count and time.monotonic() < deadline:
            t0 = time.monotonic_ns()
            os.write(fd, record)
            os.fdatasync(fd)
            samples.append(time.monotonic_ns() - t0)
        elapsed = time.monotonic() - began
    finally:
        os.close(fd)
        target.unlink(missing_ok=True)
    found = percentiles(samples)
    return {
        "appends": len(samples),
        "rate": round(len(samples) / elapsed, 1),
        "latency_ms": None if found is None else found.as_dict(),
    }


def loopback_bandwidth(seconds: float) -> dict[str, Any]:
    """Bytes per second one TCP stream carries over loopback (1 MiB writes and reads)."""
    listener = socket.create_server((LOOPBACK, 0))
    port = listener.getsockname()[1]
    received = 0

    def sink() -> None:
        nonlocal received
        conn, _ = listener.accept()
        buf = bytearray(4 * _MIB)
        with conn:
            while n := conn.recv_into(buf):
                received += n

    reader = threading.Thread(target=sink, name="loopback-sink")
    reader.start()
    chunk = os.urandom(_MIB)
    with socket.create_connection((LOOPBACK, port)) as sender:
        began = time.monotonic()
        while time.monotonic() - began < seconds:
            sender.sendall(chunk)
        sender.shutdown(socket.SHUT_WR)
        reader.join(30)
        elapsed = time.monotonic() - began
    listener.close()
    return {"bytes": received, "seconds": round(elapsed, 3), "gbit_s": received * 8 / elapsed / 1e9}


def echo_ceiling(workdir: Path, mode: str, size: int, seconds: float) -> dict[str, Any]:
    """Frames per second through the uvloop echo server in ``mode`` (frame / batch)."""
    port = free_port()
    argv = [sys.executable, "-m", "rocklet.benchsuite.echo"]
    server = ServerProcess(f"echo-{mode}", [*argv, "server", str(port), mode], workdir / "echo.log")
    try:
        server.require_ports([port], 30)
        done = subprocess.run(
            [*argv, "client", str(port), str(size), str(seconds)],
            capture_output=True,
            text=True,
            timeout=seconds + 60,
            check=True,
        )
    finally:
        server.stop(10)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _steps(workdir: Path, settings: LimitSettings) -> Iterator[tuple[str, Callable[[], Any]]]:
    yield "dd_fdatasync", lambda: dd_write(workdir, settings.dd_mib, "fdatasync")
    yield "dd_direct", lambda: dd_write(workdir, settings.dd_mib, "direct")
    for size in (100, 1024):
        yield (
            f"fdatasync_append_{size}",
            lambda size=size: fdatasync_appends(  # type: ignore[misc]
                workdir, size, settings.fsync_seconds, settings.fsync_count
            ),
        )
    yield "loopback", lambda: loopback_bandwidth(settings.loopback_seconds)
    for mode in ("frame", "batch"):
        for size in (100, 1024):
            yield (
                f"echo_{mode}_{size}",
                lambda mode=mode, size=size: echo_ceiling(  # type: ignore[misc]
                    workdir, mode, size, settings.echo_seconds
                ),
            )


def limit_names() -> list[str]:
    """The names :func:`measure_limits` reports, in order."""
    return [name for name, _ in _steps(Path("."), LimitSettings())]


def measure_limits(
    workdir: Path,
    settings: LimitSettings,
    on_step: Callable[[str, Mapping[str, Any] | None], None] | None = None,
) -> dict[str, Any]:
    """Every limit, in order; a failing one is recorded as its error.

    Args:
        workdir: A directory on the disk the brokers use.
        settings: Durations and sizes.
        on_step: Progress: called with ``(name, None)`` before each limit and
            ``(name, result)`` after it.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    for name, step in _steps(workdir, settings):
        if on_step is not None:
            on_step(name, None)
        try:
            results[name] = step()
        except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as exc:
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
        if on_step is not None:
            on_step(name, results[name])
    return results
