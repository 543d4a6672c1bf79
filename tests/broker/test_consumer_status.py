"""INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) on the wire, against a real broker.

The members are raw connections that register with HEART_BEAT as a client does and
answer GET_CONSUMER_STATUS_FROM_CLIENT (221) the way the test says: with their
offsets, an error, a malformed body, or never (the broker must leave that one out
once its time is up, not fail the whole request).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest

from rocklet.broker.processors import admin_clients
from rocklet.protocol.bodies.consumer import GetConsumerStatusBody
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.connection import Connection, HandlerResult
from rocklet.transport.dial import open_connection
from tests.broker.wire_clients import consumer_heartbeat
from tests.cluster import Cluster, running_cluster

GROUP = "StatusG"
TOPIC = "StatusT"
WAIT_S = 10.0

#: How a member answers a 221: given the request, the response (``None``: never).
Answer = Callable[[RemotingCommand], Awaitable[RemotingCommand | None]]


def offsets(*pairs: tuple[int, int]) -> dict[MessageQueue, int]:
    return {MessageQueue(TOPIC, "broker-a", q): o for q, o in pairs}


def with_offsets(table: dict[MessageQueue, int]) -> Answer:
    async def answer(cmd: RemotingCommand) -> RemotingCommand:
        body = GetConsumerStatusBody(message_queue_table=table).to_json()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    return answer


def with_body(body: bytes, code: int = ResponseCode.SUCCESS) -> Answer:
    async def answer(cmd: RemotingCommand) -> RemotingCommand:
        return cmd.make_response(code, remark="as the test says", body=body)

    return answer


class Member:
    """What a member saw: the 221 requests sent to it."""

    def __init__(self) -> None:
        self.asked: list[RemotingCommand] = []


@asynccontextmanager
async def member(
    cluster: Cluster, client_id: str, answer: Answer, *, version: int = 401
) -> AsyncIterator[Member]:
    """A consumer of GROUP on one connection, answering 221 with ``answer``."""
    seen = Member()

    async def handler(_conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        if cmd.code != RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
            return None  # NOTIFY_CONSUMER_IDS_CHANGED as members join and leave
        seen.asked.append(cmd)
        return await answer(cmd)

    async with await open_connection("127.0.0.1", cluster.broker.port, handler=handler) as conn:
        cmd = consumer_heartbeat(client_id, GROUP, TOPIC, version=version)
        assert (await conn.request(cmd, WAIT_S)).code == ResponseCode.SUCCESS
        yield seen
        # Leave as a client does at shutdown: the broker forgets it before answering.
        bye = RemotingCommand(
            RequestCode.UNREGISTER_CLIENT,
            ext_fields={"clientID": client_id, "consumerGroup": GROUP},
        )
        assert (await conn.request(bye, WAIT_S)).code == ResponseCode.SUCCESS


def ask(client_addr: str | None = None, topic: str = TOPIC) -> RemotingCommand:
    fields = {"topic": topic, "group": GROUP}
    if client_addr is not None:
        fields["clientAddr"] = client_addr
    return RemotingCommand(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, ext_fields=fields)


async def status(conn: Connection, cmd: RemotingCommand) -> dict[str, dict[MessageQueue, int]]:
    answer = await conn.request(cmd, WAIT_S)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    body = GetConsumerStatusBody.from_json(answer.body)
    assert body.message_queue_table == {}
    return {c: dict(t) for c, t in body.consumer_table.items()}


async def test_no_member_online_is_a_system_error(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
    ):
        answer = await conn.request(ask(), WAIT_S)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert answer.remark == f"No Any Consumer online in the consumer group: [{GROUP}]"
        # A group that had members and lost them answers the same.
        async with member(cluster, "gone", with_offsets({})):
            pass
        left = await conn.request(ask(), WAIT_S)
        assert (left.code, left.remark) == (answer.code, answer.remark)


async def test_every_member_answers_and_client_addr_picks_one(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
        member(cluster, "c-1", with_offsets(offsets((0, 5), (1, 7)))) as one,
        member(cluster, "c-2", with_offsets(offsets((2, 3)))) as two,
    ):
        assert await status(conn, ask()) == {
            "c-1": offsets((0, 5), (1, 7)),
            "c-2": offsets((2, 3)),
        }
        (relayed,) = one.asked
        # The member is asked for the topic and group only, as Broker2Client does.
        assert dict(relayed.ext_fields) == {"topic": TOPIC, "group": GROUP}

        assert await status(conn, ask("c-2")) == {"c-2": offsets((2, 3))}
        assert (len(one.asked), len(two.asked)) == (1, 2)
        # A blank clientAddr is every member; an unknown one is nobody (no error).
        assert set(await status(conn, ask("  "))) == {"c-1", "c-2"}
        assert await status(conn, ask("c-9")) == {}


async def test_a_silent_or_broken_member_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The 5 s RocketMQ gives each member, shortened: the silent one must not be waited
    # for longer than that, and must not fail the answer.
    monkeypatch.setattr(admin_clients, "STATUS_TIMEOUT_S", 0.5)
    never = asyncio.Event()

    async def silent(_cmd: RemotingCommand) -> RemotingCommand | None:
        await never.wait()
        return None

    async with AsyncExitStack() as stack:
        cluster = await stack.enter_async_context(running_cluster(tmp_path))
        conn = await stack.enter_async_context(
            await open_connection("127.0.0.1", cluster.broker.port)
        )
        members = {
            "ok": with_offsets(offsets((0, 1))),
            "silent": silent,
            "refuses": with_body(b"", ResponseCode.SYSTEM_ERROR),
            "garbled": with_body(b'{"messageQueueTable":[1,2]}'),
            "overflows": with_body(
                b'{"messageQueueTable":{{"brokerName":"b","queueId":0,"topic":"t"}'
                b":99999999999999999999}}"
            ),
            "no-body": with_body(b""),
        }
        asked = {
            cid: await stack.enter_async_context(member(cluster, cid, answer))
            for cid, answer in members.items()
        }
        async with asyncio.timeout(WAIT_S):
            assert await status(conn, ask()) == {"ok": offsets((0, 1))}
        assert all(len(m.asked) == 1 for m in asked.values())
        never.set()


async def test_a_member_too_old_and_a_bad_header_are_refused(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
        # V3_0_6 (ordinal 27): before V3_0_7_SNAPSHOT, which added 221.
        member(cluster, "old", with_offsets({}), version=27) as old,
    ):
        answer = await conn.request(ask(), WAIT_S)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert answer.remark is not None and "V3_0_6" in answer.remark, answer.remark
        assert old.asked == []

        no_topic = RemotingCommand(
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, ext_fields={"group": GROUP}
        )
        refused = await conn.request(no_topic, WAIT_S)
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert refused.remark is not None and "topic" in refused.remark, refused.remark
        bad_topic = await conn.request(ask(topic="bad topic"), WAIT_S)
        assert bad_topic.code == ResponseCode.SYSTEM_ERROR
        assert bad_topic.remark is not None and "bad topic" in bad_topic.remark
        assert old.asked == []
