"""Admin calls against a real name server and broker."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from rocklet.client.admin import Admin
from rocklet.client.errors import NoRouteError
from rocklet.client.instance import ClientInstance
from rocklet.client.message import Message
from rocklet.client.producer import Producer
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import UpdateConsumerOffsetRequestHeader
from tests.client.producer_support import WAIT_S
from tests.client.test_instance import FakeConsumer
from tests.cluster import running_cluster


def first_queue(queues: Sequence[MessageQueue], _msg: Message, _key: object) -> MessageQueue:
    return queues[0]


async def test_topics_are_created_listed_measured_and_deleted(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        Admin(cluster.namesrv_addr) as admin,
        Producer("PG", cluster.namesrv_addr) as producer,
    ):
        info = await admin.cluster_info()
        assert info.cluster_addr_table["DefaultCluster"] == ("broker-a",)
        addr = f"127.0.0.1:{cluster.broker.port}"
        assert info.broker_addr_table["broker-a"].master_addr == addr

        assert await admin.create_topic("AdminT", queue_nums=3) == [addr]
        route = await admin.topic_route("AdminT")
        assert [(q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [(3, 3)]
        assert "AdminT" in await admin.list_topics()

        for i in range(4):
            await producer.send_orderly(Message("AdminT", b"%d" % i), None, first_queue)
        stats = await admin.topic_stats("AdminT")
        assert [(mq.queue_id, s.min_offset, s.max_offset) for mq, s in stats.items()] == [
            (0, 0, 4),
            (1, 0, 0),
            (2, 0, 0),
        ]
        assert stats[MessageQueue("AdminT", "broker-a", 0)].last_update_timestamp > 0

        await admin.delete_topic("AdminT")
        assert "AdminT" not in await admin.list_topics()
        with pytest.raises(NoRouteError):
            await admin.topic_route("AdminT")


async def test_messages_are_found_by_key_unique_key_and_offset_id(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        Admin(cluster.namesrv_addr) as admin,
        Producer("PG", cluster.namesrv_addr) as producer,
    ):
        wanted = await producer.send(Message("Find", b"needle", keys=["order-42", "x"]))
        await producer.send(Message("Find", b"hay", keys="order-43"))

        by_key = await admin.query_by_key("Find", "order-42")
        assert [m.body for m in by_key] == [b"needle"]
        assert by_key[0].broker_name == "broker-a"
        assert await admin.query_by_key("Find", "order-44") == []

        by_uniq = await admin.query_by_unique_key("Find", wanted.msg_id)
        assert by_uniq is not None and by_uniq.body == b"needle"

        viewed = await admin.view_message(wanted.offset_msg_id)
        assert viewed.body == b"needle" and viewed.msg_id == wanted.msg_id


async def test_consumer_progress_lag_connections_and_offset_reset(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        Admin(cluster.namesrv_addr) as admin,
        Producer("PG", cluster.namesrv_addr) as producer,
        ClientInstance(cluster.namesrv_addr, instance_name="consumer") as consumer_side,
    ):
        await admin.create_topic("Lag", queue_nums=2)
        for i in range(5):
            await producer.send_orderly(Message("Lag", b"%d" % i), None, first_queue)
        consumer = FakeConsumer("CG_LAG", topic="Lag")
        await consumer_side.topic_route("Lag")
        consumer_side.groups.register_consumer("CG_LAG", consumer)
        await consumer_side.groups.send_heartbeat()
        commit = UpdateConsumerOffsetRequestHeader("CG_LAG", "Lag", 0, 2)
        answer = await consumer_side.invoke(
            f"127.0.0.1:{cluster.broker.port}",
            RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=commit.to_ext_fields()),
        )
        assert answer.code == ResponseCode.SUCCESS

        stats = await admin.consume_stats("CG_LAG", "Lag")
        progress = stats.offset_table[MessageQueue("Lag", "broker-a", 0)]
        assert (progress.broker_offset, progress.consumer_offset) == (5, 2)
        assert progress.last_timestamp > 0
        assert await admin.consumer_lag("CG_LAG") == 3
        with pytest.raises(NoRouteError, match="consumer group 'CG_NEVER' is unknown"):
            await admin.consumer_lag("CG_NEVER")

        connections = await admin.consumer_connections("CG_LAG")
        assert [c.client_id for c in connections.connection_set] == [consumer_side.client_id]
        assert set(connections.subscription_table) == {"Lag"}

        table = await admin.reset_offset_by_time("CG_LAG", "Lag", 0)
        assert table == {MessageQueue("Lag", "broker-a", q): 0 for q in range(2)}
        told = await asyncio.wait_for(consumer.resets.get(), WAIT_S)
        assert told == table
        assert await admin.consumer_lag("CG_LAG", "Lag") == 5


@pytest.mark.parametrize(
    ("topic", "queue_nums", "error"),
    [
        ("NoQueues", 0, "queue_nums must be at least 1"),
        ("TooMany", 1025, "queue_nums must be at most 1024"),
        ("Flag", True, "queue_nums must be an int"),
        ("a b", 8, "topic"),
    ],
)
async def test_create_topic_refuses_what_would_make_a_useless_topic(
    topic: str, queue_nums: int, error: str, tmp_path: Path
) -> None:
    # A topic of 0 read and 0 write queues is created by brokers (writeQueueNums 0 is how
    # a topic is drained), but as a new topic nobody can send to it or read it.
    async with running_cluster(tmp_path) as cluster, Admin(cluster.namesrv_addr) as admin:
        with pytest.raises(ValueError, match=error):
            await admin.create_topic(topic, queue_nums=queue_nums)
        assert topic not in await admin.list_topics()
        assert len(await admin.create_topic("Widest", queue_nums=1024)) == 1
        route = await admin.topic_route("Widest")
        assert [q.write_queue_nums for q in route.queue_datas] == [1024]
