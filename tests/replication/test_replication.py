"""Master-slave replication between real broker processes (docs/replication.md).

A master (``rocklet standalone``: its own name server) and a slave (``rocklet broker``
with brokerId 1 and brokerRole SLAVE) of the same brokerName, on loopback. The slave
learns the master's HA address from the name server's REGISTER_BROKER answer.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from pathlib import Path

from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import (
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocklet.protocol.message import iter_messages
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.adversity.procs import BrokerProcess
from tests.broker.test_send_pull import cpp_send, pull
from tests.replication.nodes import (
    SlaveProcess,
    broker_status,
    commitlog_bytes,
    connected_slaves,
    ha_port,
    master_props,
    running_master,
    slave_props,
    until,
)

TOPIC = "HaT"
QUEUES = 4


async def _connect(addr: str) -> Connection:
    host, _, port = addr.rpartition(":")
    return await open_connection(host, int(port))


async def send_some(addr: str, n: int, start: int = 0, size: int = 700) -> list[tuple[int, int]]:
    """Send ``n`` messages round-robin over the queues; (queue id, queue offset) of each."""
    out = []
    async with await _connect(addr) as conn:
        for i in range(start, start + n):
            body = f"m{i:06d}".encode().ljust(size, b".")
            resp = await conn.request(cpp_send(TOPIC, body, queue_id=i % QUEUES), 10)
            assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
            out.append((i % QUEUES, int(resp.ext_fields["queueOffset"])))
    return out


async def bodies(addr: str, queue_id: int, topic: str = TOPIC) -> list[bytes]:
    """Every message body of one queue, pulled from ``addr``."""
    got: list[bytes] = []
    async with await _connect(addr) as conn:
        while True:
            resp = await conn.request(pull(topic, queue_id, len(got)), 10)
            if resp.code != ResponseCode.SUCCESS:
                return got
            got += [m.body for m in iter_messages(resp.body)]


async def max_offset(addr: str) -> int:
    return int((await broker_status(addr))["commitLogMaxOffset"])


async def caught_up(master: BrokerProcess, slave: SlaveProcess) -> None:
    want = await max_offset(master.broker_addr)
    await until(
        f"the slave reaching offset {want}",
        lambda: _at_least(slave.broker_addr, want),
    )


async def _at_least(addr: str, want: int) -> bool:
    return await max_offset(addr) >= want


async def test_slave_follows_the_master_byte_for_byte(tmp_path: Path) -> None:
    async with running_master(tmp_path / "m", master_props()) as master:
        await ha_port(master)
        await send_some(master.broker_addr, 150)  # several segments before the slave starts
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props())
        try:
            await slave.start()
            await caught_up(master, slave)
            await send_some(master.broker_addr, 100, start=150)  # and while it follows
            # A delayed message: the master delivers it, the slave only receives both
            # records (a slave that delivered it too would diverge).
            async with await _connect(master.broker_addr) as conn:
                resp = await conn.request(cpp_send("HaDelay", b"later", props={"DELAY": "1"}), 5)
                assert resp.code == ResponseCode.SUCCESS

            async def delivered() -> bool:
                return len(await bodies(master.broker_addr, 0, "HaDelay")) == 1

            await until("the delayed message's delivery", delivered)
            await caught_up(master, slave)
            end = await max_offset(master.broker_addr)
            assert await max_offset(slave.broker_addr) == end
            assert commitlog_bytes(slave.store, end) == commitlog_bytes(master.store, end)
            names = sorted(p.name for p in (slave.store / "commitlog").iterdir())
            assert names == sorted(p.name for p in (master.store / "commitlog").iterdir())
            assert len(names) > 2
            # Dispatched on the slave exactly as on the master: pull from the slave.
            for q in range(QUEUES):
                assert await bodies(slave.broker_addr, q) == await bodies(master.broker_addr, q)
            status = await broker_status(slave.broker_addr)
            assert status["haConnected"] == "true" and status["haDiverged"] == "false"
            mstatus = await broker_status(master.broker_addr)
            assert mstatus["haConnectedSlaves"] == "1"
            # The slave takes no writes: RocketMQ's store answer, SERVICE_NOT_AVAILABLE.
            async with await _connect(slave.broker_addr) as conn:
                resp = await conn.request(cpp_send(TOPIC, b"no"), 5)
                assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
                assert "slave" in (resp.remark or "")
        finally:
            await slave.close()


async def test_sync_master_answers_after_the_slave_has_it(tmp_path: Path) -> None:
    async with running_master(tmp_path / "m", master_props("SYNC_MASTER")) as master:
        await ha_port(master)
        async with await _connect(master.broker_addr) as conn:
            resp = await conn.request(cpp_send(TOPIC, b"alone"), 5)
            assert resp.code == ResponseCode.SLAVE_NOT_AVAILABLE  # stored, not replicated
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props())
        try:
            await slave.start()
            await connected_slaves(master.broker_addr, 1)
            await caught_up(master, slave)
            # Concurrent sends: each is answered SEND_OK only once the slave acked it.
            acked: list[tuple[int, int]] = []

            async def sender(k: int) -> None:
                acked.extend(await send_some(master.broker_addr, 40, start=1000 * (k + 1)))

            await asyncio.gather(*(sender(k) for k in range(4)))
            await master.kill9()  # right after the last acknowledgement
            by_queue: dict[int, int] = {}
            for q, off in acked:
                by_queue[q] = max(by_queue.get(q, -1), off)
            for q, last in by_queue.items():
                got = await bodies(slave.broker_addr, q)
                assert len(got) > last, f"queue {q}: slave has {len(got)}, acked up to {last}"
        finally:
            await slave.close()


async def test_restarted_slave_catches_up_from_its_own_offset(tmp_path: Path) -> None:
    async with running_master(tmp_path / "m", master_props()) as master:
        await ha_port(master)
        await send_some(master.broker_addr, 60)
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props())
        try:
            await slave.start()
            await caught_up(master, slave)
            assert await slave.stop() == 0
            await send_some(master.broker_addr, 80, start=60)
            async with await _connect(master.broker_addr) as conn:
                header = UpdateConsumerOffsetRequestHeader("CG", TOPIC, 0, 7)
                cmd = RemotingCommand(
                    RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=header.to_ext_fields()
                )
                assert (await conn.request(cmd, 5)).code == ResponseCode.SUCCESS
            await slave.start()
            await caught_up(master, slave)

            async def offset_synced() -> bool:
                # The slave copies the master's consumer offsets (SlaveSynchronize).
                async with await _connect(slave.broker_addr) as conn:
                    query = QueryConsumerOffsetRequestHeader("CG", TOPIC, 0)
                    cmd = RemotingCommand(
                        RequestCode.QUERY_CONSUMER_OFFSET, ext_fields=query.to_ext_fields()
                    )
                    resp = await conn.request(cmd, 5)
                    return resp.ext_fields.get("offset") == "7"

            await until("the committed offset on the slave", offset_synced)
            line = await slave.wait_line(re.compile(r"following the master.*"), 5)
            assert "offset=0" not in line[0]  # from its own offset, not from scratch
            end = await max_offset(master.broker_addr)
            assert commitlog_bytes(slave.store, end) == commitlog_bytes(master.store, end)
            for q in range(QUEUES):
                assert await bodies(slave.broker_addr, q) == await bodies(master.broker_addr, q)
        finally:
            await slave.close()


async def test_divergent_slave_stops_and_says_so(tmp_path: Path) -> None:
    # A store with other bytes at the same offsets: written by another master first.
    async with running_master(tmp_path / "s", master_props()) as other:
        await send_some(other.broker_addr, 30, size=650)
        assert await other.stop() == 0
    async with running_master(tmp_path / "m", master_props()) as master:
        await ha_port(master)
        await send_some(master.broker_addr, 40)
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props())
        try:
            before = commitlog_bytes(slave.store, 10**9)
            await slave.start()

            async def diverged() -> bool:
                return (await broker_status(slave.broker_addr))["haDiverged"] != "false"

            await until("the slave reporting divergence", diverged)
            why = (await broker_status(slave.broker_addr))["haDiverged"]
            assert "differ at offset" in why, why
            await slave.wait_line(re.compile(r"error.*commitlog diverged", re.I), 5)
            assert commitlog_bytes(slave.store, 10**9) == before  # nothing appended
        finally:
            await slave.close()


async def test_sync_master_answers_flush_slave_timeout_when_the_slave_stalls(
    tmp_path: Path,
) -> None:
    props = master_props("SYNC_MASTER", slaveTimeout="300")
    async with running_master(tmp_path / "m", props) as master:
        await ha_port(master)
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props())
        try:
            await slave.start()
            await connected_slaves(master.broker_addr, 1)
            async with await _connect(master.broker_addr) as conn:
                resp = await conn.request(cpp_send(TOPIC, b"both"), 5)
                assert resp.code == ResponseCode.SUCCESS
                os.kill(slave.pid, signal.SIGSTOP)  # connected, but acknowledges nothing
                try:
                    resp = await conn.request(cpp_send(TOPIC, b"stalled"), 5)
                    assert resp.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
                    assert resp.ext_fields["msgId"]  # stored all the same
                finally:
                    os.kill(slave.pid, signal.SIGCONT)
                await caught_up(master, slave)
                resp = await conn.request(cpp_send(TOPIC, b"again"), 5)
                assert resp.code == ResponseCode.SUCCESS
        finally:
            await slave.close()
