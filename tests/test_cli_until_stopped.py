"""``rocklet admin clusterRT`` and ``startMonitoring`` end cleanly on Ctrl-C and SIGTERM.

Both run round after round until stopped, as mqadmin's do. The signal must end them as
their natural end would (exit 0, nothing on standard error), not with a
``KeyboardInterrupt`` traceback and death by the signal. Each is sent only once the
command has printed its first round, so the signal finds it at work.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tests.test_cli import TIMEOUT
from tests.test_cli_messages import Standalone, running_standalone


@pytest.fixture
async def standalone(tmp_path: Path) -> AsyncIterator[Standalone]:
    async with running_standalone(tmp_path) as running:
        yield running


async def _stopped_after_first_round(
    ns: str, argv: list[str], first_round_done: Callable[[bytes], bool], signum: int
) -> tuple[int, bytes, bytes]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rocklet", "admin", *argv, "-n", ns,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"},
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stderr is not None
        printed = b""
        while not first_round_done(printed):
            line = await asyncio.wait_for(proc.stdout.readline(), TIMEOUT)
            assert line, f"ended before its first round: {printed!r}"
            printed += line
        proc.send_signal(signum)
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
        return await asyncio.wait_for(proc.wait(), TIMEOUT), printed + out, err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_cluster_rt_stops_cleanly(standalone: Standalone, signum: int) -> None:
    code, out, err = await _stopped_after_first_round(
        standalone.namesrv,
        ["clusterRT", "-a", "3", "-i", "1"],
        lambda printed: b"broker-a" in printed,  # a row of the first round
        signum,
    )
    assert (code, err) == (0, b""), err.decode()
    header, row = out.decode().splitlines()[:2]
    assert header.startswith("#Cluster Name")
    assert row.split()[:2] == ["DefaultCluster", "broker-a"] and row.split()[3:] == ["3", "0"]


async def test_cluster_rt_json_stops_cleanly(standalone: Standalone) -> None:
    code, out, err = await _stopped_after_first_round(
        standalone.namesrv,
        ["clusterRT", "-a", "2", "-i", "1", "--json"],
        lambda printed: printed.endswith(b"}\n"),
        signal.SIGINT,
    )
    assert (code, err) == (0, b""), err.decode()
    assert out.startswith(b'{"round": 1, "clusterName": "DefaultCluster"'), out


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_start_monitoring_stops_cleanly(standalone: Standalone, signum: int) -> None:
    code, out, err = await _stopped_after_first_round(
        standalone.namesrv,
        ["startMonitoring", "-i", "1"],
        lambda printed: b"round 1 took" in printed,
        signum,
    )
    assert (code, err) == (0, b""), err.decode()
    assert out.startswith(b"round 1: "), out
