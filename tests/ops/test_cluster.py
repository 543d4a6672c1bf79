"""``make cluster``'s topology as real processes: traffic spreads, fails over and comes back.

A name server, broker-a and broker-b run as ``rocklet`` child processes
(:class:`rocklet.cluster.LocalCluster`, ports picked by the OS). The SDK's producer and
push consumer run in the test; their client instance refreshes routes every 0.5 s
instead of RocketMQ's 30 s, which is the whole route-expiry window here (the name server
drops a stopped broker at once: it unregisters and its connection closes).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from rocklet.client.admin import Admin
from rocklet.client.backoff import Backoff
from rocklet.client.consume_result import ConsumeResult
from rocklet.client.instance import ClientInstance, get_instance
from rocklet.client.message import Message, MessageExt, SendResult
from rocklet.client.producer import Producer
from rocklet.client.push_consumer import PushConsumer
from rocklet.cluster import BROKERS, ClusterError, LocalCluster
from tests.ops.test_metrics import scrape, value
from tests.replication.nodes import broker_status

TOPIC = "OpsTopic"
GROUP = "OpsGroup"
TIMEOUT = 30.0
ROUTE_REFRESH_S = 0.5
SMALL_FILES = {
    "mappedFileSizeCommitLog": str(4 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(1000 * 20),
    "maxHashSlotNum": "1000",
    "maxIndexNum": "4000",
}


class Received:
    """Bodies a listener got, awaitable by content (duplicates are allowed)."""

    def __init__(self) -> None:
        self.bodies: set[bytes] = set()
        self._changed = asyncio.Condition()

    async def listener(self, msgs: list[MessageExt]) -> ConsumeResult:
        async with self._changed:
            self.bodies.update(m.body for m in msgs)
            self._changed.notify_all()
        return ConsumeResult.SUCCESS

    async def wait_for(self, bodies: set[bytes]) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: bodies <= self.bodies), TIMEOUT)


async def eventually(check: Callable[[], Awaitable[bool]], what: str, within_s: float) -> None:
    """Poll a remote or timer-driven state until it holds (the timeout fails the test)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {within_s} s waiting for {what}")
        await asyncio.sleep(0.05)


async def send_all(
    producer: Producer, phase: str, count: int
) -> tuple[set[bytes], list[SendResult]]:
    bodies = [f"{phase}-{i}".encode() for i in range(count)]
    results = [await producer.send(Message(TOPIC, body, keys=(phase,))) for body in bodies]
    return set(bodies), results


async def send_until_both(producer: Producer) -> tuple[set[bytes], list[SendResult]]:
    """Send until both brokers took messages (the producer may still be in reconnect
    backoff towards the restarted broker for its first sends), at least 20."""
    bodies: set[bytes] = set()
    results: list[SendResult] = []

    async def one_more() -> bool:
        body = f"again-{len(bodies)}".encode()
        results.append(await producer.send(Message(TOPIC, body, keys=("again",))))
        bodies.add(body)
        return len(bodies) >= 20 and brokers_of(results) == {"broker-a", "broker-b"}

    await eventually(one_more, "sends to reach broker-b again", TIMEOUT)
    return bodies, results


def brokers_of(results: list[SendResult]) -> set[str]:
    return {r.message_queue.broker_name for r in results}


async def route_brokers(admin: Admin) -> set[str]:
    """Broker names with a master in the route (a stopped master's slave stays listed)."""
    route = await admin.topic_route(TOPIC)
    return {b.broker_name for b in route.broker_datas if b.master_addr is not None}


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[LocalCluster]:
    local = LocalCluster(
        tmp_path,
        namesrv_port=0,
        broker_ports=dict.fromkeys(BROKERS, 0),
        metrics_ports=dict.fromkeys(BROKERS, 0),
        broker_properties=SMALL_FILES,
    )
    async with local:
        yield local


async def test_a_taken_port_names_the_flag_that_moves_the_process(tmp_path: Path) -> None:
    # The child's own line points at listenPort in broker.conf, which this command
    # rewrites at every start.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = dict.fromkeys(BROKERS, 0) | {"broker-b": port}
        local = LocalCluster(
            tmp_path,
            namesrv_port=0,
            broker_ports=ports,
            metrics_ports=None,
            broker_properties=SMALL_FILES,
        )
        with pytest.raises(ClusterError) as refused:
            async with local:
                pass
    assert "broker-b exited during start-up" in str(refused.value)
    assert str(refused.value).endswith("move broker-b with --broker-b-port")


@pytest.fixture
async def instance(cluster: LocalCluster) -> AsyncIterator[ClientInstance]:
    # Created first, so the producer and the consumer share it with these options.
    shared = get_instance(
        cluster.namesrv_addr,
        route_refresh_s=ROUTE_REFRESH_S,
        heartbeat_interval_s=1.0,
        backoff=Backoff(base_s=0.05, max_s=0.5),  # reconnect to the restarted broker soon
    )
    await shared.start()
    try:
        yield shared
    finally:
        await shared.release()


