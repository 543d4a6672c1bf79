"""Group names are checked like topic names wherever the broker stores or creates a group.

Each request that would register, create, commit or lock under a group is sent with
names RocketMQ's rules reject (a trailing newline, 256 characters) to a real broker.
Each is refused with its family's code and a remark naming the rule, the connection
stays open, another client keeps being served meanwhile, and nothing of those groups is
left in the broker's tables afterwards. A name with a lone surrogate is text without a
UTF-8 form: every request carrying it, in a header or a body, is refused before any
processor looks at names (SYSTEM_ERROR, "not valid UTF-8 text").
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.subscription_group import SubscriptionGroupConfig
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.broker.test_client_manage import cpp_heartbeat, cpp_request
from tests.broker.test_send_pull import cpp_send, pull
from tests.cluster import Cluster, running_cluster

TOPIC = "Named"
GROUP_NOT_EXIST = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
SE = ResponseCode.SYSTEM_ERROR
ILLEGAL = "contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
#: name -> the part of the remark that names the broken rule.
BAD_NAMES = {
    "\ud800": "not valid UTF-8 text",  # a lone surrogate: no UTF-8 form at all
    "G\n": ILLEGAL,  # Java's matches() is a full match: the newline counts
    "g" * 256: "is longer than group max length 255",
}


def escaped(name: str) -> str:
    """The name as JSON text inside quotes (how a peer puts a lone surrogate on the wire)."""
    return json.dumps(name)[1:-1]


def lock_body(group: str) -> bytes:
    mqs = [{"brokerName": "broker-a", "queueId": 0, "topic": TOPIC}]
    return json.dumps({"clientId": "c1", "consumerGroup": group, "mqSet": mqs}).encode()


def requests_naming(group: str) -> list[tuple[str, RemotingCommand, int]]:
    """(what, request, expected code) for every request that stores or creates ``group``."""
    pulled = pull(TOPIC, 0, 0)
    offsets = {"consumerGroup": group, "topic": TOPIC, "queueId": "0", "commitOffset": "1"}
    config = json.dumps(SubscriptionGroupConfig(group).to_dict()).encode()
    return [
        (
            "heartbeat consumer",
            cpp_heartbeat(client_id="bad-c", group=escaped(group)),
            GROUP_NOT_EXIST,
        ),
        (
            "heartbeat producer",
            cpp_heartbeat(client_id="bad-p", group="OkGroup", producer_group=escaped(group)),
            SE,
        ),
        (
            "pull",
            RemotingCommand(
                RequestCode.PULL_MESSAGE,
                ext_fields={**pulled.ext_fields, "consumerGroup": group, "sysFlag": "5"},
            ),
            GROUP_NOT_EXIST,
        ),
        (
            "commit offset",
            cpp_request(RequestCode.UPDATE_CONSUMER_OFFSET, offsets),
            GROUP_NOT_EXIST,
        ),
        (
            "send back",
            cpp_request(
                RequestCode.CONSUMER_SEND_MSG_BACK,
                {"group": group, "offset": "0", "delayLevel": "0"},
            ),
            GROUP_NOT_EXIST,
        ),
        ("lock", cpp_request(RequestCode.LOCK_BATCH_MQ, {}, lock_body(group)), GROUP_NOT_EXIST),
        (
            "unlock",
            cpp_request(RequestCode.UNLOCK_BATCH_MQ, {}, lock_body(group)),
            GROUP_NOT_EXIST,
        ),
        (
            "admin create group",
            RemotingCommand(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=config),
            SE,
        ),
        (
            "admin reset offset",
            RemotingCommand(
                RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                ext_fields={"topic": TOPIC, "group": group, "timestamp": "0", "isForce": "true"},
            ),
            SE,
        ),
    ]


async def keep_serving(cluster: Cluster, stop: asyncio.Event) -> int:
    """Another client sending and pulling under a valid group until told to stop."""
    served = 0
    async with await open_connection("127.0.0.1", cluster.broker.port) as conn:
        while not stop.is_set() or served == 0:
            sent = await conn.request(cpp_send(TOPIC, b"meanwhile", queue_id=1), 5)
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            got = await conn.request(pull(TOPIC, 1, served), 5)
            assert got.code == ResponseCode.SUCCESS, got.remark
            served += 1
    return served


@pytest.mark.parametrize("name", list(BAD_NAMES), ids=["lone-surrogate", "newline", "256"])
async def test_bad_group_names_are_refused_everywhere(tmp_path: Path, name: str) -> None:
    async with running_cluster(tmp_path) as cluster:
        conn: Connection
        async with await open_connection("127.0.0.1", cluster.broker.port) as conn:
            assert (await conn.request(cpp_send(TOPIC, b"first"), 5)).code == 0
            stop = asyncio.Event()
            other = asyncio.create_task(keep_serving(cluster, stop))
            cases = requests_naming(name)
            answers = await asyncio.gather(*(conn.request(cmd, 5) for _, cmd, _ in cases))
            stop.set()
            assert await other > 0
            no_utf8 = name == "\ud800"
            for (what, _cmd, code), answer in zip(cases, answers, strict=True):
                assert answer.code == (SE if no_utf8 else code), (what, answer.code, answer.remark)
                assert BAD_NAMES[name] in (answer.remark or ""), (what, answer.remark)
                shown = ascii(name)[1:-1] if no_utf8 else repr(name)
                assert shown in (answer.remark or "") or len(name) > 255, answer.remark
            assert conn.is_open
            check = await conn.request(cpp_send(TOPIC, b"after"), 5)
            assert check.code == ResponseCode.SUCCESS
        ctx = cluster.broker.ctx
        assert ctx.groups.find(name, create=False) is None
        assert ctx.clients.consumer_group(name) is None
        assert not ctx.clients.producer_channels(name)
        assert ctx.offsets.topics_of(name) == []
        assert ctx.locks.holder(name, MessageQueue(TOPIC, "broker-a", 0)) is None
        assert not [t for t in ctx.topics.all() if name in t]
        # The refused heartbeats registered nothing, not even their valid groups.
        assert ctx.clients.consumer_group("OkGroup") is None


async def test_the_longest_valid_name_is_accepted(tmp_path: Path) -> None:
    longest = "g" * 255
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
    ):
        assert (await conn.request(cpp_heartbeat(group=longest), 5)).code == 0
        offsets = {"consumerGroup": longest, "topic": TOPIC, "queueId": "0", "commitOffset": "3"}
        answer = await conn.request(cpp_request(RequestCode.UPDATE_CONSUMER_OFFSET, offsets), 5)
        assert answer.code == ResponseCode.SUCCESS
        assert cluster.broker.ctx.offsets.query(longest, TOPIC, 0) == 3
