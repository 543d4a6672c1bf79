"""ASYNC_MASTER's loss window, provoked, real processes.

docs/replication.md says what ASYNC_MASTER guarantees: a send is answered once the
master stored it, and what the slave had not received when the master is lost is lost
with it. The failover test only measures that window (on loopback the slave keeps up);
this one opens it on purpose. The slave reaches the master's HA port through a proxy
(``haMasterAddress``); the proxy stops forwarding, messages are sent and answered
SEND_OK, the master is killed with SIGKILL and the proxy's connection reset, so the
bytes it held never arrive. The slave then holds exactly what it had before the stall,
and nothing the master did not store. The master, restarted over its own store, has
every message it acknowledged: a process crash loses nothing under ASYNC_FLUSH (the
page cache survives it), only losing the master's machine or disk does.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from rocklet.client.message import Message, SendStatus
from rocklet.client.producer import Producer
from tests.adversity.proxy import FaultyProxy
from tests.compat.harness import create_topic, wait_for_route
from tests.replication.group_nodes import BrokerNode, NamesrvProcess
from tests.replication.nodes import SEGMENT, broker_status, ha_port, until
from tests.replication.test_failover import QUEUES, keys_on
from tests.replication.test_replication import caught_up

TOPIC = "AsyncWindowT"
COMMON = {"brokerName": "broker-aw", "mappedFileSizeCommitLog": str(SEGMENT)}


def _keys(per_queue: dict[int, list[str]]) -> set[str]:
    return {k for keys in per_queue.values() for k in keys}


async def _send(producer: Producer, prefix: str, count: int) -> set[str]:
    keys = {f"{prefix}{i}" for i in range(count)}
    for key in sorted(keys):
        result = await producer.send(Message(TOPIC, f"body of {key}".encode(), keys=(key,)))
        assert result.status is SendStatus.SEND_OK, result
    return keys


async def test_async_master_acknowledges_what_its_slave_never_gets(tmp_path: Path) -> None:
    namesrv = NamesrvProcess(tmp_path / "ns")
    master = BrokerNode(tmp_path / "m", "", {**COMMON, "brokerId": "0"})
    slave: BrokerNode | None = None
    proxy: FaultyProxy | None = None
    try:
        await namesrv.start()
        ns = namesrv.namesrv_addr
        master._namesrv = ns
        await master.start()
        await create_topic(master.broker_addr, TOPIC, QUEUES)
        proxy = FaultyProxy("127.0.0.1", await ha_port(master))
        await proxy.start()
        slave = BrokerNode(
            tmp_path / "s",
            ns,
            {**COMMON, "brokerId": "1", "brokerRole": "SLAVE", "haMasterAddress": proxy.address},
        )
        await slave.start()

        async def connected() -> bool:
            return (await broker_status(master.broker_addr)).get("haConnectedSlaves") == "1"

        await until("the slave connecting through the proxy", connected)
        await wait_for_route(ns, TOPIC, QUEUES)
        async with Producer("PG_ASYNC_WINDOW", ns) as producer:
            replicated = await _send(producer, "r", 20)
            await caught_up(master, slave)
            proxy.stall()  # the replication link holds what the master sends from now
            window = await _send(producer, "w", 20)  # each answered SEND_OK
            await master.kill9()
            proxy.reset_all()  # the bytes the proxy held are gone with the link
        on_slave = _keys(await keys_on(slave.broker_addr, TOPIC))
        assert on_slave == replicated, sorted(on_slave ^ replicated)
        assert not window & on_slave  # the window: acknowledged, not replicated

        # The master's own store kept every message it acknowledged.
        await master.restart()
        on_master = _keys(await keys_on(master.broker_addr, TOPIC))
        assert on_master == replicated | window, sorted(on_master ^ (replicated | window))
    finally:
        for proc in (slave, master, namesrv):
            if proc is not None and proc.proc is not None and proc.proc.returncode is None:
                await proc.kill9()
        if proxy is not None:
            with contextlib.suppress(Exception):
                await proxy.close()