async def test_traffic_spreads_fails_over_to_broker_a_and_returns_without_loss(
    cluster: LocalCluster, instance: ClientInstance
) -> None:
    received = Received()
    async with Admin(cluster.namesrv_addr, instance_name="ops-admin") as admin:
        assert await admin.create_topic(TOPIC, queue_nums=4) == [
            cluster.broker_addr("broker-a"),
            cluster.broker_addr("broker-b"),
        ]
        await eventually(
            lambda: _equals(route_brokers(admin), {"broker-a", "broker-b"}), "the route", TIMEOUT
        )
        # latency_fault off, as Java's default: a broker that failed is not avoided for
        # minutes after it is back.
        async with Producer("OpsProducer", cluster.namesrv_addr, latency_fault=False) as producer:
            # Both masters up: messages spread over all 8 queues.
            sent, results = await send_all(producer, "both", 40)
            assert len({r.message_queue for r in results}) == 8
            consumer = PushConsumer(
                GROUP, cluster.namesrv_addr, consume_from="first", rebalance_interval_s=0.5
            )
            consumer.subscribe(TOPIC, "*", received.listener)
            await consumer.start()
            try:
                await received.wait_for(sent)
                before = {
                    mq.queue_id: o.max_offset
                    for mq, o in (await admin.topic_stats(TOPIC)).items()
                    if mq.broker_name == "broker-b"
                }

                # broker-b stops: the name server drops it at once and the producer
                # moves every send to broker-a (retrying, then from its refreshed route).
                await cluster.stop_broker("broker-b")
                assert await route_brokers(admin) == {"broker-a"}
                only_a, results = await send_all(producer, "only-a", 20)
                assert brokers_of(results) == {"broker-a"}
                await eventually(
                    lambda: _publishes_to(instance, {"broker-a"}),
                    "the producer's route to drop broker-b",
                    4 * ROUTE_REFRESH_S + 5,
                )
                await received.wait_for(only_a)

                # broker-b restarts on the same port and data: its queues are back whole.
                await cluster.start_broker("broker-b")
                assert await route_brokers(admin) == {"broker-a", "broker-b"}
                after = {
                    mq.queue_id: o.max_offset
                    for mq, o in (await admin.topic_stats(TOPIC)).items()
                    if mq.broker_name == "broker-b"
                }
                assert after == before
                await eventually(
                    lambda: _publishes_to(instance, {"broker-a", "broker-b"}),
                    "the producer's route to bring broker-b back",
                    4 * ROUTE_REFRESH_S + 5,
                )
                again, results = await send_until_both(producer)
                await received.wait_for(again)
            finally:
                await consumer.shutdown()
        assert sent | only_a | again <= received.bodies
        assert await admin.consumer_lag(GROUP, TOPIC) == 0

        stats = await admin.topic_stats(TOPIC)
        stored_on_a = sum(o.max_offset for mq, o in stats.items() if mq.broker_name == "broker-a")
    metrics_port = cluster.metrics_port("broker-a")
    assert metrics_port is not None
    samples = await scrape(metrics_port)
    assert value(samples, "rocklet_messages_put_total", topic=TOPIC) == stored_on_a


async def test_each_master_has_a_slave_that_follows_it(
    cluster: LocalCluster, instance: ClientInstance
) -> None:
    async with Admin(cluster.namesrv_addr, instance_name="ops-admin") as admin:
        info = await admin.cluster_info()
        groups = {
            name: dict(info.broker_addr_table[name].broker_addrs)
            for name in info.cluster_addr_table["DefaultCluster"]
        }
        assert groups == {
            "broker-a": {0: cluster.broker_addr("broker-a"), 1: cluster.broker_addr("broker-a-s")},
            "broker-b": {0: cluster.broker_addr("broker-b"), 1: cluster.broker_addr("broker-b-s")},
        }
        await admin.create_topic(TOPIC, queue_nums=4)
        await eventually(
            lambda: _equals(route_brokers(admin), {"broker-a", "broker-b"}), "the route", TIMEOUT
        )
        async with Producer("OpsProducer", cluster.namesrv_addr, latency_fault=False) as producer:
            _, results = await send_all(producer, "replicated", 40)
        assert brokers_of(results) == {"broker-a", "broker-b"}
        for master in ("broker-a", "broker-b"):
            slave = f"{master}-s"

            async def follows(master: str = master, slave: str = slave) -> bool:
                mine = await broker_status(cluster.broker_addr(master))
                theirs = await broker_status(cluster.broker_addr(slave))
                return (
                    mine["haConnectedSlaves"] == "1"
                    and mine["haSlave0LagBytes"] == "0"
                    and theirs["haOffset"] == mine["commitLogMaxOffset"]
                    and theirs["haLagBytes"] == "0"
                )

            await eventually(follows, f"{slave} to have everything {master} stored", TIMEOUT)
        # The slaves' Prometheus endpoints report their own lag.
        port = cluster.metrics_port("broker-a-s")
        assert port is not None
        samples = await scrape(port)
        assert value(samples, "rocklet_ha_connected") == 1
        assert value(samples, "rocklet_ha_lag_bytes") == 0


async def _equals(got: Awaitable[set[str]], expected: set[str]) -> bool:
    return await got == expected


async def _publishes_to(instance: ClientInstance, brokers: set[str]) -> bool:
    return {mq.broker_name for mq in await instance.routes.publish_queues(TOPIC)} == brokers
