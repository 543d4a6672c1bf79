"""Wrong arguments to consumers fail the call, against a real broker on loopback.

A topic name brokers refuse, given to ``subscribe`` (or pulled), would go into the
client instance's heartbeat, which the broker then refuses whole: every group sharing
the instance would silently stop being a live consumer. Offsets and counts that the
broker would refuse (or that would break the prefetch for ever) fail as ValueError at
the call instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.instance import ClientInstance
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from rocklet.client.pull_consumer import LitePullConsumer, PullConsumer, PullStatus
from rocklet.client.push_consumer import PushConsumer
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.names import MAX_TOPIC_LENGTH, retry_topic
from tests.client.consumers import WAIT_S, Collector
from tests.cluster import Cluster, running_cluster

#: Names a broker refuses in a heartbeat (``check_topic_name``).
BAD_TOPICS = ["a b", "", "   ", "T\n", "x" * (MAX_TOPIC_LENGTH + 1), "caf\u00e9", "a/b"]


async def ok(_msgs: list[MessageExt]) -> ConsumeResult:
    return ConsumeResult.SUCCESS


async def heartbeat_answer(cluster: Cluster, instance: ClientInstance) -> RemotingCommand:
    """What the broker answers to the instance's heartbeat as it stands now."""
    body = instance.groups.heartbeat_body()
    cmd = RemotingCommand(RequestCode.HEART_BEAT, body=body)
    return await instance.invoke(f"127.0.0.1:{cluster.broker.port}", cmd, WAIT_S)


@pytest.mark.parametrize("topic", BAD_TOPICS)
def test_push_subscribe_refuses_a_topic_brokers_refuse(topic: str) -> None:
    consumer = PushConsumer("CG_ARGS")
    with pytest.raises(ValueError, match="topic"):
        consumer.subscribe(topic, "*", ok)
    with pytest.raises(TypeError):
        consumer.subscribe(b"T", "*", ok)  # type: ignore[arg-type]


def test_subscribe_draws_the_line_where_brokers_do() -> None:
    consumer = PushConsumer("CG_ARGS")
    with pytest.raises(ValueError, match="max length 127"):
        consumer.subscribe("x" * (MAX_TOPIC_LENGTH + 1), "*", ok)
    consumer.subscribe("x" * MAX_TOPIC_LENGTH, "*", ok)
    consumer.subscribe("%RETRY%CG_ARGS", "*", ok)
    consumer.subscribe("Orders|EU-1_%", "*", ok)
    # The group's own retry topic is what the SDK subscribes itself, and brokers take it
    # at any length: a group name near its limit of 255 makes it longer than 127.
    long_group = "G" * 250
    PushConsumer(long_group).subscribe(retry_topic(long_group), "*", ok)
    lite = LitePullConsumer("CG_ARGS")
    with pytest.raises(ValueError, match="max length 127"):
        lite.subscribe("x" * (MAX_TOPIC_LENGTH + 1))
    lite.subscribe("x" * MAX_TOPIC_LENGTH)


def test_subscribe_refuses_a_listener_that_cannot_be_called() -> None:
    consumer = PushConsumer("CG_ARGS")
    with pytest.raises(TypeError, match="listener"):
        consumer.subscribe("T", "*", "handle")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="listener"):
        consumer.subscribe("T", "*", None)
    assert not consumer._expressions  # nothing half-subscribed


@pytest.mark.parametrize("topic", BAD_TOPICS[:3])
def test_lite_subscribe_and_assign_refuse_a_topic_brokers_refuse(topic: str) -> None:
    lite = LitePullConsumer("CG_ARGS")
    with pytest.raises(ValueError, match="topic"):
        lite.subscribe(topic)
    with pytest.raises(ValueError, match="topic"):
        lite.assign([MessageQueue("T", "broker-a", 0), MessageQueue(topic, "broker-a", 0)])
    lite.assign([MessageQueue("T", "broker-a", 0)])  # nothing was half-assigned


async def test_a_bad_subscribe_leaves_the_shared_heartbeat_acceptable(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, Producer("PG", cluster.namesrv_addr) as p:
        await p.send(Message("Valid", b"consumed"))  # the topic exists before the start
        got = Collector()
        first = PushConsumer("CG_FIRST", cluster.namesrv_addr, consume_from="first")
        second = PushConsumer("CG_SECOND", cluster.namesrv_addr)  # same instance
        async with first.subscribe("Valid", "*", got):
            with pytest.raises(ValueError, match="topic"):
                first.subscribe("bad topic", "*", ok)  # while running
            with pytest.raises(ValueError, match="topic"):
                second.subscribe("", "*", ok)
            second.subscribe("AlsoValid", "*", ok)
            async with second:
                assert first.client_id == second.client_id == p.instance.client_id
                answer = await heartbeat_answer(cluster, p.instance)
                assert answer.code == ResponseCode.SUCCESS, answer.remark
                await got.wait_bodies(1)


async def test_pull_refuses_bad_offsets_counts_and_topics_before_asking(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        async with Producer("PG", cluster.namesrv_addr) as producer:
            sent = await producer.send(Message("Pulled", b"one"))
        mq = sent.message_queue
        async with PullConsumer("CG_PULL", cluster.namesrv_addr) as consumer:
            for offset in (-1, "0", 1.0, True, None):
                with pytest.raises(ValueError, match="offset"):
                    await consumer.pull(mq, offset)  # type: ignore[arg-type]
                with pytest.raises(ValueError, match="offset"):
                    await consumer.pull_raw(mq, offset)  # type: ignore[arg-type]
            for count in (0, -5, "32"):
                with pytest.raises(ValueError, match="max_nums"):
                    await consumer.pull(mq, 0, count)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="long_poll_ms"):
                await consumer.pull(mq, 0, long_poll_ms=-1)
            with pytest.raises(ValueError, match="offset"):
                await consumer.commit(mq, -1)
            # A queue of a topic brokers refuse would put it in the heartbeat.
            with pytest.raises(ValueError, match="topic"):
                await consumer.pull(MessageQueue("no such/topic", mq.broker_name, 0), 0)
            assert (await heartbeat_answer(cluster, consumer.instance)).code == ResponseCode.SUCCESS
            result = await consumer.pull(mq, 0)
            assert result.status is PullStatus.FOUND
            assert [m.body for m in result.messages] == [b"one"]


async def test_lite_seek_refuses_what_is_no_offset_and_keeps_consuming(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        async with Producer("PG", cluster.namesrv_addr) as producer:
            # One sharding key: one queue.
            mine = [await producer.send_orderly(Message("Sought", b"m%d" % i), 7) for i in range(3)]
        mq = mine[0].message_queue
        assert {r.message_queue for r in mine} == {mq}
        lite = LitePullConsumer("CG_LITE", cluster.namesrv_addr, consume_from="first")
        lite.assign([mq])
        async with lite:
            for offset in (-1, "abc", True, 2.5, None):
                with pytest.raises(ValueError, match="offset"):
                    lite.seek(mq, offset)  # type: ignore[arg-type]
            lite.seek(mq, 0)
            got: list[MessageExt] = []
            while len(got) < len(mine):
                polled = await lite.poll(timeout_ms=int(WAIT_S * 1000))
                assert polled, "the prefetch stopped"
                got.extend(polled)
            assert [m.queue_offset for m in got] == [r.queue_offset for r in mine]
        # The final commit stored an offset the broker took (not a refused seek's).
        async with PullConsumer("CG_LITE", cluster.namesrv_addr) as reader:
            assert mq in await reader.fetch_queues("Sought")  # a route to find the broker
            assert await reader.committed(mq) == mine[-1].queue_offset + 1
