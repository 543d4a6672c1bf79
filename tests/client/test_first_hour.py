"""What a newcomer meets in the first hour, against a real broker and name server.

A consumer of a topic that does not exist says so (once, at WARNING, readable under
plain ``logging``), ``async with`` starts consumers as it starts producers, and a
client given the broker's address instead of the name server's is told exactly that.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rocklet.client import LitePullConsumer, Message, MessageQueue, Producer, PushConsumer
from rocklet.client.admin import Admin
from rocklet.client.errors import ClientStateError, NotANameServerError
from rocklet.client.instance import ClientInstance
from rocklet.client.push_consumer import ConsumerStatus
from tests.client.consumers import WAIT_S, Collector, produce
from tests.cluster import running_cluster
from tests.logcapture import PlainLog, plain_sdk_log

MISSING = "OrdersTypo"


def _status(consumer: PushConsumer | LitePullConsumer) -> ConsumerStatus:
    """The status now (a call, so mypy does not carry a narrowed value across awaits)."""
    return consumer.status


def _rounds_without_queues(log: PlainLog) -> int:
    """Rebalance rounds that found no queue for MISSING after the first (debug lines)."""
    return len(log.matching("DEBUG", "no queues to rebalance", f"topic={MISSING}"))


async def test_a_consumer_of_a_missing_topic_warns_once_and_says_what_to_do(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path) as cluster:
        collector = Collector()
        consumer = PushConsumer(
            "CG_FIRST_HOUR", cluster.namesrv_addr, consume_from="first", rebalance_interval_s=0.05
        )
        with plain_sdk_log() as log:
            async with consumer.subscribe(MISSING, "*", collector):
                # Many rebalance rounds later, still one warning.
                await log.wait_for(lambda lg: _rounds_without_queues(lg) >= 3, WAIT_S)
                warnings = log.matching("WARNING", MISSING)
                assert warnings == [
                    "WARNING rocklet.client.rebalance: subscribed topic does not exist"
                    f' group=CG_FIRST_HOUR topic={MISSING} hint="create it (rocklet admin'
                    f" updateTopic -c <cluster> -t {MISSING}) or check the topic name;"
                    ' consuming starts once it exists"'
                ]
                # The retry topic appears with the first heartbeat: no false alarm.
                assert not log.matching("WARNING", "%RETRY%")

                # Doing what the warning says works without a restart.
                async with Admin(cluster.namesrv_addr, instance_name="admin") as admin:
                    await admin.create_topic(MISSING, queue_nums=2)
                await produce(cluster.namesrv_addr, MISSING, [b"finally"])
                await collector.wait_bodies(1)
        assert collector.bodies == {b"finally"}


async def test_async_with_starts_a_push_consumer_subscribed_before(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        await produce(cluster.namesrv_addr, "T", [b"a", b"b"])
        collector = Collector()
        consumer = PushConsumer("CG_WITH", cluster.namesrv_addr, consume_from="first")
        with pytest.raises(ClientStateError, match=r"subscribe to a topic before start\(\)"):
            async with consumer:
                pytest.fail("entered without a subscription")
        assert _status(consumer) is ConsumerStatus.CREATED  # nothing started, nothing leaked

        async with consumer.subscribe("T", "*", collector) as entered:
            assert entered is consumer and _status(consumer) is ConsumerStatus.RUNNING
            assert consumer.client_id is not None
            assert {mq.topic for mq in consumer.assignment()} == {"T", "%RETRY%CG_WITH"}
            await collector.wait_bodies(2)
            group = cluster.broker.ctx.clients.consumer_group("CG_WITH")
            assert group is not None
        assert _status(consumer) is ConsumerStatus.CLOSED
        assert cluster.broker.ctx.clients.consumer_group("CG_WITH") is None  # left the group
        assert sum(cluster.broker.ctx.offsets.offsets_of("CG_WITH", "T").values()) == 2


async def test_async_with_starts_a_lite_pull_consumer(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        async with Admin(cluster.namesrv_addr, instance_name="admin") as admin:
            await admin.create_topic("Lite", queue_nums=1)
        await produce(cluster.namesrv_addr, "Lite", [b"x", b"y"])
        consumer = LitePullConsumer("CG_LITE_WITH", cluster.namesrv_addr, consume_from="first")
        consumer.assign([MessageQueue("Lite", "broker-a", 0)])
        async with consumer:
            assert _status(consumer) is ConsumerStatus.RUNNING
            got: list[bytes] = []
            while len(got) < 2:
                got += [m.body for m in await consumer.poll(timeout_ms=int(WAIT_S * 1000))]
            assert got == [b"x", b"y"]
        assert _status(consumer) is ConsumerStatus.CLOSED


async def test_a_client_pointed_at_the_broker_is_told_so(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        broker = f"127.0.0.1:{cluster.broker.port}"
        expected = (
            f"{broker} is a broker, not a name server: pass the name server address "
            "(default port 9876) as namesrv"
        )

        async with Producer("PG_WRONG", broker) as producer:
            with pytest.raises(NotANameServerError) as raised:
                await producer.send(Message("T", b"lost"))
        assert str(raised.value) == expected and raised.value.addr == broker

        consumer = PushConsumer("CG_WRONG", broker, instance_name="wrong")
        with pytest.raises(NotANameServerError, match="is a broker, not a name server"):
            async with consumer.subscribe("T", "*", Collector()):
                pytest.fail("started against a broker address")
        assert _status(consumer) is ConsumerStatus.CLOSED  # the failed start undid itself

        async with ClientInstance(f"{broker};{cluster.namesrv_addr}") as instance:
            # The broker answers; it is not skipped as if it were down.
            with pytest.raises(NotANameServerError):
                await instance.topic_route("T")


@pytest.mark.parametrize("group", ["", "orders\n", "a b", "grp\udc80", "x" * 256, "组"], ids=repr)
def test_group_names_are_checked_like_topic_names(group: str) -> None:
    with pytest.raises(ValueError, match="group"):
        Producer(group)
    with pytest.raises(ValueError, match="group"):
        PushConsumer(group)
    with pytest.raises(ValueError, match="group"):
        LitePullConsumer(group)


def test_valid_group_names_are_accepted() -> None:
    for group in ("billing", "CID_orders-v2", "%RETRY%g", "x" * 255):
        assert Producer(group).config.group == group
        assert PushConsumer(group).config.group == group
        assert LitePullConsumer(group).group == group
