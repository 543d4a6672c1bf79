"""The client instance: routes, connections, heartbeats and broker-initiated requests."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from rocklet.client.admin import Admin
from rocklet.client.backoff import Backoff
from rocklet.client.errors import BrokerError, ClientStateError, ConnectError
from rocklet.client.instance import ClientInstance, get_instance
from rocklet.client.routes import NEGATIVE_ROUTE_TTL_MS
from rocklet.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.running import ConsumerRunningInfo
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import GetConsumerListByGroupRequestHeader
from rocklet.transport.clock import ManualClock
from tests.cluster import running_cluster

WAIT_S = 10.0


class FakeConsumer:
    """A typed stand-in for a consumer: records what the instance dispatches to it."""

    def __init__(
        self, group: str, *, topic: str = "Watched", fail_running_info: bool = False
    ) -> None:
        self.group = group
        self.topic = topic
        self.rebalanced = asyncio.Event()
        self.resets: asyncio.Queue[dict[MessageQueue, int]] = asyncio.Queue()
        self.fail_running_info = fail_running_info

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            self.group,
            ConsumeType.CONSUME_PASSIVELY,
            MessageModel.CLUSTERING,
            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            (SubscriptionData(self.topic, "*"),),
        )

    def rebalance_soon(self) -> None:
        self.rebalanced.set()

    async def running_info(self) -> ConsumerRunningInfo:
        if self.fail_running_info:
            raise RuntimeError("running info exploded")
        return ConsumerRunningInfo(properties={"owner": self.group})

    async def reset_offset(self, offsets: dict[MessageQueue, int]) -> None:
        await self.resets.put(offsets)

    def consume_offsets(self, topic: str) -> dict[MessageQueue, int]:
        return {}


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_routes_are_cached_shared_and_unknown_topics_use_the_template(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path) as cluster, ClientInstance(cluster.namesrv_addr) as inst:
        first, second = await asyncio.gather(inst.topic_route("TBW102"), inst.topic_route("TBW102"))
        assert first is not None and first is second  # one fetch served both
        assert await inst.topic_route("TBW102") is first  # cached
        assert await inst.topic_route("TBW102", refresh=True) == first
        assert inst.routes.broker_addrs() == [f"127.0.0.1:{cluster.broker.port}"]
        assert inst.routes.master_addr("broker-a") == f"127.0.0.1:{cluster.broker.port}"

        assert await inst.topic_route("NotThere") is None
        queues = await inst.routes.publish_queues("NotThere")
        assert queues == [MessageQueue("NotThere", "broker-a", i) for i in range(4)]
        assert await inst.routes.subscribe_queues("NotThere") == []
        template = await inst.routes.publish_queues("TBW102")
        assert await inst.routes.publish_queues("TBW102") is template


async def test_a_dead_address_fails_fast_during_backoff(tmp_path: Path) -> None:
    port = dead_port()
    async with ClientInstance(f"127.0.0.1:{port}", backoff=Backoff(base_s=30, max_s=60)) as inst:
        cmd = RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO)
        with pytest.raises(ConnectError) as first:
            await inst.invoke(f"127.0.0.1:{port}", cmd)
        assert "not trying" not in str(first.value)
        with pytest.raises(ConnectError, match="not trying") as refused:
            await inst.invoke(f"127.0.0.1:{port}", cmd)
        # It says why the address is avoided: the first attempt's own error.
        assert str(refused.value).startswith(f"{first.value} (not trying 127.0.0.1:{port} again")


async def test_the_next_name_server_is_tried_when_one_is_down(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        namesrv = f"127.0.0.1:{dead_port()};{cluster.namesrv_addr}"
        async with ClientInstance(namesrv) as inst:
            assert await inst.topic_route("TBW102") is not None


async def test_shared_instances_are_reference_counted(tmp_path: Path) -> None:
    one = get_instance("127.0.0.1:1", "shared")
    two = get_instance("127.0.0.1:1", "shared")
    other = get_instance("127.0.0.1:1", "other")
    assert one is two and one is not other and one.client_id != other.client_id
    await one.release()
    assert not two.closed
    await two.release()
    assert two.closed
    assert get_instance("127.0.0.1:1", "shared") is not one
    await get_instance("127.0.0.1:1", "shared").close()
    await other.release()
    with pytest.raises(ClientStateError):
        await other.topic_route("T")


async def test_heartbeat_registers_the_consumer_and_notify_triggers_rebalance(
    tmp_path: Path,
) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        ClientInstance(cluster.namesrv_addr, instance_name="one") as first,
        ClientInstance(cluster.namesrv_addr, instance_name="two") as second,
    ):
        await first.topic_route("TBW102")
        await second.topic_route("TBW102")
        watcher = FakeConsumer("CG_NOTIFY")
        first.groups.register_consumer("CG_NOTIFY", watcher)
        await first.groups.send_heartbeat()

        addr = first.routes.broker_addrs()[0]
        header = GetConsumerListByGroupRequestHeader("CG_NOTIFY")
        cmd = RemotingCommand(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP, ext_fields=header.to_ext_fields()
        )
        answer = await first.invoke(addr, cmd)
        assert first.client_id.encode() in answer.body

        # A second member joins: the broker tells the first to rebalance (code 40).
        second.groups.register_consumer("CG_NOTIFY", FakeConsumer("CG_NOTIFY"))
        await second.groups.send_heartbeat()
        await asyncio.wait_for(watcher.rebalanced.wait(), WAIT_S)


async def test_running_info_is_relayed_and_failures_reach_the_error_callback(
    tmp_path: Path,
) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        ClientInstance(cluster.namesrv_addr) as inst,
        Admin(cluster.namesrv_addr, instance_name="admin") as admin,
    ):
        await inst.topic_route("TBW102")
        inst.groups.register_consumer("CG_INFO", FakeConsumer("CG_INFO"))
        broken = FakeConsumer("CG_BROKEN", fail_running_info=True)
        inst.groups.register_consumer("CG_BROKEN", broken)
        await inst.groups.send_heartbeat()

        info = await admin.consumer_running_info("CG_INFO", inst.client_id)
        assert info.properties["owner"] == "CG_INFO"

        errors: list[BaseException] = []
        remove = inst.on_error(errors.append)
        with pytest.raises(BrokerError, match="running info exploded"):
            await admin.consumer_running_info("CG_BROKEN", inst.client_id)
        assert [str(e) for e in errors] == ["running info exploded"]
        remove()

        # Without a callback the failure is kept for the next call.
        with pytest.raises(BrokerError, match="exploded"):
            await admin.consumer_running_info("CG_BROKEN", inst.client_id)
        with pytest.raises(RuntimeError, match="exploded"):
            inst.check_errors()
        inst.check_errors()  # raised once only


async def test_close_is_idempotent_and_fails_waiting_replies(tmp_path: Path) -> None:
    inst = ClientInstance("127.0.0.1:1")
    await inst.start()
    waiting = inst.replies.expect("corr-1")
    await inst.close()
    await inst.close()
    with pytest.raises(ClientStateError):
        await waiting
    with pytest.raises(ClientStateError):
        await inst.start()


async def test_a_missing_topic_is_believed_for_the_negative_ttl_of_the_instance_clock(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    async with (
        running_cluster(tmp_path) as cluster,
        ClientInstance(cluster.namesrv_addr, clock=clock) as inst,
        Admin(cluster.namesrv_addr, instance_name="admin") as admin,
    ):
        assert await inst.routes.topic_route("Later") is None
        await admin.create_topic("Later", queue_nums=2)
        # The name server knows it now, but "no route" is believed for 2 s of the
        # instance's clock, which has not moved: no new question is asked.
        assert await inst.routes.topic_route("Later") is None
        assert await inst.routes.publish_queues("Later") == [
            MessageQueue("Later", "broker-a", i)
            for i in range(4)  # TBW102's guess
        ]
        clock.advance(NEGATIVE_ROUTE_TTL_MS - 1)
        assert await inst.routes.topic_route("Later") is None
        clock.advance(1)
        route = await inst.routes.topic_route("Later")
        assert route is not None and route.queue_datas[0].write_queue_nums == 2
        assert await inst.routes.subscribe_queues("Later") == [
            MessageQueue("Later", "broker-a", i) for i in range(2)
        ]


async def test_reconnect_backoff_runs_on_the_instance_clock() -> None:
    clock = ManualClock()
    port = dead_port()
    backoff = Backoff(base_s=30, max_s=30)
    async with ClientInstance(f"127.0.0.1:{port}", backoff=backoff, clock=clock) as inst:
        cmd = RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO)
        with pytest.raises(ConnectError) as first:
            await inst.invoke(f"127.0.0.1:{port}", cmd)
        assert "not trying" not in str(first.value)
        clock.advance(14_999)  # equal jitter: the wait is between 15 and 30 s
        with pytest.raises(ConnectError, match="not trying"):
            await inst.invoke(f"127.0.0.1:{port}", cmd)
        clock.advance(15_001)
        with pytest.raises(ConnectError) as again:  # a real attempt again: refused
            await inst.invoke(f"127.0.0.1:{port}", cmd)
        assert "not trying" not in str(again.value)
