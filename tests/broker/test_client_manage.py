"""HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP and CHECK_CLIENT_CONFIG against a
real broker, with the frames the C++ client was recorded sending (captures/capture.jsonl).
"""

from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path
from typing import Any

from rocklet.protocol.bodies.consumer import ConsumerListBody
from rocklet.protocol.bodies.route import TopicRouteData
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.cluster import Cluster, running_cluster
from tests.conftest import CAPTURES

RECORDED_CLIENT_ID = "24420-127.0.0.1@DEFAULT"
RECORDED_GROUP = "CG_TEST"
RECORDED_PRODUCER_GROUP = "PG_TEST"


@functools.cache
def recorded_request(code: int) -> dict[str, Any]:
    """The first request with ``code`` the C++ client sent in the main capture."""
    for line in (CAPTURES / "capture.jsonl").read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["event"] == "request" and event["header"]["code"] == code:
            return dict(event)
    raise LookupError(code)


def cpp_request(code: int, ext: dict[str, str], body: bytes = b"") -> RemotingCommand:
    """A request as the C++ 1.2 client frames it: language CPP, version 63, remark "",
    and the credential trio it always sends (docs/protocol.md)."""
    trio = {k: v for k, (_kind, v) in recorded_request(RequestCode.HEART_BEAT)["extFields"].items()}
    return RemotingCommand(
        code, ext_fields={**trio, **ext}, body=body, remark="", language="CPP", version=63
    )


def cpp_heartbeat(
    client_id: str = RECORDED_CLIENT_ID,
    group: str = RECORDED_GROUP,
    producer_group: str = RECORDED_PRODUCER_GROUP,
) -> RemotingCommand:
    """The recorded C++ heartbeat (integer enums, string subVersion, ``atoi`` codeSet,
    trailing newline), with the client id and group names swapped in."""
    body = recorded_request(RequestCode.HEART_BEAT)["body"]
    body = body.replace(RECORDED_CLIENT_ID, client_id).replace(RECORDED_GROUP, group)
    body = body.replace(RECORDED_PRODUCER_GROUP, producer_group)
    assert body.endswith("\n") and '"consumeType":1' in body
    return cpp_request(RequestCode.HEART_BEAT, {}, body.encode())


def cpp_unregister(
    client_id: str, *, consumer_group: str = "", producer_group: str = ""
) -> RemotingCommand:
    """UNREGISTER_CLIENT as C++ sends it: one group per request, the other one ``""``."""
    ext = {"clientID": client_id, "consumerGroup": consumer_group, "producerGroup": producer_group}
    return cpp_request(RequestCode.UNREGISTER_CLIENT, ext)


def consumer_list(group: str) -> RemotingCommand:
    return cpp_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})


class Inbox:
    """Collects the requests a broker sends to a client connection."""

    def __init__(self) -> None:
        self.requests: asyncio.Queue[RemotingCommand] = asyncio.Queue()

    async def handler(self, _conn: Connection, cmd: RemotingCommand) -> None:
        self.requests.put_nowait(cmd)

    async def next(self, timeout_s: float = 10) -> RemotingCommand:
        return await asyncio.wait_for(self.requests.get(), timeout_s)


async def connect(cluster: Cluster, inbox: Inbox | None = None) -> Connection:
    handler = inbox.handler if inbox is not None else None
    return await open_connection("127.0.0.1", cluster.broker.port, handler=handler)


async def member_ids(conn: Connection, group: str) -> list[str]:
    resp = await conn.request(consumer_list(group), 5)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return list(ConsumerListBody.from_json(resp.body).consumer_id_list)


async def test_cpp_heartbeat_registers_groups_and_creates_the_retry_topic(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, await connect(cluster) as conn:
        ctx = cluster.broker.ctx
        assert ctx.topics.find("%RETRY%G1") is None
        # Created before the heartbeat: the task starts waiting at the request's first
        # suspension, before the broker can have read the heartbeat off the socket.
        registered = asyncio.create_task(cluster.broker.next_registration())
        resp = await conn.request(cpp_heartbeat("1234-127.0.0.1@DEFAULT", "G1", "P1"), 5)
        assert resp.code == ResponseCode.SUCCESS and resp.body == b""
        assert resp.version == 401  # Java clients refuse SQL92 below V4_1_0

        # The list holds the client id exactly as the heartbeat spelled it (C++ needs it).
        assert await member_ids(conn, "G1") == ["1234-127.0.0.1@DEFAULT"]
        retry = ctx.topics.find("%RETRY%G1")
        assert retry is not None and retry.read_queue_nums == 1 and retry.perm == 6
        assert ctx.groups.find("G1", create=False) is not None
        assert [c.client_id for c in ctx.clients.producer_channels("P1")] == [
            "1234-127.0.0.1@DEFAULT"
        ]
        sub = ctx.clients.subscription("G1", "TestTopic")
        assert sub is not None and sub.tags_set == ("TagA", "TagB")
        assert 0 not in sub.code_set  # C++'s atoi codes were replaced by real tag hashes

        # The new retry topic reaches the name server at once, so consumers get a route.
        await asyncio.wait_for(registered, 10)
        async with await open_connection("127.0.0.1", cluster.namesrv.port) as ns:
            cmd = RemotingCommand(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "%RETRY%G1"}
            )
            route = await ns.request(cmd, 5)
            assert route.code == ResponseCode.SUCCESS, route.remark
            assert [
                q.read_queue_nums for q in TopicRouteData.from_json(route.body).queue_datas
            ] == [1]


