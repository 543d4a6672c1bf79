"""SYNC_MASTER waits for the slave on every stored put, and not for WAIT=false messages.

Real processes: a SYNC_MASTER ``rocklet standalone`` and, in the second test, a slave
stopped with SIGSTOP (connected, acknowledging nothing). The answers are 4.9.4's:
a send-back that the slave did not get is SYSTEM_ERROR naming the status, an
END_TRANSACTION commit is SUCCESS either way, a stored reply says how far it got as a
send does, and a WAIT=false send is answered at once.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from rocklet.protocol.bodies.heartbeat import HeartbeatData, ProducerData
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import iter_messages
from rocklet.protocol.message_id import parse_offset_msg_id
from rocklet.transport.connection import Connection, HandlerResult
from rocklet.transport.dial import open_connection
from tests.broker.test_reply import reply_props, reply_v2
from tests.broker.test_send_pull import cpp_send
from tests.broker.test_sendback import cpp_send_back
from tests.broker.test_transaction import Half, end_transaction, half_send, pull
from tests.replication.nodes import (
    SlaveProcess,
    connected_slaves,
    ha_port,
    master_props,
    running_master,
    slave_props,
)
from tests.replication.test_replication import _connect, caught_up, max_offset

_COMMIT = 8  # TransactionType.COMMIT


async def _stored_at(conn: Connection, cmd: RemotingCommand, code: ResponseCode) -> int:
    resp = await conn.request(cmd, 5)
    assert resp.code == code, (resp.code, resp.remark)
    return parse_offset_msg_id(resp.ext_fields["msgId"]).offset


async def _half(conn: Connection, key: str, code: ResponseCode) -> Half:
    resp = await conn.request(half_send("TxT", b"tx-" + key.encode(), key), 5)
    assert resp.code == code, (resp.code, resp.remark)
    offset = parse_offset_msg_id(resp.ext_fields["msgId"]).offset
    return Half(int(resp.ext_fields["queueOffset"]), offset, key)


async def _committed_bodies(conn: Connection) -> list[bytes]:
    resp = await conn.request(pull("TxT", 1), 5)
    return [] if resp.code != ResponseCode.SUCCESS else [m.body for m in iter_messages(resp.body)]


async def _register_requester(
    addr: str, client_id: str
) -> tuple[Connection, asyncio.Queue[RemotingCommand]]:
    pushed: asyncio.Queue[RemotingCommand] = asyncio.Queue()

    async def handler(_conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        await pushed.put(cmd)
        return cmd.make_response(ResponseCode.SUCCESS)

    host, _, port = addr.rpartition(":")
    conn = await open_connection(host, int(port), handler=handler)
    beat = HeartbeatData(client_id, producer_data_set=(ProducerData("RPG"),))
    cmd = RemotingCommand(RequestCode.HEART_BEAT, body=beat.to_json())
    assert (await conn.request(cmd, 5)).code == ResponseCode.SUCCESS
    return conn, pushed


async def test_without_a_slave_every_stored_put_says_so(tmp_path: Path) -> None:
    async with running_master(tmp_path / "m", master_props("SYNC_MASTER")) as master:
        await ha_port(master)
        async with await _connect(master.broker_addr) as conn:
            waited = await _stored_at(
                conn, cpp_send("PutT", b"w"), ResponseCode.SLAVE_NOT_AVAILABLE
            )
            # WAIT=false: answered once stored, as RocketMQ does.
            nowait = cpp_send("PutT", b"nw", props={"WAIT": "false"})
            assert await _stored_at(conn, nowait, ResponseCode.SUCCESS) > waited
            # A send-back stores the retry copy but answers SYSTEM_ERROR naming the status
            # (SendMessageProcessor.asyncConsumerSendMsgBack); the consumer keeps it.
            resp = await conn.request(cpp_send_back("CG", waited), 5)
            assert resp.code == ResponseCode.SYSTEM_ERROR
            assert resp.remark == "SLAVE_NOT_AVAILABLE"
            # A commit: SUCCESS, the half resolved (EndTransactionProcessor).
            half = await _half(conn, "K1", ResponseCode.SLAVE_NOT_AVAILABLE)
            resp = await conn.request(end_transaction(half, _COMMIT), 5)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            assert await _committed_bodies(conn) == [b"tx-K1"]
        req, pushed = await _register_requester(master.broker_addr, "requester-1")
        try:
            async with await _connect(master.broker_addr) as replier:
                resp = await replier.request(reply_v2(b"pong", reply_props("requester-1")), 5)
                assert resp.code == ResponseCode.SLAVE_NOT_AVAILABLE, resp.remark
                assert int(resp.ext_fields["queueOffset"]) == 0  # stored all the same
            assert (await asyncio.wait_for(pushed.get(), 5)).body == b"pong"
        finally:
            await req.close()


async def test_a_stalled_slave_holds_every_stored_put_but_wait_false(tmp_path: Path) -> None:
    props = master_props("SYNC_MASTER", slaveTimeout="300")
    async with running_master(tmp_path / "m", props) as master:
        await ha_port(master)
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props())
        try:
            await slave.start()
            await connected_slaves(master.broker_addr, 1)
            async with await _connect(master.broker_addr) as conn:
                first = await _stored_at(conn, cpp_send("PutT", b"a"), ResponseCode.SUCCESS)
                half = await _half(conn, "K2", ResponseCode.SUCCESS)
                os.kill(slave.pid, signal.SIGSTOP)
                try:
                    loop = asyncio.get_running_loop()
                    began = loop.time()
                    nowait = cpp_send("PutT", b"nw", props={"WAIT": "false"})
                    await _stored_at(conn, nowait, ResponseCode.SUCCESS)
                    assert loop.time() - began < 0.25  # never waited for slaveTimeout
                    resp = await conn.request(cpp_send_back("CG", first), 5)
                    assert resp.code == ResponseCode.SYSTEM_ERROR
                    assert resp.remark == "FLUSH_SLAVE_TIMEOUT"
                    began = loop.time()
                    resp = await conn.request(end_transaction(half, _COMMIT), 5)
                    assert resp.code == ResponseCode.SUCCESS, resp.remark
                    assert loop.time() - began >= 0.3  # it did wait for the slave
                    assert await _committed_bodies(conn) == [b"tx-K2"]
                finally:
                    os.kill(slave.pid, signal.SIGCONT)
                await caught_up(master, slave)
                # With the slave back, a send-back is SUCCESS only once the slave has it.
                resp = await conn.request(cpp_send_back("CG", first), 5)
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                assert await max_offset(slave.broker_addr) >= await max_offset(master.broker_addr)
        finally:
            await slave.close()
