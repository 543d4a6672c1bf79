"""A master lost while its slave lags, and a master that comes back, real processes.

docs/replication.md says what ASYNC_MASTER guarantees: a send is answered once the
master stored it, and what the slave had not received when the master is lost is lost
with it. The failover test only measures that window (on loopback the slave keeps up);
the first test here opens it on purpose. The slave reaches the master's HA port through
a proxy (``haMasterAddress``); the proxy stops forwarding, messages are sent and
answered SEND_OK, the master is killed with SIGKILL and the proxy's connection reset,
so the bytes it held never arrive. The slave then holds exactly what it had before the
stall, and nothing the master did not store. The master, restarted over its own store,
has every message it acknowledged: a process crash loses nothing under ASYNC_FLUSH
(the page cache survives it), only losing the master's machine or disk does.

The second test restarts a killed master on new ports: its slave, which learns the
master's HA address from the name server, finds it again at its next registration and
copies what the master stored meanwhile.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from rocklet.client.message import Message, SendStatus
from rocklet.client.producer import Producer
from tests.adversity.proxy import FaultyProxy
from tests.compat.harness import create_topic, wait_for_route
from tests.replication.group_nodes import BrokerNode, NamesrvProcess
from tests.replication.nodes import SEGMENT, broker_status, ha_port, until
from tests.replication.test_failover import QUEUES, keys_on
from tests.replication.test_replication import caught_up

TOPIC = "MasterLossT"
COMMON = {"brokerName": "broker-ml", "mappedFileSizeCommitLog": str(SEGMENT)}


@dataclass
class _Nodes:
    namesrv: NamesrvProcess
    master: BrokerNode
    slave: BrokerNode | None = None

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.namesrv_addr

    async def start_slave(self, root: Path, props: dict[str, str]) -> BrokerNode:
        """Start the slave with these broker.conf additions; wait until it is connected."""
        conf = {**COMMON, "brokerId": "1", "brokerRole": "SLAVE", **props}
        self.slave = BrokerNode(root, self.namesrv_addr, conf)
        await self.slave.start()
        await until("the slave connecting", lambda: _connected(self.master))
        await wait_for_route(self.namesrv_addr, TOPIC, QUEUES)
        return self.slave


@asynccontextmanager
async def _master_up(root: Path) -> AsyncIterator[_Nodes]:
    """A name server and an ASYNC_MASTER with the topic; every process killed at the end."""
    nodes = _Nodes(NamesrvProcess(root / "ns"), BrokerNode(root / "m", "", COMMON))
    try:
        await nodes.namesrv.start()
        nodes.master._namesrv = nodes.namesrv_addr
        await nodes.master.start()
        await create_topic(nodes.master.broker_addr, TOPIC, QUEUES)
        yield nodes
    finally:
        for proc in (nodes.slave, nodes.master, nodes.namesrv):
            if proc is not None and proc.proc is not None and proc.proc.returncode is None:
                await proc.kill9()


async def _connected(master: BrokerNode) -> bool:
    return (await broker_status(master.broker_addr)).get("haConnectedSlaves") == "1"


def _keys(per_queue: dict[int, list[str]]) -> set[str]:
    return {k for keys in per_queue.values() for k in keys}


async def _send(namesrv_addr: str, prefix: str, count: int) -> set[str]:
    """``count`` keyed sends through the name server, each answered SEND_OK."""
    keys = {f"{prefix}{i}" for i in range(count)}
    async with Producer(f"PG_{prefix}", namesrv_addr) as producer:
        for key in sorted(keys):
            msg = Message(TOPIC, f"body of {key}".encode(), keys=(key,))
            result = await producer.send(msg)
            assert result.status is SendStatus.SEND_OK, result
    return keys


async def test_async_master_acknowledges_what_its_slave_never_gets(tmp_path: Path) -> None:
    async with _master_up(tmp_path) as nodes:
        master = nodes.master
        proxy = FaultyProxy("127.0.0.1", await ha_port(master))
        await proxy.start()
        try:
            slave = await nodes.start_slave(tmp_path / "s", {"haMasterAddress": proxy.address})
            replicated = await _send(nodes.namesrv_addr, "r", 20)
            await caught_up(master, slave)
            proxy.stall()  # the replication link holds what the master sends from now
            window = await _send(nodes.namesrv_addr, "w", 20)  # each answered SEND_OK
            await master.kill9()
            proxy.reset_all()  # the bytes the proxy held are gone with the link
        finally:
            await proxy.close()
        on_slave = _keys(await keys_on(slave.broker_addr, TOPIC))
        assert on_slave == replicated, sorted(on_slave ^ replicated)
        assert not window & on_slave  # the window: acknowledged, not replicated

        # The master's own store kept every message it acknowledged.
        await master.restart()
        on_master = _keys(await keys_on(master.broker_addr, TOPIC))
        assert on_master == replicated | window, sorted(on_master ^ (replicated | window))


async def test_a_slave_follows_its_master_back_on_new_ports(tmp_path: Path) -> None:
    async with _master_up(tmp_path) as nodes:
        master = nodes.master
        # The shortest registration period RocketMQ allows: the slave learns the
        # master's new HA address from the name server within 10 s of its return.
        slave = await nodes.start_slave(tmp_path / "s", {"registerNameServerPeriod": "10000"})
        before = await _send(nodes.namesrv_addr, "b", 10)
        await caught_up(master, slave)
        old_port = master.broker_port
        await master.kill9()
        await master.restart()  # port 0 again: new broker and HA ports
        assert master.broker_port != old_port
        after = await _send(nodes.namesrv_addr, "a", 10)
        await until("the slave reconnecting to the master", lambda: _connected(master), 60)
        await caught_up(master, slave)
        assert _keys(await keys_on(slave.broker_addr, TOPIC)) == before | after
