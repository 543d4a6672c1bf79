"""QUERY_MESSAGE and VIEW_MESSAGE_BY_ID against a real broker, with Java's request shapes
(the C++ client never sends them: docs/protocol.md)."""

from __future__ import annotations

from pathlib import Path

from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import encode_message, iter_messages
from rocklet.protocol.message_id import parse_offset_msg_id
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.broker.test_send_pull import cpp_send, pull
from tests.cluster import Cluster, running_cluster

FOREVER = 2**62
#: Where a stored record's body starts (after the fixed fields and the body length).
BODY_AT = bytes(encode_message(topic="X", body=b"\xab" * 9)).find(b"\xab" * 9)


def smuggled_record() -> bytes:
    """A message body that is itself a well-formed stored record (claiming offset 0)."""
    return bytes(encode_message(topic="VT", body=b"inner", properties={"KEYS": "k"}))


async def connect(cluster: Cluster) -> Connection:
    return await open_connection("127.0.0.1", cluster.broker.port)


def query(
    topic: str,
    key: str,
    *,
    max_num: int = 32,
    begin: int = 0,
    end: int = FOREVER,
    unique: bool | None = None,
) -> RemotingCommand:
    ext = {
        "topic": topic,
        "key": key,
        "maxNum": str(max_num),
        "beginTimestamp": str(begin),
        "endTimestamp": str(end),
    }
    if unique is not None:
        ext["_UNIQUE_KEY_QUERY"] = "true" if unique else "false"
    return RemotingCommand(RequestCode.QUERY_MESSAGE, ext_fields=ext, version=401)


def view(offset: int) -> RemotingCommand:
    return RemotingCommand(RequestCode.VIEW_MESSAGE_BY_ID, ext_fields={"offset": str(offset)})


async def store(conn: Connection, topic: str, body: bytes, keys: str, uniq: str) -> int:
    resp = await conn.request(cpp_send(topic, body, props={"KEYS": keys, "UNIQ_KEY": uniq}), 5)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return parse_offset_msg_id(resp.ext_fields["msgId"]).offset


async def bodies(conn: Connection, cmd: RemotingCommand) -> list[bytes]:
    resp = await conn.request(cmd, 5)
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return sorted(m.body for m in iter_messages(resp.body))


async def test_query_by_key_unique_key_and_time_range(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path, default_query_max_num=2) as cluster,
        await connect(cluster) as conn,
    ):
        await store(conn, "QT", b"a", "order-1 shared", "U-A")
        await store(conn, "QT", b"b", "shared", "U-B")
        await store(conn, "Other", b"c", "shared", "U-C")
        # A producer retry stores the same UNIQ_KEY again: three copies of U-D.
        for body in (b"d1", b"d2", b"d3"):
            last = await store(conn, "QT", body, "dup", "U-D")

        assert await bodies(conn, query("QT", "shared")) == [b"a", b"b"]  # not Other's
        assert await bodies(conn, query("QT", "order-1")) == [b"a"]
        assert len(await bodies(conn, query("QT", "shared", max_num=1))) == 1
        assert await bodies(conn, query("QT", "U-B")) == [b"b"]  # UNIQ_KEY is indexed too

        # A unique-key query answers up to defaultQueryMaxNum (2), whatever maxNum says.
        assert len(await bodies(conn, query("QT", "U-D", max_num=0, unique=True))) == 2
        assert len(await bodies(conn, query("QT", "U-D", max_num=32, unique=False))) == 3

        got = await conn.request(pull("QT", 0, 0), 5)
        stored = {m.body: m for m in iter_messages(got.body)}
        t_a, t_d3 = stored[b"a"].store_timestamp, stored[b"d3"].store_timestamp
        assert await bodies(conn, query("QT", "order-1", begin=t_a, end=t_a)) == [b"a"]

        resp = await conn.request(query("QT", "dup"), 5)
        assert resp.ext_fields["indexLastUpdatePhyoffset"] == str(last)
        assert resp.ext_fields["indexLastUpdateTimestamp"] == str(t_d3)

        for miss in (
            query("QT", "nope"),
            query("QT", "order-1", begin=t_a + 1001),
            query("QT", "order-1", end=t_a - 1001),
            query("QT", "shared", max_num=0),
            query("NoTopic", "shared"),
        ):
            resp = await conn.request(miss, 5)
            assert resp.code == ResponseCode.QUERY_NOT_FOUND, miss.ext_fields
            assert resp.body == b"" and resp.remark
            assert resp.ext_fields["indexLastUpdatePhyoffset"] == str(last)


async def test_view_message_by_offset(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster, await connect(cluster) as conn:
        first = await store(conn, "VT", b"one", "k", "U-1")
        second = await store(conn, "VT", b"two", "k", "U-2")
        got = await conn.request(pull("VT", 0, 0), 5)
        pulled = list(iter_messages(got.body))

        for offset, expected in ((first, pulled[0]), (second, pulled[1])):
            resp = await conn.request(view(offset), 5)
            assert resp.code == ResponseCode.SUCCESS
            (msg,) = list(iter_messages(resp.body))
            assert msg == expected and msg.physical_offset == offset

        # A body that looks like a record is not a record at that offset.
        smuggler = await store(conn, "VT", smuggled_record(), "s", "U-3")
        for bad in (first + 1, second + 4, smuggler + BODY_AT, 1 << 40, -1):
            resp = await conn.request(view(bad), 5)
            assert resp.code == ResponseCode.SYSTEM_ERROR
            # A negative offset is refused by the typed header, naming the field.
            missing = f"can not find message by the offset, {bad}"
            negative = "the custom field <offset> must not be negative: -1"
            assert resp.remark == (missing if bad >= 0 else negative)
            assert resp.body == b""
