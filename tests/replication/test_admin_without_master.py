"""``rocklet admin`` statistics of a broker group whose master is down: read from its
slave, as mqadmin's ``selectBrokerAddr`` does, not left out."""

from __future__ import annotations

import signal
from pathlib import Path

from rocklet.client.admin import Admin
from rocklet.client.message import Message
from rocklet.client.producer import Producer
from rocklet.protocol.bodies.route import BrokerData
from tests.compat.harness import wait_for_route
from tests.replication.group_nodes import running_group
from tests.replication.nodes import broker_status, until

TOPIC = "NoMasterT"
QUEUES = 2


def test_a_group_without_its_master_is_read_from_its_slave() -> None:
    assert BrokerData("C", "b", {0: "m:1", 1: "s:1"}).any_addr == "m:1"
    assert BrokerData("C", "b", {2: "s2:1", 1: "s1:1"}).any_addr == "s1:1"
    assert BrokerData("C", "b", {}).any_addr is None


async def test_topic_status_counts_a_group_whose_master_died(tmp_path: Path) -> None:
    async with running_group(tmp_path, "ASYNC_MASTER", topics=[(TOPIC, QUEUES)]) as g:
        ns = g.namesrv.namesrv_addr
        await wait_for_route(ns, TOPIC, QUEUES)
        async with Producer("PG_NO_MASTER", ns) as producer:
            for i in range(10):
                await producer.send_orderly(Message(TOPIC, f"m{i}".encode()), i % QUEUES)
        end = int((await broker_status(g.master.broker_addr))["commitLogMaxOffset"])

        async def slave_has_all() -> bool:
            got = await broker_status(g.slave.broker_addr)
            return int(got["commitLogMaxOffset"]) >= end

        await until("the slave catching up", slave_has_all)
        assert g.master.proc is not None
        g.master.proc.send_signal(signal.SIGKILL)
        await g.master.proc.wait()
        async with Admin(ns) as admin:

            async def master_gone() -> bool:
                route = await admin.topic_route(TOPIC)
                return all(b.master_addr is None for b in route.broker_datas)

            await until("the route losing the master", master_gone)
            stats = await admin.topic_stats(TOPIC)
        assert sorted((mq.queue_id, o.max_offset) for mq, o in stats.items()) == [(0, 5), (1, 5)]
