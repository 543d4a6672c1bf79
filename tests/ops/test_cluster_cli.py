"""``rocklet cluster`` as a terminal runs it: a child's death is said at once, and
Ctrl-C (SIGINT to the whole foreground process group) stops brokers before the name
server."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

from rocklet.cluster import BROKERS
from tests.test_cli import TIMEOUT, wait_for_line


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(p) for p in text.split()]


def _pid_of(supervisor: int, name: str) -> int:
    for pid in _children(supervisor):
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        if f"/{name}/broker.conf".encode() in cmdline:
            return pid
    raise AssertionError(f"no child process for {name}")


async def test_a_dead_child_is_reported_and_ctrl_c_stops_brokers_first(tmp_path: Path) -> None:
    ports = [arg for name in BROKERS for arg in (f"--{name}-port", "0")]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rocklet",
        "cluster",
        "--data-dir",
        str(tmp_path),
        "--namesrv-port",
        "0",
        *ports,
        "--no-metrics",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own group, as a shell gives a foreground job
    )
    try:
        await wait_for_line(proc, re.compile(r"^logs\s"))
        os.kill(_pid_of(proc.pid, "broker-a"), signal.SIGKILL)
        line = await wait_for_line(proc, re.compile(r"broker-a exited with status (-?\d+)"))
        assert line.group(1) == "-9"
        assert len(_children(proc.pid)) == len(BROKERS)  # the others keep running

        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        assert proc.stdout is not None
        rest = (await asyncio.wait_for(proc.stdout.read(), TIMEOUT)).decode()
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 1, rest  # broker-a had died
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    # Every broker unregistered from a name server that was still up.
    namesrv_log = (tmp_path / "logs" / "namesrv.log").read_text()
    assert namesrv_log.count('"event": "broker unregistered"') == 3, namesrv_log[-2000:]
    for name in ("broker-b", "broker-a-s", "broker-b-s"):
        assert "name server unreachable" not in (tmp_path / "logs" / f"{name}.log").read_text()
