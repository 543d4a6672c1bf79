"""Rocklet's SDK against a real Apache RocketMQ 4.9.4 name server and broker.

The SDK sends and pulls with RocketMQ's binary header (RocketMQSerializable) by
default; these tests prove a real broker reads those requests and that the SDK reads
its answers: single and batch sends, a push consumer, a pull consumer, keys and tags.

Needs a RocketMQ 4.9.4 release and Java (see tests/replication/test_anchor_interop.py);
skipped, saying which is missing, otherwise.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.message import Message, MessageExt, SendStatus
from rocklet.client.producer import Producer
from rocklet.client.pull_api import PullStatus
from rocklet.client.pull_consumer import PullConsumer
from rocklet.client.push_consumer import PushConsumer
from rocklet.protocol.bodies.queue import MessageQueue
from tests.replication.test_anchor_interop import _missing, _rmq_topic, _rmq_up

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(_missing() is not None, reason=_missing() or ""),
    pytest.mark.timeout(300),
]

TOPIC = "SdkOnRocketMQ"
QUEUES = 4


async def test_sdk_sends_and_consumes_through_a_real_rocketmq(tmp_path: Path) -> None:
    rocketmq = _rmq_up(tmp_path / "rmq")
    ns = rocketmq.namesrv
    try:
        await _rmq_topic(ns, TOPIC, QUEUES)
        sent: dict[str, bytes] = {}
        async with Producer("SdkOnRmqPG", ns) as producer:
            for i in range(40):
                body = f"single-{i}".encode() * 20
                result = await producer.send(Message(TOPIC, body, tags="TagA", keys=f"k{i}"))
                assert result.status is SendStatus.SEND_OK
                sent[result.msg_id] = body
            batch = [Message(TOPIC, f"batch-{i}".encode(), tags="TagB") for i in range(30)]
            result = await producer.send(batch)
            assert result.status is SendStatus.SEND_OK
            for msg_id, msg in zip(result.msg_id.split(","), batch, strict=True):
                sent[msg_id] = msg.body
        assert len(sent) == 70

        got: dict[str, MessageExt] = {}
        everything = asyncio.Event()

        async def listener(msgs: list[MessageExt]) -> ConsumeResult:
            for m in msgs:
                got[m.msg_id] = m
            if len(got) >= len(sent):
                everything.set()
            return ConsumeResult.SUCCESS

        consumer = PushConsumer("SdkOnRmqCG", ns, consume_from="first")
        consumer.subscribe(TOPIC, "TagA || TagB", listener)
        async with consumer:
            await asyncio.wait_for(everything.wait(), 60)
        assert {k: m.body for k, m in got.items()} == sent
        keyed = [m for m in got.values() if m.tags == "TagA"]
        assert sorted(int(m.keys[0][1:]) for m in keyed) == list(range(40))

        async with PullConsumer("SdkOnRmqPull", ns) as puller:
            tag_b: list[bytes] = []
            for q in range(QUEUES):
                mq = MessageQueue(TOPIC, _broker_name(got), q)
                pulled = await puller.pull(mq, 0, 64, expression="TagB")
                assert pulled.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG)
                tag_b += [m.body for m in pulled.messages]
        assert sorted(tag_b) == sorted(m.body for m in batch)
    finally:
        rocketmq.stop()


def _broker_name(got: dict[str, MessageExt]) -> str:
    (name,) = {m.broker_name for m in got.values()}
    return name