async def test_membership_changes_notify_the_group(tmp_path: Path) -> None:
    first_inbox = Inbox()
    async with (
        running_cluster(tmp_path) as cluster,
        await connect(cluster, first_inbox) as first,
    ):
        assert (await first.request(cpp_heartbeat("1-127.0.0.1@A", "G"), 5)).code == 0
        joined_self = await first_inbox.next()  # RocketMQ tells the joiner too
        assert joined_self.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
        assert joined_self.ext_fields["consumerGroup"] == "G"

        second = await connect(cluster)
        assert (await second.request(cpp_heartbeat("2-127.0.0.1@B", "G"), 5)).code == 0
        notify = await first_inbox.next()
        assert notify.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
        assert notify.is_oneway and notify.ext_fields["consumerGroup"] == "G"
        assert await member_ids(first, "G") == ["1-127.0.0.1@A", "2-127.0.0.1@B"]

        # A repeated heartbeat is no membership change: nothing is sent for it.
        assert (await second.request(cpp_heartbeat("2-127.0.0.1@B", "G"), 5)).code == 0
        # Closing a connection takes its client out of the group, and the rest are told.
        await second.close()
        left = await first_inbox.next()
        assert left.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
        assert await member_ids(first, "G") == ["1-127.0.0.1@A"]
        assert first_inbox.requests.empty()


async def test_unregister_removes_each_group(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, await connect(cluster) as conn:
        ctx = cluster.broker.ctx
        assert (await conn.request(cpp_heartbeat("9-127.0.0.1@X", "G", "P"), 5)).code == 0
        assert ctx.clients.producer_channels("P")

        resp = await conn.request(cpp_unregister("9-127.0.0.1@X", producer_group="P"), 5)
        assert resp.code == ResponseCode.SUCCESS
        assert ctx.clients.producer_channels("P") == []
        assert await member_ids(conn, "G") == ["9-127.0.0.1@X"]  # consumer side untouched

        resp = await conn.request(cpp_unregister("9-127.0.0.1@X", consumer_group="G"), 5)
        assert resp.code == ResponseCode.SUCCESS
        empty = await conn.request(consumer_list("G"), 5)
        assert empty.code == ResponseCode.SYSTEM_ERROR
        assert empty.remark == "no consumer for this group, G"
        # Unregistering what is not registered is harmless (C++ does it at shutdown).
        again = await conn.request(cpp_unregister("9-127.0.0.1@X", consumer_group="G"), 5)
        assert again.code == ResponseCode.SUCCESS


async def test_java_heartbeat_and_client_config_check(tmp_path: Path) -> None:
    java_body = {
        "clientID": "127.0.0.1@4242#1",
        "consumerDataSet": [
            {
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "consumeType": "CONSUME_PASSIVELY",
                "groupName": "JG",
                "messageModel": "CLUSTERING",
                "subscriptionDataSet": [
                    {
                        "classFilterMode": False,
                        "codeSet": [],
                        "expressionType": "TAG",
                        "subString": "*",
                        "subVersion": 1700000000000,
                        "tagsSet": [],
                        "topic": "JT",
                    }
                ],
                "unitMode": False,
            }
        ],
        "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}],
    }

    def check(expression_type: str, expression: str) -> RemotingCommand:
        sub = {"expressionType": expression_type, "subString": expression, "topic": "JT"}
        body = {"clientId": "127.0.0.1@4242#1", "group": "JG", "subscriptionData": sub}
        return RemotingCommand(RequestCode.CHECK_CLIENT_CONFIG, body=json.dumps(body).encode())

    async with running_cluster(tmp_path) as cluster, await connect(cluster) as conn:
        heartbeat = RemotingCommand(RequestCode.HEART_BEAT, body=json.dumps(java_body).encode())
        assert (await conn.request(heartbeat, 5)).code == ResponseCode.SUCCESS
        assert await member_ids(conn, "JG") == ["127.0.0.1@4242#1"]
        assert cluster.broker.ctx.topics.find("%RETRY%JG") is not None

        assert (await conn.request(check("TAG", "a || b"), 5)).code == ResponseCode.SUCCESS
        # enablePropertyFilter is off by default, as in RocketMQ: its answer.
        sql = await conn.request(check("SQL92", "a > 1"), 5)
        assert sql.code == ResponseCode.SYSTEM_ERROR
        assert sql.remark == "The broker does not support consumer to filter message by SQL92"
        broken = RemotingCommand(RequestCode.CHECK_CLIENT_CONFIG, body=b"{nope")
        assert (await conn.request(broken, 5)).code == ResponseCode.SYSTEM_ERROR


async def test_heartbeat_without_group_auto_creation_skips_the_retry_topic(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, auto_create_subscription_group=False) as cluster,
        await connect(cluster) as conn,
    ):
        assert (await conn.request(cpp_heartbeat(group="Unknown"), 5)).code == 0
        # Still registered (Java registers the channel) but no group, so no retry topic.
        assert await member_ids(conn, "Unknown") == [RECORDED_CLIENT_ID]
        assert cluster.broker.ctx.topics.find("%RETRY%Unknown") is None
