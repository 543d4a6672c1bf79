"""Hostile and broken input against a running broker.

Every case gets the documented answer (docs/protocol.md: an error code and
a remark on a request that could be framed) or a closed connection (a frame that cannot
be delimited or whose header does not parse, as Java's ``NettyDecoder`` closes the
channel). Meanwhile another client keeps being served, and afterwards every message
stored before is read back intact.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.frame import FrameDecoder, encode_command
from rocklet.protocol.message import iter_messages
from rocklet.protocol.message_id import parse_offset_msg_id
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.broker.test_client_manage import cpp_heartbeat, recorded_request
from tests.broker.test_send_pull import cpp_send, pull
from tests.cluster import Cluster, running_cluster
from tests.protocol.helpers import raw_frame

MiB = 1024 * 1024
MAX_MESSAGE = 64 * 1024
KEEP = "Keep"


@asynccontextmanager
async def raw_socket(
    cluster: Cluster,
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", cluster.broker.port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def assert_closed_by_broker(reader: asyncio.StreamReader) -> None:
    try:
        data = await asyncio.wait_for(reader.read(), 10)  # until EOF
    except ConnectionResetError:
        return  # the broker aborts the socket: a reset is a close too
    assert data == b"", data[:80]


async def read_frame(reader: asyncio.StreamReader) -> tuple[dict[str, Any], RemotingCommand]:
    """One response frame: its raw JSON header and the decoded command."""
    head = await asyncio.wait_for(reader.readexactly(8), 10)
    total = int.from_bytes(head[:4], "big")
    rest = await asyncio.wait_for(reader.readexactly(total - 4), 10)
    header_len = int.from_bytes(head[4:8], "big") & 0xFFFFFF
    decoder = FrameDecoder()
    decoder.feed(head + rest)
    cmd = decoder.next_command()
    assert cmd is not None and decoder.buffered == 0
    return json.loads(rest[:header_len]), cmd


async def store_witnesses(conn: Connection) -> dict[int, bytes]:
    """Store messages to check at the end: text, C++-compressed (sysFlag 1) and binary."""
    stored: dict[int, bytes] = {}
    compressed = zlib.compress(b"c" * 5000, 5)
    cases = [
        cpp_send(KEEP, b"first"),
        dataclasses.replace(
            cpp_send(KEEP, compressed),
            ext_fields={**cpp_send(KEEP, b"").ext_fields, "sysFlag": "1"},
        ),
        cpp_send(KEEP, bytes(range(256)) * 4),
    ]
    for cmd in cases:
        resp = await conn.request(cmd, 5)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        stored[parse_offset_msg_id(resp.ext_fields["msgId"]).offset] = cmd.body
    return stored


async def assert_intact(conn: Connection, stored: dict[int, bytes]) -> None:
    got = await conn.request(pull(KEEP, 0, 0), 5)
    assert got.code == ResponseCode.SUCCESS
    messages = list(iter_messages(got.body))
    assert {m.physical_offset: m.body for m in messages} == stored
    assert all(m.crc_ok() for m in messages)
    for offset, body in stored.items():
        viewed = await conn.request(
            RemotingCommand(RequestCode.VIEW_MESSAGE_BY_ID, ext_fields={"offset": str(offset)}), 5
        )
        assert [m.body for m in iter_messages(viewed.body)] == [body]


async def still_serving(conn: Connection) -> None:
    cmd = RemotingCommand(RequestCode.GET_MAX_OFFSET, ext_fields={"topic": KEEP, "queueId": "0"})
    resp = await conn.request(cmd, 5)
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "3"


def _length_word(total: int, header_len: int, serialize_type: int = 0) -> bytes:
    word = (serialize_type << 24) | header_len
    return total.to_bytes(4, "big", signed=True) + word.to_bytes(4, "big")


BROKEN_FRAMES = {
    "zero length": (0).to_bytes(4, "big"),
    "negative length": _length_word(-5, 0),
    "length past 16 MiB": _length_word(16 * MiB + 1, 20) + b"{" * 64,
    "header longer than frame": _length_word(10, 100) + b"{}",
    "header past 1 MiB": _length_word(2 * MiB, MiB + 1) + b"{" * 64,
    "unknown serialize type": _length_word(6, 2, serialize_type=7) + b"{}",
    "header not JSON": raw_frame(b"{nope"),
    "header not an object": raw_frame(b"[1, 2]"),
    "header without code": raw_frame(b'{"flag":0,"opaque":1}'),
    "code not a number": raw_frame(b'{"code":"ten","opaque":1}'),
    "extFields not an object": raw_frame(b'{"code":10,"extFields":[1],"opaque":1}'),
    "header not UTF-8": raw_frame(b"\xff\xfe\xfd"),
}


async def test_broken_frames_close_only_their_own_connection(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as witness,
    ):
        stored = await store_witnesses(witness)
        for name, data in BROKEN_FRAMES.items():
            async with raw_socket(cluster) as (reader, writer):
                writer.write(data)
                await writer.drain()
                await assert_closed_by_broker(reader)
            await still_serving(witness)
            assert witness.is_open, name
        await assert_intact(witness, stored)


def _missing(cmd: RemotingCommand, key: str) -> RemotingCommand:
    return dataclasses.replace(
        cmd, ext_fields={k: v for k, v in cmd.ext_fields.items() if k != key}
    )


def _with(cmd: RemotingCommand, **ext: str) -> RemotingCommand:
    return dataclasses.replace(cmd, ext_fields={**cmd.ext_fields, **ext})


def _req(code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code, ext_fields=ext or {}, body=body)


_OFFSETS = {"consumerGroup": "G", "topic": KEEP, "queueId": "0"}
_QUEUE = {"topic": KEEP, "queueId": "0"}
_QUERY = {"topic": KEEP, "key": "k", "maxNum": "1", "beginTimestamp": "0", "endTimestamp": "9"}
_SEND_BACK = {"group": "G", "offset": "0", "delayLevel": "0"}
_LOCK_MQ = {"brokerName": "broker-a", "queueId": 0, "topic": "T"}


def bad_requests() -> list[tuple[str, RemotingCommand, int, str]]:
    """(case, request, expected response code, text the remark must contain)."""
    SE, NULL, NAN = ResponseCode.SYSTEM_ERROR, "is null", "not a number"
    OUT, NEG = "is out of the range", "must not be negative"
    send = cpp_send(KEEP, b"x")
    pulled = pull(KEEP, 0, 0)
    heartbeat = cpp_heartbeat()
    lock = _req(RequestCode.LOCK_BATCH_MQ)
    return [
        (
            "unknown code",
            _req(9999),
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            "type 9999 not supported",
        ),
        # -- offsets and queue metadata -----------------------------------------------
        ("14 no queueId", _missing(_req(14, _OFFSETS), "queueId"), SE, "<queueId> " + NULL),
        ("14 queueId text", _req(14, {**_OFFSETS, "queueId": "zero"}), SE, NAN),
        ("15 no commitOffset", _req(15, _OFFSETS), SE, "<commitOffset> " + NULL),
        ("15 commitOffset float", _req(15, {**_OFFSETS, "commitOffset": "1.5"}), SE, NAN),
        ("29 no timestamp", _req(29, _QUEUE), SE, "<timestamp> " + NULL),
        ("29 timestamp text", _req(29, {**_QUEUE, "timestamp": "yesterday"}), SE, NAN),
        ("30 no topic", _req(30, {"queueId": "0"}), SE, "<topic> " + NULL),
        ("31 no queueId", _req(31, {"topic": KEEP}), SE, "<queueId> " + NULL),
        ("32 queueId list", _req(32, {**_QUEUE, "queueId": "[0]"}), SE, NAN),
        ("41 body not JSON", dataclasses.replace(lock, body=b"lock please"), SE, "JSON"),
        (
            "41 queue without id",
            _req(
                41,
                body=json.dumps(
                    {
                        "consumerGroup": "G",
                        "clientId": "c",
                        "mqSet": [{"topic": "T", "brokerName": "b"}],
                    }
                ).encode(),
            ),
            SE,
            "queueId",
        ),
        (
            "41 no client id",
            _req(41, body=json.dumps({"consumerGroup": "G", "mqSet": [_LOCK_MQ]}).encode()),
            SE,
            "clientId",
        ),
        ("42 empty body", _req(42), SE, "JSON"),
        # -- client management ----------------------------------------------------------
        ("34 empty body", dataclasses.replace(heartbeat, body=b""), SE, "JSON"),
        ("34 truncated body", dataclasses.replace(heartbeat, body=heartbeat.body[:40]), SE, "JSON"),
        ("34 no clientID", _req(34, body=b'{"consumerDataSet":[]}'), SE, "clientID"),
        (
            "34 unknown enum",
            dataclasses.replace(
                heartbeat, body=heartbeat.body.replace(b'"consumeType":1', b'"consumeType":9')
            ),
            SE,
            "consumeType",
        ),
        (
            "34 illegal group name",
            cpp_heartbeat(group="bad group!"),
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            "consumer group: the specified group['bad group!'] contains illegal characters",
        ),
        ("35 no clientID", _req(35, {"consumerGroup": "G"}), SE, "<clientID> " + NULL),
        ("38 no group", _req(38), SE, "<consumerGroup> " + NULL),
        (
            "46 subscription not an object",
            _req(46, body=b'{"subscriptionData":5}'),
            SE,
            "SubscriptionData",
        ),
        # -- send-back and queries --------------------------------------------------------
        ("36 no group", _missing(_req(36, _SEND_BACK), "group"), SE, "<group> " + NULL),
        (
            "36 group unusable as a topic",
            _req(36, {**_SEND_BACK, "group": "g" * 121}),
            SE,
            "longer",
        ),
        ("36 offset text", _req(36, {**_SEND_BACK, "offset": "abc"}), SE, NAN),
        ("12 no key", _missing(_req(12, _QUERY), "key"), SE, "<key> " + NULL),
        ("12 maxNum text", _req(12, {**_QUERY, "maxNum": "lots"}), SE, NAN),
        (
            "12 unique flag not bool",
            _req(12, {**_QUERY, "_UNIQUE_KEY_QUERY": "maybe"}),
            SE,
            "boolean",
        ),
        ("33 no offset", _req(33), SE, "<offset> " + NULL),
        ("33 hex offset", _req(33, {"offset": "0x10"}), SE, NAN),
        # -- send and pull --------------------------------------------------------------------
        ("10 no topic", _missing(send, "topic"), SE, "<topic> " + NULL),
        ("10 sysFlag text", _with(send, sysFlag="x"), SE, NAN),
        ("10 queueId text", _with(send, queueId="q"), SE, NAN),
        ("10 batch not bool", _with(send, batch="2"), SE, "boolean"),
        ("10 blank topic", _with(send, topic=""), SE, "blank"),
        ("10 illegal topic", _with(send, topic="bad topic!"), SE, "illegal"),
        ("10 topic too long", _with(send, topic="t" * 128), SE, "longer"),
        (
            "10 body too big",
            dataclasses.replace(send, body=b"x" * (MAX_MESSAGE + 1)),
            ResponseCode.MESSAGE_ILLEGAL,
            "max message size",
        ),
        (
            "10 broken batch",
            dataclasses.replace(_with(send, batch="1"), body=b"\x00\x00\x00\x50junk"),
            ResponseCode.MESSAGE_ILLEGAL,
            "batch",
        ),
        (
            "310 no topic",
            _req(310, {"a": "P", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}),
            SE,
            "null",
        ),
        ("11 no queueOffset", _missing(pulled, "queueOffset"), SE, "<queueOffset> " + NULL),
        ("11 maxMsgNums text", _with(pulled, maxMsgNums="n"), SE, NAN),
        ("11 queue out of range", _with(pulled, queueId="-1"), SE, "illegal"),
        # -- numbers out of their range (typed headers, then the processors) ------------
        ("10 queueId past int32", _with(send, queueId=str(2**31)), SE, OUT),
        ("10 flag past int32", _with(send, flag=str(2**31)), SE, OUT),
        ("10 unknown sysFlag bit", _with(send, sysFlag=str(0x800)), SE, OUT),
        ("10 negative bornTimestamp", _with(send, bornTimestamp="-1"), SE, NEG),
        ("10 negative reconsumeTimes", _with(send, reconsumeTimes="-1"), SE, NEG),
        ("10 huge number", _with(send, queueId="9" * 5000), SE, NAN),
        ("10 queue past the topic's", _with(send, queueId="4"), SE, "queueId[4] is illegal"),
        (
            "10 half message without TRAN_MSG",
            _with(send, sysFlag="4"),
            ResponseCode.MESSAGE_ILLEGAL,
            "no TRAN_MSG property",
        ),
        (
            "10 rolled back without TRAN_MSG",
            _with(send, sysFlag="12"),
            ResponseCode.MESSAGE_ILLEGAL,
            "no TRAN_MSG property",
        ),
        (
            "10 batch past maxMessageSize",
            dataclasses.replace(_with(send, batch="1"), body=b"\x00" * (MAX_MESSAGE + 1)),
            ResponseCode.MESSAGE_ILLEGAL,
            "the batch body is 65537 bytes",
        ),
        (
            "10 DELAY not a level",
            cpp_send(KEEP, b"x", props={"DELAY": "soon"}),
            ResponseCode.MESSAGE_ILLEGAL,
            "DELAY property must be a delay level",
        ),
        ("11 negative queueOffset", _with(pulled, queueOffset="-1"), SE, NEG),
        ("11 maxMsgNums 0", _with(pulled, maxMsgNums="0"), SE, "must be at least 1"),
        ("11 unknown sysFlag bit", _with(pulled, sysFlag="32"), SE, OUT),
        ("11 queue past the topic's", _with(pulled, queueId="4"), SE, "illegal"),
        ("14 negative queueId", _req(14, {**_OFFSETS, "queueId": "-1"}), SE, NEG),
        ("15 commitOffset -2", _req(15, {**_OFFSETS, "commitOffset": "-2"}), SE, OUT),
        (
            "15 queue past the topic's",
            _req(15, {**_OFFSETS, "queueId": "4", "commitOffset": "1"}),
            SE,
            "queueId[4] is illegal",
        ),
        ("30 queueId past int32", _req(30, {**_QUEUE, "queueId": str(2**31)}), SE, OUT),
        ("33 offset past int64", _req(33, {"offset": str(2**63)}), SE, OUT),
        ("36 negative offset", _req(36, {**_SEND_BACK, "offset": "-1"}), SE, NEG),
        (
            "37 negative commitLogOffset",
            _req(
                37,
                {
                    "producerGroup": "P",
                    "tranStateTableOffset": "0",
                    "commitLogOffset": "-1",
                    "commitOrRollback": "8",
                    "msgId": "m",
                },
            ),
            SE,
            NEG,
        ),
        (
            "17 queue count past 1024",
            _req(
                17,
                {
                    "topic": "Big",
                    "defaultTopic": "TBW102",
                    "readQueueNums": "8",
                    "writeQueueNums": str(2**31 - 1),
                    "perm": "6",
                },
            ),
            SE,
            "out of the range [0, 1024]",
        ),
        (
            "200 retryQueueNums past 1024",
            _req(200, body=json.dumps({"groupName": "Big", "retryQueueNums": 2**40}).encode()),
            SE,
            "retryQueueNums 1099511627776 is out of the range [0, 1024]",
        ),
        (
            "41 queue id past any topic's",
            _req(
                41,
                body=json.dumps(
                    {"consumerGroup": "G", "clientId": "c", "mqSet": [{**_LOCK_MQ, "queueId": -1}]}
                ).encode(),
            ),
            SE,
            "queueId[-1] is illegal",
        ),
    ]


async def test_bad_requests_get_error_answers_and_the_connection_stays(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, max_message_size=MAX_MESSAGE) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
    ):
        stored = await store_witnesses(conn)
        cases = bad_requests()
        answers = await asyncio.gather(*(conn.request(cmd, 10) for _, cmd, _, _ in cases))
        for (name, _cmd, code, remark), resp in zip(cases, answers, strict=True):
            assert resp.code == code, (name, resp.code, resp.remark)
            assert remark in (resp.remark or ""), (name, resp.remark)
        assert conn.is_open
        await assert_intact(conn, stored)
        # Nothing was created or registered by the refused requests.
        ctx = cluster.broker.ctx
        assert ctx.topics.find("bad topic!") is None
        assert not ctx.clients.consumer_groups()
        assert ctx.groups.find("bad group!", create=False) is None
        assert not [t for t in ctx.topics.all() if t.startswith(("%RETRY%", "%DLQ%"))]
        assert ctx.topics.find("Big") is None and ctx.groups.find("Big", create=False) is None
        assert ctx.offsets.offsets_of("G", KEEP) == {}


async def test_half_a_frame_stalls_only_its_sender(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as witness,
    ):
        stored = await store_witnesses(witness)
        frame = encode_command(dataclasses.replace(cpp_send(KEEP, b"stalled"), opaque=77))
        async with raw_socket(cluster) as (reader, writer):
            writer.write(frame[: len(frame) // 2])
            await writer.drain()
            # The broker serves others while this sender is stuck mid-frame.
            for i in range(3):
                resp = await witness.request(cpp_send("Other", f"o{i}".encode()), 5)
                assert resp.code == ResponseCode.SUCCESS
            await still_serving(witness)
            writer.write(frame[len(frame) // 2 :])
            await writer.drain()
            raw_header, answer = await read_frame(reader)
            assert answer.opaque == 77 and answer.code == ResponseCode.SUCCESS
            assert raw_header["flag"] == 1
            stored[parse_offset_msg_id(answer.ext_fields["msgId"]).offset] = b"stalled"
        await assert_intact(witness, stored)


async def test_recorded_cpp_frames_with_numeric_fields_get_string_answers(
    tmp_path: Path,
) -> None:
    """Replay the exact bytes C++ sent (JSON numbers, trailing newline) over a raw socket."""

    def recorded_frame(code: int, opaque: int, **ext: Any) -> bytes:
        event = recorded_request(code)
        fields = {k: v for k, (_kind, v) in event["extFields"].items()}
        fields.update(ext)
        header = {**event["header"], "opaque": opaque, "extFields": fields}
        text = json.dumps(header, sort_keys=True, separators=(",", ":")) + "\n"
        return raw_frame(text.encode())

    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as witness,
    ):
        await store_witnesses(witness)
        async with raw_socket(cluster) as (reader, writer):
            assert isinstance(
                recorded_request(RequestCode.QUERY_CONSUMER_OFFSET)["extFields"]["queueId"][1], int
            )
            writer.write(
                recorded_frame(RequestCode.QUERY_CONSUMER_OFFSET, 1, topic=KEEP, queueId=0)
            )
            writer.write(
                recorded_frame(
                    RequestCode.UPDATE_CONSUMER_OFFSET, 2, topic=KEEP, queueId=0, commitOffset="2"
                )
            )
            answers = {}
            for _ in range(2):
                raw_header, cmd = await read_frame(reader)
                answers[cmd.opaque] = raw_header
            # Asked only once the commit is answered: requests run concurrently.
            writer.write(
                recorded_frame(RequestCode.QUERY_CONSUMER_OFFSET, 3, topic=KEEP, queueId=0)
            )
            raw_header, cmd = await read_frame(reader)
            answers[cmd.opaque] = raw_header
            # Every answer value is a JSON string (C++ reads numbers as 0) in an object.
            assert answers[1]["extFields"] == {"offset": "0"} and answers[1]["code"] == 0
            assert answers[2]["code"] == 0 and answers[2]["extFields"] == {}
            assert answers[3]["extFields"] == {"offset": "2"}
            assert all(h["language"] == "JAVA" and h["version"] == 401 for h in answers.values())
