"""Master and slave broker processes for replication tests.

The master is ``rocklet standalone`` (a name server and the broker in one process, on
free loopback ports); a slave is ``rocklet broker`` registered with that name server,
so it learns the master's HA address from the REGISTER_BROKER answer, as RocketMQ's
slaves do. Ports come from the processes' "listening" log lines, never from sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from rocklet.protocol.bodies.cluster import KVTable
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.dial import open_connection
from tests.adversity.procs import START_TIMEOUT_S, BrokerProcess, running_broker

__all__ = [
    "SEGMENT",
    "SlaveProcess",
    "broker_status",
    "commitlog_bytes",
    "connected_slaves",
    "ha_port",
    "master_props",
    "running_master",
    "slave_props",
    "until",
]

_HA_LINE: Final = re.compile(r"\bha listening.*port=(\d+)")
#: Small segments, so a few hundred messages roll several of them.
SEGMENT: Final = 64 * 1024


def master_props(role: str = "ASYNC_MASTER", **more: str) -> dict[str, str]:
    """broker.conf of a master with small segments."""
    return {"brokerRole": role, "mappedFileSizeCommitLog": str(SEGMENT), **more}


def slave_props(**more: str) -> dict[str, str]:
    """broker.conf of the slave (brokerId 1) of the same brokerName."""
    return {
        "brokerId": "1",
        "brokerRole": "SLAVE",
        "mappedFileSizeCommitLog": str(SEGMENT),
        **more,
    }


class SlaveProcess(BrokerProcess):
    """``rocklet broker`` as a slave, registered with a master's name server.

    Args:
        root: Holds ``broker.conf`` and the store.
        namesrv_addr: The name server the master registered with.
        properties: broker.conf (see :func:`slave_props`).
    """

    def __init__(self, root: Path, namesrv_addr: str, properties: Mapping[str, str]) -> None:
        root.mkdir(parents=True, exist_ok=True)
        super().__init__(root, properties)
        self._namesrv = namesrv_addr

    READY = ("broker",)  # it has registered once by then

    def command(self) -> list[str]:
        """``rocklet broker`` registered with the name server, on a free loopback port."""
        return [
            "broker",
            "-c",
            str(self.conf),
            "--namesrv",
            self._namesrv,
            "--data-dir",
            str(self.store),
            "--host",
            "127.0.0.1",
            "--listen-port",
            "0",
        ]

    async def close(self) -> None:
        """Kill what is left of the current run (test teardown)."""
        proc = self.proc
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        if self._reader is not None:
            await self._reader


def running_master(
    root: Path, properties: Mapping[str, str]
) -> contextlib.AbstractAsyncContextManager[BrokerProcess]:
    """A master (``rocklet standalone``) over ``root``, created if missing."""
    root.mkdir(parents=True, exist_ok=True)
    return running_broker(root, properties)


async def ha_port(master: BrokerProcess) -> int:
    """The master's HA port, from its log."""
    return int((await master.wait_line(_HA_LINE, START_TIMEOUT_S))[1])


async def broker_status(addr: str) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO (``mqadmin brokerStatus``) of a broker."""
    host, _, port = addr.rpartition(":")
    async with await open_connection(host, int(port)) as conn:
        cmd = RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO)
        resp = await conn.request(cmd, 5)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        return dict(KVTable.from_json(resp.body).table)


async def connected_slaves(
    master_addr: str, count: int, what: str = "the slave connecting"
) -> None:
    """Wait until the master's brokerStatus counts ``count`` connected slaves."""

    async def counted() -> bool:
        return (await broker_status(master_addr))["haConnectedSlaves"] == str(count)

    await until(what, counted)


async def until(what: str, check: Callable[[], object], timeout_s: float = 30.0) -> None:
    """Poll an async or plain condition until true, failing with ``what`` after the timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        got = check()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def commitlog_bytes(store: Path, end: int) -> bytes:
    """The commitlog's bytes from offset 0 to ``end``, read from its segment files."""
    out = bytearray()
    for path in sorted((store / "commitlog").iterdir()):
        out += path.read_bytes()
    return bytes(out[:end])
