"""``rocklet healthcheck`` against real server processes, found by their process id.

In a container the server is PID 1; here each test starts one and passes ``--pid``.
The check reads the ports from the server's configuration, so these servers listen on
fixed ports: free ones, picked just before they start.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from rocklet.benchsuite.procs import free_port, free_ports
from tests.test_cli import BROKER_LISTENING, LISTENING, TIMEOUT, spawn, wait_for_line


async def healthcheck(pid: int) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rocklet", "healthcheck", "--pid", str(pid), "--timeout", "5",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@asynccontextmanager
async def running(*args: str, ready: list[str]) -> AsyncIterator[asyncio.subprocess.Process]:
    proc = await spawn(*args)
    try:
        for pattern in ready:
            await wait_for_line(proc, LISTENING if pattern == "namesrv" else BROKER_LISTENING)
        assert proc.stdout is not None
        drain = asyncio.create_task(proc.stdout.read())
        yield proc
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0
        await drain
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_a_name_server_is_asked_on_its_port() -> None:
    port = free_port()
    args = ("namesrv", "--port", str(port), "--host", "127.0.0.1")
    async with running(*args, ready=["namesrv"]) as ns:
        assert await healthcheck(ns.pid) == (0, f"namesrv at 127.0.0.1:{port} answered\n", "")


async def test_a_broker_is_asked_on_its_own_listen_port(tmp_path: Path) -> None:
    ns_port = free_port()
    async with running("namesrv", "--port", str(ns_port), ready=["namesrv"]):
        port = free_port()
        conf = tmp_path / "broker.conf"
        conf.write_text(
            f"listenPort={port}\nstorePathRootDir={tmp_path / 'store'}\n"
            "mappedFileSizeCommitLog=1048576\n"
        )
        broker_args = ("broker", "-c", str(conf), "--namesrv", f"127.0.0.1:{ns_port}")
        async with running(*broker_args, ready=["broker"]) as broker:
            code, out, err = await healthcheck(broker.pid)
            assert (code, out, err) == (0, f"broker at 127.0.0.1:{port} answered\n", "")


async def test_a_standalone_is_asked_as_both(tmp_path: Path) -> None:
    ns_port, port = free_ports(2)
    args = ("standalone", "--data-dir", str(tmp_path / "d"), "--namesrv-port", str(ns_port))
    async with running(*args, "--listen-port", str(port), ready=["namesrv", "broker"]) as both:
        code, out, _ = await healthcheck(both.pid)
    assert code == 0
    assert out == f"namesrv at 127.0.0.1:{ns_port}, broker at 127.0.0.1:{port} answered\n"


async def test_silence_and_strangers_are_told_apart() -> None:
    # A process whose command line says "name server" but that listens nowhere.
    port = free_port()
    mute = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import sys; sys.stdin.read()", "namesrv", "--port", str(port),
        stdin=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        code, out, err = await healthcheck(mute.pid)
        assert (code, out) == (1, "")
        assert f"namesrv at 127.0.0.1:{port} does not answer" in err
    finally:
        assert mute.stdin is not None
        mute.stdin.close()
        await asyncio.wait_for(mute.wait(), TIMEOUT)
    code, _, err = await healthcheck(mute.pid)  # gone
    assert code == 2 and f"cannot read process {mute.pid}" in err
    code, _, err = await healthcheck(os.getpid())  # pytest: not a Rocklet server
    assert code == 2 and err.startswith("rocklet healthcheck: ")
