"""Topic names are checked wherever a broker or a name server accepts one.

Every request that names a topic (sends, pulls, queries, offsets, queue metadata, locks,
heartbeat subscriptions, admin topic and group requests; on the name server routes,
deletes, registrations and ordered-topic KV entries) is sent with names RocketMQ's rules
reject: a trailing newline (Java's ``matches()`` is a full match), 128 characters,
blank, and a space. Each is answered with its family's code (TOPIC_NOT_EXIST where the
family answers a missing topic with it, else ``TopicValidator``'s SYSTEM_ERROR) and a
remark naming the rule; text without a UTF-8 form (a lone surrogate) is refused before
names are looked at. Meanwhile another client keeps being served, and afterwards
nothing of those names is in any table.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rocklet.protocol.bodies.register import RegisterBrokerBody
from rocklet.protocol.bodies.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.dial import open_connection
from tests.broker.test_send_pull import cpp_send, pull
from tests.broker.wire_clients import consumer_heartbeat_body
from tests.cluster import Cluster, running_cluster

TOPIC = "Named"
SE = ResponseCode.SYSTEM_ERROR
NOT_EXIST = ResponseCode.TOPIC_NOT_EXIST
ILLEGAL = "contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
#: name -> the part of the remark that names the broken rule.
BAD_NAMES = {
    "T\n": ILLEGAL,
    "t" * 128: "is longer than topic max length 127",
    "": "is blank",
    "bad topic": ILLEGAL,
    "\ud800": "not valid UTF-8 text",
}
IDS = ["newline", "128", "blank", "space", "lone-surrogate"]


def req(code: int, ext: dict[str, str], body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code, ext_fields=ext, body=body)


def escaped(body: bytes, placeholder: str, name: str) -> bytes:
    """A JSON body with a placeholder replaced by a name as JSON text (escaped), the way
    a peer puts a lone surrogate on the wire."""
    return body.replace(placeholder.encode(), json.dumps(name)[1:-1].encode())


def heartbeat(topic: str) -> RemotingCommand:
    body = consumer_heartbeat_body("hb-client", "CG", "PlaceholderTopic")
    return req(RequestCode.HEART_BEAT, {}, escaped(body, "PlaceholderTopic", topic))


def lock_body(topic: str) -> bytes:
    mqs = [{"brokerName": "broker-a", "queueId": 0, "topic": topic}]
    return json.dumps({"clientId": "c1", "consumerGroup": "CG", "mqSet": mqs}).encode()


def broker_requests(t: str) -> list[tuple[str, RemotingCommand, int]]:
    """(what, request, expected code) for every broker request that names topic ``t``."""
    queue = {"topic": t, "queueId": "0"}
    send_v2 = {"a": "PG", "b": t, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}
    return [
        ("send", cpp_send(t, b"x"), SE),
        ("send v2", req(RequestCode.SEND_MESSAGE_V2, send_v2, b"x"), SE),
        ("send batch", req(RequestCode.SEND_BATCH_MESSAGE, send_v2, b""), SE),
        ("reply", req(RequestCode.SEND_REPLY_MESSAGE_V2, send_v2, b"x"), SE),
        ("pull", pull(t, 0, 0), NOT_EXIST),
        ("query", req(RequestCode.QUERY_MESSAGE, {**queue, "key": "k", "maxNum": "1",
                                                  "beginTimestamp": "0", "endTimestamp": "9"}), SE),
        ("query offset", req(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "CG", **queue}),
         SE),
        (
            "commit offset",
            req(RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": "CG", **queue, "commitOffset": "1"}),
            NOT_EXIST,
        ),
        ("search offset", req(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": "0"}),
         SE),
        ("max offset", req(RequestCode.GET_MAX_OFFSET, queue), SE),
        ("min offset", req(RequestCode.GET_MIN_OFFSET, queue), SE),
        ("earliest time", req(RequestCode.GET_EARLIEST_MSG_STORETIME, queue), SE),
        ("lock", req(RequestCode.LOCK_BATCH_MQ, {}, lock_body(t)), SE),
        ("unlock", req(RequestCode.UNLOCK_BATCH_MQ, {}, lock_body(t)), SE),
        ("heartbeat", heartbeat(t), SE),
        ("create topic", req(RequestCode.UPDATE_AND_CREATE_TOPIC,
                             {"topic": t, "defaultTopic": "TBW102", "readQueueNums": "4",
                              "writeQueueNums": "4", "perm": "6"}), SE),
        ("delete topic", req(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": t}), SE),
        ("topic stats", req(RequestCode.GET_TOPIC_STATS_INFO, {"topic": t}), NOT_EXIST),
        ("consumed by", req(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": t}), SE),
        # A blank topic there means "every topic of the group" (an optional field).
        ("consume stats", req(RequestCode.GET_CONSUME_STATS,
                              {"consumerGroup": "CG", "topic": t}), SE if t else 0),
        ("reset offset", req(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                             {"topic": t, "group": "CG", "timestamp": "0", "isForce": "true"}), SE),
    ]  # fmt: skip


def register(t: str) -> RemotingCommand:
    placeholder = "PlaceholderTopic"
    table = TopicConfigSerializeWrapper(
        {placeholder: TopicConfig(placeholder, 4, 4), "GoodTopic": TopicConfig("GoodTopic", 4, 4)},
        DataVersion(1, 1),
    )
    body = escaped(RegisterBrokerBody(table).to_json(), placeholder, t)
    ext = {
        "brokerName": "broker-x",
        "brokerAddr": "127.0.0.1:1",
        "clusterName": "Odd",
        "haServerAddr": "127.0.0.1:2",
        "brokerId": "0",
    }
    return req(RequestCode.REGISTER_BROKER, ext, body)


def namesrv_requests(t: str) -> list[tuple[str, RemotingCommand, int]]:
    kv = {"namespace": "ORDER_TOPIC_CONFIG", "key": t, "value": "broker-a:4"}
    return [
        ("route", req(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": t}), NOT_EXIST),
        ("delete in namesrv", req(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": t}), SE),
        ("order topic conf", req(RequestCode.PUT_KV_CONFIG, kv), SE),
    ]


async def keep_serving(cluster: Cluster, stop: asyncio.Event) -> int:
    """Another client sending, pulling and asking routes until told to stop."""
    served = 0
    async with (
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
        await open_connection("127.0.0.1", cluster.namesrv.port) as ns,
    ):
        while not stop.is_set() or served == 0:
            sent = await conn.request(cpp_send(TOPIC, b"meanwhile", queue_id=1), 5)
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            got = await conn.request(pull(TOPIC, 1, served), 5)
            assert got.code == ResponseCode.SUCCESS, got.remark
            route = await ns.request(req(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), 5)
            assert route.code == ResponseCode.SUCCESS, route.remark
            served += 1
    return served


@pytest.mark.parametrize("name", list(BAD_NAMES), ids=IDS)
async def test_bad_topic_names_are_refused_everywhere(tmp_path: Path, name: str) -> None:
    no_utf8 = name == "\ud800"
    async with running_cluster(tmp_path) as cluster:
        async with (
            await open_connection("127.0.0.1", cluster.broker.port) as conn,
            await open_connection("127.0.0.1", cluster.namesrv.port) as ns,
        ):
            assert (await conn.request(cpp_send(TOPIC, b"first"), 5)).code == 0
            await cluster.broker.ctx.registration.wait_for(
                cluster.broker.ctx.topics.data_version.counter, 5
            )
            stop = asyncio.Event()
            other = asyncio.create_task(keep_serving(cluster, stop))
            cases = [(w, conn, c, code) for w, c, code in broker_requests(name)]
            cases += [(w, ns, c, code) for w, c, code in namesrv_requests(name)]
            answers = await asyncio.gather(*(on.request(cmd, 5) for _, on, cmd, _ in cases))
            registered = await ns.request(register(name), 5)
            stop.set()
            assert await other > 0
            for (what, _on, _cmd, code), answer in zip(cases, answers, strict=True):
                assert answer.code == (SE if no_utf8 else code), (what, answer.code, answer.remark)
                if code != ResponseCode.SUCCESS:
                    assert BAD_NAMES[name] in (answer.remark or ""), (what, answer.remark)
            assert conn.is_open and ns.is_open
            # A registration keeps the broker and its valid topics, and names the rest.
            if no_utf8:
                assert registered.code == SE, registered.remark
            else:
                assert registered.code == ResponseCode.SUCCESS, registered.remark
                assert "1 topic(s) not routed" in (registered.remark or "")
                assert BAD_NAMES[name] in (registered.remark or "")
                good = await ns.request(
                    req(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "GoodTopic"}), 5
                )
                assert good.code == ResponseCode.SUCCESS
        ctx = cluster.broker.ctx
        assert ctx.topics.find(name) is None
        assert ctx.offsets.groups_of(name) == []
        assert ctx.clients.consumer_group("CG") is None
        assert name not in cluster.namesrv.routes.all_topics()
        assert cluster.namesrv.kv.namespace("ORDER_TOPIC_CONFIG") is None
