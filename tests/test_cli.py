"""The ``rocklet`` command as a subprocess: the name server runs and stops cleanly."""

from __future__ import annotations

import asyncio
import platform
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocklet.protocol import RemotingCommand, RequestCode, ResponseCode
from rocklet.transport.dial import open_connection

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


BROKER_LISTENING = re.compile(r"broker listening.*port=(\d+)")
#: What the broker's start line says of the interpreter: its binary, not just a version.
INTERPRETER = f"interpreter={Path(sys.executable).resolve()}"


def send_request(topic: str, body: bytes) -> RemotingCommand:
    ext = {
        "producerGroup": "PG",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": "0",
        "flag": "0",
        "properties": "",
    }
    return RemotingCommand(code=RequestCode.SEND_MESSAGE, ext_fields=ext, body=body)


async def test_standalone_serves_and_stops_cleanly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = await spawn(
        "standalone", "--data-dir", str(data), "--namesrv-port", "0", "--listen-port", "0"
    )
    try:
        ns_port = int((await wait_for_line(proc, LISTENING)).group(2))
        started = await wait_for_line(proc, BROKER_LISTENING)
        port = int(started.group(1))
        assert (data / "abort").exists()  # running: a crash would be detected
        assert INTERPRETER in started.string.split()
        async with await open_connection("127.0.0.1", port) as conn:
            answer = await conn.request(send_request("CliTopic", b"hi"), TIMEOUT)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        async with await open_connection("127.0.0.1", ns_port) as ns:
            route = await ns.request(
                RemotingCommand(
                    code=RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "TBW102"}
                ),
                TIMEOUT,
            )
        assert route.code == ResponseCode.SUCCESS  # the broker registered its topics
        proc.send_signal(signal.SIGTERM)
        await wait_for_line(proc, re.compile("standalone stopped"))
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0
        assert not (data / "abort").exists()
        assert (data / "config" / "topics.json").exists()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_standalone_takes_its_store_paths_from_the_config_file(tmp_path: Path) -> None:
    # No --data-dir: the file's storePathRootDir (and storePathCommitLog) decide, not
    # the ./data fallback.
    root, fast = tmp_path / "root", tmp_path / "fast-disk"
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"storePathRootDir={root}\nstorePathCommitLog={fast}\nmappedFileSizeCommitLog=65536\n"
    )
    proc = await spawn("standalone", "-c", str(conf), "--namesrv-port", "0", "--listen-port", "0")
    try:
        await wait_for_line(proc, LISTENING)
        port = int((await wait_for_line(proc, BROKER_LISTENING)).group(1))
        async with await open_connection("127.0.0.1", port) as conn:
            answer = await conn.request(send_request("PathTopic", b"where am I"), TIMEOUT)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert (root / "lock").exists() and (root / "consumequeue" / "PathTopic").is_dir()
        assert [p.name for p in fast.iterdir()] == [f"{0:020d}"]
        assert not (root / "commitlog").exists()
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_broker_registers_with_a_separate_namesrv(
    namesrv_process: asyncio.subprocess.Process, tmp_path: Path
) -> None:
    ns_port = int((await wait_for_line(namesrv_process, LISTENING)).group(2))
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerClusterName = C1\nbrokerName = broker-x\nbrokerIP1 = 127.0.0.1\n"
        f"storePathRootDir = {tmp_path / 'store'}\nmappedFileSizeCommitLog = 1048576\n"
        "maxHashSlotNum = 100\nmaxIndexNum = 400\n"
    )
    proc = await spawn(
        "broker", "-c", str(conf), "--listen-port", "0", "--namesrv", f"127.0.0.1:{ns_port}"
    )
    try:
        started = await wait_for_line(proc, BROKER_LISTENING)
        assert f"python={platform.python_version()}" in started.string.split()
        assert INTERPRETER in started.string.split()
        async with await open_connection("127.0.0.1", ns_port) as ns:
            info = await ns.request(
                RemotingCommand(code=RequestCode.GET_BROKER_CLUSTER_INFO), TIMEOUT
            )
        assert info.code == ResponseCode.SUCCESS and b"broker-x" in info.body
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_a_broker_without_a_name_server_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir = {tmp_path / 'store'}\nmappedFileSizeCommitLog = 1048576\n")
    proc = await spawn("broker", "-c", str(conf), "--listen-port", "0", "--host", "127.0.0.1")
    try:
        await wait_for_line(proc, re.compile(r"no name server to register with: clients will"))
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


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
