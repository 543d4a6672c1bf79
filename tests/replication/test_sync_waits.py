"""Sends waiting for a slave (and the disk) when their connection closes or the broker stops.

Real processes: a SYNC_MASTER ``rocklet standalone`` with ``flushDiskType=SYNC_FLUSH``
(so a send waits in both FIFOs, disk then slave) and a slave stopped with SIGSTOP
(connected, acknowledging nothing). Readiness is a WAIT=false send on the same
connection: requests on a connection are handled in order, so once its answer is back
the waiting sends before it are stored and registered.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.connection import Connection
from rocklet.transport.errors import ConnectionClosedError
from tests.broker.test_send_pull import cpp_send
from tests.replication.nodes import (
    SlaveProcess,
    connected_slaves,
    ha_port,
    master_props,
    running_master,
    slave_props,
)
from tests.replication.test_replication import _connect, caught_up

_TOPIC = "WaitT"


def _props(slave_timeout_ms: int) -> dict[str, str]:
    return master_props(
        "SYNC_MASTER", slaveTimeout=str(slave_timeout_ms), flushDiskType="SYNC_FLUSH"
    )


async def _waiting_sends(conn: Connection, n: int) -> list[asyncio.Task[RemotingCommand]]:
    """Pipeline ``n`` sends that must wait; return once all are stored and waiting."""
    sends = [
        asyncio.ensure_future(conn.request(cpp_send(_TOPIC, f"w{i}".encode()), 30))
        for i in range(n)
    ]
    ready = await conn.request(cpp_send(_TOPIC, b"nw", props={"WAIT": "false"}), 5)
    assert ready.code == ResponseCode.SUCCESS, ready.remark
    assert not any(s.done() for s in sends)  # the slave is stopped: they wait
    return sends


def _no_callback_failed(lines: list[str]) -> None:
    text = "".join(lines)
    assert "wait callback failed" not in text and "Traceback" not in text, text[-3000:]


async def test_a_connection_closed_while_its_sends_wait(tmp_path: Path) -> None:
    async with running_master(tmp_path / "m", _props(1000)) as master:
        await ha_port(master)
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props())
        try:
            await slave.start()
            await connected_slaves(master.broker_addr, 1)
            async with await _connect(master.broker_addr) as other:
                first = await other.request(cpp_send(_TOPIC, b"first"), 5)
                assert first.code == ResponseCode.SUCCESS, first.remark
                os.kill(slave.pid, signal.SIGSTOP)
                try:
                    doomed = await _connect(master.broker_addr)
                    sends = await _waiting_sends(doomed, 5)
                    await doomed.close()
                    for outcome in await asyncio.gather(*sends, return_exceptions=True):
                        assert isinstance(outcome, ConnectionClosedError), outcome
                    # Registered after theirs, so answered after their waits ended (by
                    # timeout, with nobody left to write to): the broker carries on.
                    late = await other.request(cpp_send(_TOPIC, b"late"), 5)
                    assert late.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, late.remark
                finally:
                    os.kill(slave.pid, signal.SIGCONT)
                await caught_up(master, slave)
                again = await other.request(cpp_send(_TOPIC, b"again"), 5)
                assert again.code == ResponseCode.SUCCESS, again.remark
        finally:
            await slave.close()
        _no_callback_failed(master.lines)


async def test_sends_waiting_at_shutdown_are_answered_within_the_grace(tmp_path: Path) -> None:
    # slaveTimeout (1.5 s) inside the stop's grace period (5 s): the graceful stop waits
    # for the deferred answers as it waits for handler tasks, so each is answered.
    async with running_master(tmp_path / "m", _props(1500)) as master:
        await ha_port(master)
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props())
        try:
            await slave.start()
            await connected_slaves(master.broker_addr, 1)
            async with await _connect(master.broker_addr) as conn:
                first = await conn.request(cpp_send(_TOPIC, b"first"), 5)
                assert first.code == ResponseCode.SUCCESS, first.remark
                os.kill(slave.pid, signal.SIGSTOP)
                try:
                    sends = await _waiting_sends(conn, 3)
                    exit_code = await master.stop()
                    answers = await asyncio.gather(*sends)
                finally:
                    os.kill(slave.pid, signal.SIGCONT)
            assert [a.code for a in answers] == [ResponseCode.FLUSH_SLAVE_TIMEOUT] * 3
            assert exit_code == 0
        finally:
            await slave.close()
        _no_callback_failed(master.lines)
