"""A SYNC_MASTER with two slaves (brokerId 1 and 2) of the same brokerName.

RocketMQ 4.9.4's rule (``HAService.isSlaveOK`` / ``notifyTransferSome``): the master
keeps one ``push2SlaveMaxOffset``, the highest offset any connection acknowledged, and a
send waits for that; so any one slave's acknowledgement answers it, and a send fails
only when no slave is connected. Both slaves end up byte-identical to the master.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from rocklet.protocol.codes import ResponseCode
from tests.broker.test_send_pull import cpp_send
from tests.replication.nodes import (
    SlaveProcess,
    broker_status,
    commitlog_bytes,
    connected_slaves,
    ha_port,
    master_props,
    running_master,
    slave_props,
)
from tests.replication.test_lag import master_caught_up
from tests.replication.test_replication import QUEUES, TOPIC, _connect, bodies, send_some


async def test_two_slaves_copy_everything_and_either_one_answers_sync_sends(
    tmp_path: Path,
) -> None:
    props = master_props("SYNC_MASTER", slaveTimeout="2000")
    async with running_master(tmp_path / "m", props) as master:
        await ha_port(master)
        await send_without_slaves(master.broker_addr, 60)  # no slave yet: stored all the same
        one = SlaveProcess(tmp_path / "s1", master.namesrv_addr, slave_props())
        two = SlaveProcess(tmp_path / "s2", master.namesrv_addr, slave_props(brokerId="2"))
        try:
            await one.start()
            await two.start()
            status = await master_caught_up(master.broker_addr, slaves=2)
            assert status["haSlave0Addr"] != status["haSlave1Addr"]
            await send_some(master.broker_addr, 60, start=60)  # SEND_OK: both follow

            # One slave stopped (connected, silent): the other's acks answer the sends,
            # and the master shows the stopped one falling behind, the other not.
            os.kill(one.pid, signal.SIGSTOP)
            await send_some(master.broker_addr, 20, start=120)
            status = await broker_status(master.broker_addr)
            end = int(status["commitLogMaxOffset"])
            lags = {status[f"haSlave{i}Addr"]: int(status[f"haSlave{i}LagBytes"]) for i in (0, 1)}
            assert sorted(lags.values())[0] == 0 and sorted(lags.values())[1] > 0
            assert status["haSlaveAckOffset"] == str(end)  # the best slave's
            assert int(status["haMaxLagBytes"]) == max(lags.values())

            # Killed: the remaining slave still answers every send.
            os.kill(one.pid, signal.SIGKILL)
            await one.close()
            await connected_slaves(master.broker_addr, 1, "the master dropping the killed slave")
            await send_some(master.broker_addr, 20, start=140)

            # Both stopped: nobody acknowledges, the send times out (stored anyway).
            os.kill(two.pid, signal.SIGSTOP)
            try:
                async with await _connect(master.broker_addr) as conn:
                    resp = await conn.request(cpp_send(TOPIC, b"nobody"), 10)
                    assert resp.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
            finally:
                os.kill(two.pid, signal.SIGCONT)

            # The killed slave comes back and catches up; all three are the same bytes.
            await one.start()
            status = await master_caught_up(master.broker_addr, slaves=2)
            end = int(status["commitLogMaxOffset"])
            for slave in (one, two):
                mine = await broker_status(slave.broker_addr)
                assert mine["haOffset"] == str(end) and mine["haLagBytes"] == "0"
                assert commitlog_bytes(slave.store, end) == commitlog_bytes(master.store, end)
            for q in range(QUEUES):
                want = await bodies(master.broker_addr, q)
                assert len(want) == 161 // QUEUES + (q < 161 % QUEUES)
                assert await bodies(two.broker_addr, q) == want
                assert await bodies(one.broker_addr, q) == want
        finally:
            await one.close()
            await two.close()


async def send_without_slaves(addr: str, n: int) -> None:
    """Send ``n`` messages to a SYNC_MASTER without a slave: each is stored, answered 11."""
    async with await _connect(addr) as conn:
        for i in range(n):
            body = f"m{i:06d}".encode().ljust(700, b".")
            resp = await conn.request(cpp_send(TOPIC, body, queue_id=i % QUEUES), 10)
            assert resp.code == ResponseCode.SLAVE_NOT_AVAILABLE, (resp.code, resp.remark)
