"""Request-reply through a real broker: SEND_REPLY_MESSAGE(_V2) -> PUSH_REPLY_MESSAGE_TO_CLIENT.

The replier sends what Java's ``MessageUtil.createReplyMessage`` builds (docs/protocol.md):
topic ``<cluster>_REPLY_TOPIC`` and the CORRELATION_ID / REPLY_TO_CLIENT / TTL / MSG_TYPE
properties. The requester is a connection registered by HEART_BEAT as a
producer, whose handler records what the broker pushes to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import NamedTuple

from rocklet.protocol.bodies.heartbeat import HeartbeatData, ProducerData
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import iter_messages
from rocklet.protocol.message_id import parse_offset_msg_id
from rocklet.protocol.properties import decode_properties, encode_properties
from rocklet.transport.connection import Connection, HandlerResult
from rocklet.transport.dial import open_connection
from tests.cluster import Cluster, running_cluster

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


def reply_props(reply_to: str | None, correlation_id: str = "corr-1") -> dict[str, str]:
    props = {"CORRELATION_ID": correlation_id, "TTL": "3000", "MSG_TYPE": "reply"}
    props |= {"UNIQ_KEY": f"U-{correlation_id}", "CLUSTER": "DefaultCluster"}
    if reply_to is not None:
        props["REPLY_TO_CLIENT"] = reply_to
    return props


def reply_v2(body: bytes, props: dict[str, str]) -> RemotingCommand:
    """What a Java 4.9 replier sends by default (sendSmartMsg): code 325, V2 keys."""
    ext = {
        "a": "REPLIER",
        "b": REPLY_TOPIC,
        "c": "TBW102",
        "d": "4",
        "e": "-1",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": encode_properties(props).decode(),
        "j": "0",
        "k": "false",
        "m": "false",
    }
    return RemotingCommand(RequestCode.SEND_REPLY_MESSAGE_V2, ext_fields=ext, body=body)


def reply_v1(body: bytes, props: dict[str, str]) -> RemotingCommand:
    ext = {
        "producerGroup": "REPLIER",
        "topic": REPLY_TOPIC,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": "1700000000000",
        "flag": "0",
        "properties": encode_properties(props).decode(),
    }
    return RemotingCommand(RequestCode.SEND_REPLY_MESSAGE, ext_fields=ext, body=body)


class Requester(NamedTuple):
    conn: Connection
    pushed: asyncio.Queue[RemotingCommand]


@asynccontextmanager
async def requester(
    cluster: Cluster, client_id: str, answer: ResponseCode = ResponseCode.SUCCESS
) -> AsyncIterator[Requester]:
    """A producer connection that records pushed replies and answers with ``answer``."""
    pushed: asyncio.Queue[RemotingCommand] = asyncio.Queue()

    async def handler(_conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        await pushed.put(cmd)
        return cmd.make_response(answer, remark=None if answer == 0 else "no such request")

    conn = await open_connection("127.0.0.1", cluster.broker.port, handler=handler)
    async with conn:
        beat = HeartbeatData(client_id, producer_data_set=(ProducerData("RPG"),))
        cmd = RemotingCommand(RequestCode.HEART_BEAT, body=beat.to_json())
        assert (await conn.request(cmd, 5)).code == ResponseCode.SUCCESS
        yield Requester(conn, pushed)


def pull_reply_topic() -> RemotingCommand:
    ext = {
        "consumerGroup": "CG",
        "topic": REPLY_TOPIC,
        "queueId": "0",
        "queueOffset": "0",
        "maxMsgNums": "32",
        "sysFlag": "4",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
    }
    return RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=ext)


async def test_reply_is_pushed_to_the_requester_and_stored(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        requester(cluster, "requester-1") as req,
        await open_connection("127.0.0.1", cluster.broker.port) as replier,
    ):
        answer = await replier.request(reply_v2(b"pong", reply_props("requester-1")), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert answer.ext_fields["queueId"] == "0" and answer.ext_fields["queueOffset"] == "0"
        stored_at = parse_offset_msg_id(answer.ext_fields["msgId"]).offset

        pushed = await asyncio.wait_for(req.pushed.get(), 5)
        assert pushed.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT
        assert pushed.body == b"pong"
        ext = pushed.ext_fields
        assert ext["topic"] == REPLY_TOPIC and ext["producerGroup"] == "REPLIER"
        assert ext["storeHost"] == cluster.broker.addr
        assert ext["bornHost"].startswith("127.0.0.1:")
        assert int(ext["storeTimestamp"]) > 0 and ext["bornTimestamp"] == "1700000000000"
        props = decode_properties(ext["properties"])
        assert props["CORRELATION_ID"] == "corr-1" and props["REPLY_TO_CLIENT"] == "requester-1"
        assert int(props["PUSH_REPLY_TIME"]) > 0

        # storeReplyMessageEnable defaults to true: the reply is in the reply topic too.
        got = await replier.request(pull_reply_topic(), 5)
        (stored,) = list(iter_messages(got.body))
        assert stored.body == b"pong" and stored.physical_offset == stored_at
        assert stored.properties["CORRELATION_ID"] == "corr-1"


async def test_reply_to_an_unknown_or_missing_client_is_an_error(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, store_reply_message_enable=False) as cluster,
        requester(cluster, "refuser", answer=ResponseCode.SYSTEM_ERROR) as req,
        await open_connection("127.0.0.1", cluster.broker.port) as replier,
    ):
        unknown = await replier.request(reply_v1(b"x", reply_props("nobody")), 5)
        assert unknown.code == ResponseCode.SYSTEM_ERROR
        assert unknown.remark == "push reply message fail, channel of <nobody> not found."
        missing = await replier.request(reply_v1(b"x", reply_props(None)), 5)
        assert missing.code == ResponseCode.SYSTEM_ERROR
        assert "REPLY_TO_CLIENT" in (missing.remark or "")

        refused = await replier.request(reply_v1(b"x", reply_props("refuser", "c-2")), 5)
        assert refused.code == ResponseCode.SYSTEM_ERROR and "fail" in (refused.remark or "")
        pushed = await asyncio.wait_for(req.pushed.get(), 5)
        assert decode_properties(pushed.ext_fields["properties"])["CORRELATION_ID"] == "c-2"

        # With storeReplyMessageEnable=false nothing reaches the reply topic.
        got = await replier.request(pull_reply_topic(), 5)
        assert got.code == ResponseCode.PULL_NOT_FOUND


async def test_v1_reply_not_stored_answers_msg_id_zero(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, store_reply_message_enable=False) as cluster,
        requester(cluster, "requester-2") as req,
        await open_connection("127.0.0.1", cluster.broker.port) as replier,
    ):
        answer = await replier.request(reply_v1(b"v1", reply_props("requester-2")), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert answer.ext_fields["msgId"] == "0" and answer.ext_fields["queueOffset"] == "0"
        pushed = await asyncio.wait_for(req.pushed.get(), 5)
        assert pushed.body == b"v1" and pushed.ext_fields["queueId"] == "0"
