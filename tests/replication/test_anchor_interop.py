"""Replication against real Apache RocketMQ 4.9.4 (the workspace's "anchor").

Needs the anchor scripts (``$ROCKLET_ANCHOR_SCRIPTS``, default ``/work/shared/anchor``)
and the release they set up under ``$ANCHOR_HOME`` (default ``/tmp/anchor``), plus Java;
skipped, saying which is missing, otherwise. Segments are 4 MiB on both sides.

- A RocketMQ slave follows a Rocklet master: byte-identical commitlogs.
- A Rocklet slave follows a RocketMQ master: byte-identical commitlogs, pulls served.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from rocklet.protocol.codes import ResponseCode
from tests.broker.test_send_pull import cpp_send
from tests.replication.nodes import (
    SlaveProcess,
    commitlog_bytes,
    ha_port,
    running_master,
    slave_props,
    until,
)
from tests.replication.test_replication import _connect, bodies, max_offset

SCRIPTS = Path(os.environ.get("ROCKLET_ANCHOR_SCRIPTS", "/work/shared/anchor"))
RELEASE = Path(os.environ.get("ANCHOR_HOME", "/tmp/anchor")) / "rocketmq-4.9.4"
SEGMENT = 4 * 1024 * 1024


def _missing() -> str | None:
    if not (SCRIPTS / "rmq_up.sh").is_file():
        return f"no anchor scripts at {SCRIPTS} (set ROCKLET_ANCHOR_SCRIPTS)"
    if not RELEASE.is_dir():
        return f"no RocketMQ 4.9.4 release at {RELEASE} (run the anchor's setup.sh)"
    if shutil.which("java") is None:
        return "no java on PATH"
    return None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(_missing() is not None, reason=_missing() or ""),
    pytest.mark.timeout(300),
]


async def _rmq_up(store: Path, extra: str) -> list[str]:
    """rmq_up.sh: returns NS_ADDR BROKER_ADDR NS_PID BROKER_PID STORE_DIR."""
    env = {**os.environ, "BROKER_EXTRA": extra}
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPTS / "rmq_up.sh"),
        str(store),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 180)
    fields = out.decode().strip().splitlines()[-1].split()
    assert proc.returncode == 0 and len(fields) == 5, out.decode()[-2000:]
    return fields


async def _rmq_down(ns_pid: str, broker_pid: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPTS / "rmq_down.sh"), ns_pid, broker_pid, stderr=asyncio.subprocess.DEVNULL
    )
    await asyncio.wait_for(proc.wait(), 120)


async def _send(addr: str, n: int, start: int = 0) -> None:
    async with await _connect(addr) as conn:
        for i in range(start, start + n):
            body = f"a{i:06d}".encode().ljust(900, b"-")
            resp = await conn.request(cpp_send("AnchorHa", body, queue_id=i % 4), 10)
            assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)


async def test_rocketmq_slave_follows_a_rocklet_master(tmp_path: Path) -> None:
    props = {"mappedFileSizeCommitLog": str(SEGMENT)}
    async with running_master(tmp_path / "m", props) as master:
        await ha_port(master)
        await _send(master.broker_addr, 3000)
        extra = "\n".join(
            [
                "brokerName=broker-a",
                "brokerId=1",
                "brokerRole=SLAVE",
                f"namesrvAddr={master.namesrv_addr}",
                f"mappedFileSizeCommitLog={SEGMENT}",
            ]
        )
        rmq = tmp_path / "rmq-slave"
        _, _, ns_pid, broker_pid, _ = await _rmq_up(rmq, extra)
        try:
            await _send(master.broker_addr, 3000, start=3000)  # crosses a segment
            end = await max_offset(master.broker_addr)
            want = commitlog_bytes(master.store, end)

            def same() -> bool:
                return commitlog_bytes(rmq, end) == want

            # Its first report comes ~5 s after it connects (RocketMQ's slave).
            await until("the RocketMQ slave's commitlog matching", same, 90)
        finally:
            await _rmq_down(ns_pid, broker_pid)


async def test_rocklet_slave_follows_a_rocketmq_master(tmp_path: Path) -> None:
    rmq = tmp_path / "rmq-master"
    ns, broker, ns_pid, broker_pid, _ = await _rmq_up(rmq, f"mappedFileSizeCommitLog={SEGMENT}")
    try:
        await _send(broker, 2000)
        slave = SlaveProcess(tmp_path / "s", ns, slave_props(mappedFileSizeCommitLog=str(SEGMENT)))
        try:
            await slave.start()
            await _send(broker, 2000, start=2000)
            ours = slave.store / "commitlog"

            def same() -> bool:
                files = sorted(p.name for p in ours.iterdir()) if ours.exists() else []
                if not files:
                    return False
                first = int(files[0])  # RocketMQ's master starts an empty slave here
                end = first + sum(p.stat().st_size for p in ours.iterdir())
                theirs = commitlog_bytes(rmq, end)[first:]
                mine = commitlog_bytes(slave.store, end - first)
                return mine.rstrip(b"\0") == theirs.rstrip(b"\0") and len(mine.rstrip(b"\0")) > 0

            await until("the Rocklet slave's commitlog matching", same, 60)
            got = sum([len(await bodies(slave.broker_addr, q, "AnchorHa")) for q in range(4)])
            assert got == 4000
        finally:
            await slave.close()
    finally:
        await _rmq_down(ns_pid, broker_pid)
