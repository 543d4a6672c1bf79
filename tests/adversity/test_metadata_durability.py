"""Acknowledged metadata survives ``kill -9``: topics, groups and offsets are on disk
before the answer that announces them goes out (docs/reliability.md, "Durability of
acknowledged data and metadata").

Each test changes something through a real ``rocklet standalone`` process, kills it with
SIGKILL as soon as the answer arrives, starts it again over the same directory and
looks for the change.
"""

from __future__ import annotations

from pathlib import Path

from rocklet.client import Admin, Message, Producer
from rocklet.client.pull_consumer import PullConsumer
from rocklet.protocol import fastjson
from rocklet.protocol.bodies.subscription_group import SubscriptionGroupConfig
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import (
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
)
from rocklet.transport.dial import open_connection
from tests.adversity.procs import BrokerProcess, running_broker

SMALL = {"mappedFileSizeCommitLog": "1048576"}


async def _request(broker: BrokerProcess, cmd: RemotingCommand) -> RemotingCommand:
    host, port = broker.broker_addr.split(":")
    async with await open_connection(host, int(port)) as conn:
        return await conn.request(cmd, 10)


async def group_names(broker: BrokerProcess) -> set[str]:
    """The broker's subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG)."""
    answer = await _request(broker, RemotingCommand(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return set(fastjson.loads(answer.body)["subscriptionGroupTable"])


async def committed_offset(broker: BrokerProcess, group: str, topic: str, queue_id: int) -> int:
    """The broker's committed offset of a group on a queue (QUERY_CONSUMER_OFFSET)."""
    header = QueryConsumerOffsetRequestHeader(group, topic, queue_id)
    answer = await _request(
        broker,
        RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, ext_fields=header.to_ext_fields()),
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return QueryConsumerOffsetResponseHeader.from_ext_fields(answer.ext_fields).offset


async def test_a_topic_created_by_a_send_survives_kill9(tmp_path: Path) -> None:
    async with running_broker(tmp_path, SMALL) as broker:
        async with Producer("meta-producer", broker.namesrv_addr) as producer:
            sent = await producer.send(Message("FreshTopic", b"hello"))
            await broker.kill9()
        await broker.restart()
        async with PullConsumer("meta-reader", broker.namesrv_addr) as reader:
            # The restarted broker registers the topic with its name server at start.
            queues = await reader.fetch_queues("FreshTopic")
            assert sent.message_queue in queues
            pulled = await reader.pull(sent.message_queue, sent.queue_offset, 1)
        assert [m.body for m in pulled.messages] == [b"hello"]


async def test_admin_topics_groups_and_offsets_survive_kill9(tmp_path: Path) -> None:
    async with running_broker(tmp_path, SMALL) as broker:
        async with Admin(broker.namesrv_addr) as admin:
            await admin.create_topic("AdminTopic", queue_nums=3)
        group = SubscriptionGroupConfig("AdminGroup", retry_max_times=7)
        answer = await _request(
            broker,
            RemotingCommand(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group.to_json()),
        )
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        async with Producer("meta-producer", broker.namesrv_addr) as producer:
            sent = await producer.send(Message("AdminTopic", b"m"))
        async with PullConsumer("OffsetGroup", broker.namesrv_addr) as consumer:
            await consumer.fetch_queues("AdminTopic")
            # The heartbeat auto-created the group and its retry topic; the answered
            # commit is on disk too.
            await consumer.commit(sent.message_queue, sent.queue_offset + 1)
            await broker.kill9()
        await broker.restart()
        assert {"AdminGroup", "OffsetGroup"} <= await group_names(broker)
        async with Admin(broker.namesrv_addr) as admin:
            route = await admin.topic_route("AdminTopic")
            assert [q.read_queue_nums for q in route.queue_datas] == [3]
            retry = await admin.topic_route("%RETRY%OffsetGroup")
            assert retry.queue_datas
        mq = sent.message_queue
        assert await committed_offset(broker, "OffsetGroup", mq.topic, mq.queue_id) == (
            sent.queue_offset + 1
        )
