"""The ``rocklet`` command as a subprocess: the name server runs and stops cleanly."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from client.connection import open_connection
from protocol import RemotingCommand, RequestCode, ResponseCode

TIMEOUT = 15.0
LISTENING = re.compile(r"namesrv listening.*host=(\S+).*port=(\d+)")


async def spawn(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rocklet",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


async def wait_for_line(
    proc: asyncio.subprocess.Process, pattern: re.Pattern[str]
) -> re.Match[str]:
    assert proc.stdout is not None
    seen: list[str] = []

    async def scan() -> re.Match[str]:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            text = line.decode(errors="replace")
            seen.append(text)
            if match := pattern.search(text):
                return match
        raise AssertionError(f"process ended without {pattern.pattern!r}: {''.join(seen)}")

    return await asyncio.wait_for(scan(), TIMEOUT)


@pytest.fixture
async def namesrv_process() -> AsyncIterator[asyncio.subprocess.Process]:
    proc = await spawn("namesrv", "--port", "0", "--host", "127.0.0.1")
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_namesrv_serves_and_stops_on_sigterm(
    namesrv_process: asyncio.subprocess.Process,
) -> None:
    match = await wait_for_line(namesrv_process, LISTENING)
    host, port = match.group(1), int(match.group(2))
    assert host == "127.0.0.1" and port > 0
    async with await open_connection(host, port) as conn:
        answer = await conn.request(
            RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "T"}),
            TIMEOUT,
        )
    assert answer.code == ResponseCode.TOPIC_NOT_EXIST
    namesrv_process.send_signal(signal.SIGTERM)
    await wait_for_line(namesrv_process, re.compile("namesrv stopped"))
    assert await asyncio.wait_for(namesrv_process.wait(), TIMEOUT) == 0


async def test_namesrv_logs_json_lines_when_asked() -> None:
    proc = await spawn("namesrv", "--port", "0", "--host", "127.0.0.1", "--log-json")
    try:
        match = await wait_for_line(proc, re.compile(r'\{.*"event": "namesrv listening".*\}'))
        assert '"port": ' in match.group(0)
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def run_to_end(*args: str) -> tuple[int, str]:
    proc = await spawn(*args)
    out, _ = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_broker_is_not_implemented_yet(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName = DefaultCluster\nbrokerName = broker-a\n")
    code, out = await run_to_end("broker", "-c", str(conf), "--listen-port", "0")
    assert code != 0
    assert "broker not implemented yet" in out


async def test_standalone_is_not_implemented_yet(tmp_path: Path) -> None:
    code, out = await run_to_end("standalone", "--data-dir", str(tmp_path))
    assert code != 0
    assert "broker not implemented yet" in out


async def test_invalid_config_value_names_the_key(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort = eleven\n")
    code, out = await run_to_end("broker", "-c", str(conf))
    assert code == 2
    assert "listenPort" in out and "'eleven'" in out


async def test_broker_requires_a_config_file() -> None:
    code, out = await run_to_end("broker")
    assert code == 2
    assert "-c/--config" in out
