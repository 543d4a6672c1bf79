"""Request-reply through a real broker: the reply is pushed to the requesting client."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocklet.client.admin import Admin
from rocklet.client.errors import InvalidMessageError, RequestReplyTimeoutError
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from rocklet.protocol.properties import Prop
from tests.client.producer_support import WAIT_S, long_poll, stored_all
from tests.cluster import running_cluster


async def test_request_gets_the_reply_sent_by_a_responder(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        Producer("PG_REQ", cluster.namesrv_addr, instance_name="requester") as requester,
        Producer("PG_RESP", cluster.namesrv_addr, instance_name="responder") as responder,
        Admin(cluster.namesrv_addr) as admin,
    ):
        await admin.create_topic("Questions", queue_nums=1)
        pending = asyncio.create_task(requester.request(Message("Questions", b"ping"), 8000))

        (question,) = await long_poll(cluster.broker.port, "Questions", 0)
        props = question.properties
        assert props[Prop.REPLY_TO_CLIENT] == requester.instance.client_id
        assert props[Prop.TTL] == "8000" and props[Prop.CLUSTER] == "DefaultCluster"

        await responder.reply(question, b"pong")
        answer = await asyncio.wait_for(pending, WAIT_S)
        assert answer.body == b"pong"
        assert answer.properties[Prop.CORRELATION_ID] == props[Prop.CORRELATION_ID]
        assert answer.topic == "DefaultCluster_REPLY_TOPIC"


async def test_requests_are_matched_to_their_own_replies(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        Producer("PG_REQ", cluster.namesrv_addr, instance_name="requester") as requester,
        Producer("PG_RESP", cluster.namesrv_addr, instance_name="responder") as responder,
        Admin(cluster.namesrv_addr) as admin,
    ):
        await admin.create_topic("Many", queue_nums=1)
        pending = [
            asyncio.create_task(requester.request(Message("Many", b"q%d" % i), 8000))
            for i in range(5)
        ]
        questions: list[MessageExt] = []
        while len(questions) < 5:
            questions += await long_poll(cluster.broker.port, "Many", 0, len(questions))
        for question in reversed(questions):  # answer out of order
            await responder.reply(question, b"re:" + question.body)
        answers = await asyncio.wait_for(asyncio.gather(*pending), WAIT_S)
        assert [a.body for a in answers] == [b"re:q%d" % i for i in range(5)]


async def test_unanswered_request_times_out(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, Producer("PG", cluster.namesrv_addr) as p:
        with pytest.raises(RequestReplyTimeoutError) as info:
            await p.request(Message("Nobody", b"hello?"), 300)
        assert info.value.timeout_ms == 300


async def test_reply_needs_a_request_message(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, Producer("PG", cluster.namesrv_addr) as p:
        await p.send(Message("Plain", b"x"))
        (plain,) = stored_all(cluster.broker, "Plain")
        with pytest.raises(InvalidMessageError):
            await p.reply(plain, b"y")
