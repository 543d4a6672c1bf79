"""The HA port's guard against real Apache RocketMQ 4.9.4 (docs/replication.md, "Who may
follow a master"). The same release as ``test_anchor_interop.py``; marked slow, skipped
with the reason when the release or Java is missing.

- A RocketMQ slave cannot authenticate: a Rocklet master with ACL refuses it, by what
  it sent, and it receives nothing.
- A Rocklet slave told to authenticate against a RocketMQ master says why it cannot
  follow, instead of following a negative offset.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.replication.nodes import SlaveProcess, ha_port, running_master, slave_props, until
from tests.replication.test_anchor_interop import (
    SEGMENT,
    _missing,
    _rmq_slave,
    _rmq_up,
    _send,
)
from tests.replication.test_ha_guard import _ACL, SLAVE
from tests.replication.test_ha_guard import _send as _signed_send

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(_missing() is not None, reason=_missing() or ""),
    pytest.mark.timeout(300),
]


async def test_acl_master_refuses_a_rocketmq_slave(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(_ACL)
    props = {"mappedFileSizeCommitLog": str(SEGMENT), "aclEnable": "true", "aclFile": str(acl)}
    async with running_master(tmp_path / "m", props) as master:
        await ha_port(master)
        await _signed_send(master.broker_addr, 50, creds=SLAVE)
        rmq = tmp_path / "rmq-slave"
        rocketmq = _rmq_slave(rmq, master.namesrv_addr)
        try:
            # Its first report (offset 0, ~5 s after connecting) is refused, every time
            # it reconnects.
            await until(
                "two refusals of the RocketMQ slave",
                lambda: _count(master.lines, "read as offset 0") >= 2,
                60,
            )
            segments = list((rmq / "commitlog").glob("*")) if (rmq / "commitlog").exists() else []
            assert all(not p.read_bytes().strip(b"\0") for p in segments)
        finally:
            rocketmq.stop()


def _count(lines: list[str], text: str) -> int:
    return sum("HA connection refused" in ln and text in ln for ln in lines)


async def test_rocklet_slave_with_auth_says_a_rocketmq_master_cannot_take_it(
    tmp_path: Path,
) -> None:
    rmq = tmp_path / "rmq-master"
    rocketmq = _rmq_up(rmq, mappedFileSizeCommitLog=str(SEGMENT))
    ns, broker = rocketmq.namesrv, rocketmq.broker_addr
    try:
        await _send(broker, 100)
        props = slave_props(
            mappedFileSizeCommitLog=str(SEGMENT),
            haAuthEnable="true",
            accessKey=SLAVE.access_key,
            secretKey=SLAVE.secret_key,
        )
        slave = SlaveProcess(tmp_path / "s", ns, props)
        try:
            await slave.start()
            await until(
                "the slave's explanation",
                lambda: any("set haAuthEnable=false" in ln for ln in slave.lines),
                60,
            )
            ours = slave.store / "commitlog"
            assert not ours.exists() or not any(p.stat().st_size for p in ours.iterdir())
        finally:
            await slave.close()
    finally:
        rocketmq.stop()
