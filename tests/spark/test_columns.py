"""RecordColumns: rows built in bulk from raw records equal the SDK decode + RowBuffer."""

from __future__ import annotations

import asyncio
import zlib

import pyarrow as pa
import pytest

from rocklet.client.message import MessageExt
from rocklet.client.pull_consumer import PullConsumer
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.message import SysFlag, encode_message, java_string_hash, pack_host
from rocklet.spark import columns
from rocklet.spark.columns import RecordColumns
from rocklet.spark.ranges import QueueRange, read_range
from rocklet.spark.schema import RowBuffer, arrow_schema
from rocklet.store.results import MessageToStore, PutMessageStatus
from tests.spark.support import BrokerThread

HOST = pack_host("10.1.2.3", 10911)
BORN = pack_host("192.168.0.7", 50123)

#: Records as a broker stores them, with what the bulk path must get exactly right.
RECORDS: list[dict[str, object]] = [
    # The usual: UNIQ_KEY, TAGS, KEYS and user properties.
    {"properties": {"UNIQ_KEY": "AC11000100002A9F", "TAGS": "TagA", "KEYS": "k1 k2", "a": "1"}},
    # Unicode everywhere; no UNIQ_KEY: msgId is the offset msgId.
    {"topic": "Topic-ü", "properties": {"名前": "値 ✓", "emoji": "😀", "TAGS": "タグ"}},
    # Compressed body (the producer's zlib, sysFlag bit 0), inflated in the column.
    {"body": zlib.compress(b"squeeze " * 900), "sys_flag": int(SysFlag.COMPRESSED)},
    {"body": zlib.compress(b"typed"), "sys_flag": int(SysFlag.COMPRESSED) | 0x300},
    # No properties at all; empty body.
    {"body": b"", "properties": b""},
    # Items every reader skips (empty value, empty name, no separator), a value with
    # 0x01 in it, and the C++ client's trailing 0x02.
    {"properties": b"a\x01\x02\x01b\x02c\x02d\x01e\x01f\x02UNIQ_KEY\x01U2\x02"},
    # Large fields, a negative flag, reconsume times, odd timestamps.
    {"flag": -7, "reconsume_times": 3, "born_timestamp": 1, "store_timestamp": 2**41},
]


def _record(i: int, spec: dict[str, object]) -> bytes:
    fields: dict[str, object] = {
        "topic": "Cols",
        "body": f"body-{i}".encode() * (i + 1),
        "queue_id": 2,
        "queue_offset": 100 + i,
        "physical_offset": 4096 * i + 17,
        "born_timestamp": 1_700_000_000_000 + i,
        "store_timestamp": 1_700_000_000_500 + i,
        "born_host": BORN,
        "store_host": HOST,
        "properties": {"UNIQ_KEY": f"U{i:05d}"},
    }
    fields.update(spec)
    return bytes(encode_message(**fields))  # type: ignore[arg-type]


def _body(specs: list[dict[str, object]]) -> bytes:
    return b"".join(_record(i, spec) for i, spec in enumerate(specs))


def _both(
    bodies: list[tuple[bytes, int, int]], tags: frozenset[str] | None = None
) -> tuple[pa.RecordBatch, pa.RecordBatch]:
    built = []
    for columnar in (True, False):
        rows = RecordColumns("broker-a", tags, columnar=columnar)
        for body, low, high in bodies:
            rows.add(body, low, high)
        built.append(rows.flush())
    return built[0], built[1]


def _assert_same(bulk: pa.RecordBatch, reference: pa.RecordBatch) -> None:
    assert bulk.schema == arrow_schema()
    assert bulk.to_pylist() == reference.to_pylist()
    assert bulk.equals(reference)


def test_bulk_columns_equal_the_reference_rows() -> None:
    data = _body(RECORDS)
    assert columns._columns(data, _starts(data), "broker-a") is not None  # no fallback here
    bulk, reference = _both([(data, 0, 1 << 62)])
    _assert_same(bulk, reference)
    rows = bulk.to_pylist()
    assert rows[1]["msgId"] == (HOST + (4096 + 17).to_bytes(8, "big")).hex().upper()
    assert rows[1]["properties"] == [("名前", "値 ✓"), ("emoji", "😀")]
    assert rows[2]["body"] == b"squeeze " * 900
    assert rows[4]["properties"] == [] and rows[4]["body"] == b""
    assert rows[5]["properties"] == [("d", "e\x01f")] and rows[5]["msgId"] == "U2"


def test_windows_and_several_bodies_keep_offset_order() -> None:
    first, second = _body(RECORDS[:4]), _body(RECORDS[4:])
    # Offsets 100..103 then 100..102: keep [101, 103) of the first, [100, 102) of the second.
    bulk, reference = _both([(first, 101, 103), (second, 100, 102)])
    _assert_same(bulk, reference)
    assert bulk.column("queueOffset").to_pylist() == [101, 102, 100, 101]


def test_tag_filter_rechecks_the_tag_string() -> None:
    # "Aa" and "BB" share a Java hash, so a broker's tag filter lets both through.
    assert java_string_hash("Aa") == java_string_hash("BB")
    specs: list[dict[str, object]] = [
        {"properties": {"TAGS": tag}} for tag in ("Aa", "BB", "Aa", "")
    ]
    bulk, reference = _both([(_body(specs), 0, 1 << 62)], frozenset({"Aa"}))
    _assert_same(bulk, reference)
    assert bulk.column("queueOffset").to_pylist() == [100, 102]


def _unusual() -> list[bytes]:
    return [
        # A repeated name: the last value wins (a dict's rule).
        _body([RECORDS[0], {"properties": b"UNIQ_KEY\x01U\x02x\x011\x02x\x012"}]),
        # Properties that are not UTF-8: decoded with replacement.
        _body([RECORDS[0], {"properties": b"UNIQ_KEY\x01U\x02bad\x01\xff\xfe"}]),
        # A topic that is not UTF-8 (same length, so the record still adds up).
        _body([{}, RECORDS[0]]).replace(b"Cols", b"C\xffls", 1),
    ]


@pytest.mark.parametrize("case", range(3))
def test_unusual_records_take_the_reference_path(case: int) -> None:
    data = _unusual()[case]
    assert columns._columns(data, _starts(data), None) is None
    bulk, reference = _both([(data, 0, 1 << 62)])
    _assert_same(bulk, reference)


def test_without_numpy_the_reference_path_gives_the_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _body(RECORDS)
    expected = _both([(data, 0, 1 << 62)])[1]
    monkeypatch.setattr(columns, "np", None)
    rows = RecordColumns("broker-a")
    rows.add(data, 0, 1 << 62)
    _assert_same(rows.flush(), expected)


def test_malformed_records_raise() -> None:
    data = _body(RECORDS[:2])
    with pytest.raises(MessageFormatError):
        RecordColumns("b").add(data[:-5], 0, 1 << 62)
    bad = bytearray(data)
    bad[84:88] = (10**6).to_bytes(4, "big")  # a body length past the record
    rows = RecordColumns("b")
    rows.add(bytes(bad), 0, 1 << 62)
    with pytest.raises(MessageFormatError):
        rows.flush()
    bad_zip = _body([{"body": b"not zlib", "sys_flag": int(SysFlag.COMPRESSED)}])
    for columnar in (True, False):
        rows = RecordColumns("b", columnar=columnar)
        rows.add(bad_zip, 0, 1 << 62)
        with pytest.raises(MessageFormatError, match="does not inflate"):
            rows.flush()


def _starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        pos += int.from_bytes(data[pos : pos + 4], "big")
    return starts


# -- real pulls ---------------------------------------------------------------------------------

STORED = [
    ({"UNIQ_KEY": "K0", "TAGS": "Aa", "KEYS": "order-1", "x": "y"}, b"plain", 0),
    ({"TAGS": "BB", "città": "Zürich ✓"}, b"no uniq key, unicode", 0),
    ({"UNIQ_KEY": "K2", "TAGS": "Aa"}, zlib.compress(b"z" * 6000), int(SysFlag.COMPRESSED)),
    ({"UNIQ_KEY": "K3"}, b"untagged", 0),
]


def _put(broker: BrokerThread, topic: str) -> None:
    broker.set_queues(topic, 1)

    async def put() -> None:
        for props, body, sys_flag in STORED * 3:
            msg = MessageToStore(
                topic, 0, body, dict(props), sys_flag=sys_flag, born_host=BORN, store_host=HOST
            )
            assert broker.broker.ctx.store.put_message(msg).status is PutMessageStatus.PUT_OK

    broker.call(put())


def _sdk_rows(namesrv: str, mq: MessageQueue, end: int, expression: str) -> pa.RecordBatch:
    async def main() -> list[MessageExt]:
        out: list[MessageExt] = []
        async with PullConsumer("cols-reference", namesrv) as consumer:
            for _ in range(200):  # the consume queue is written just after the put
                if await consumer.max_offset(mq) >= end:
                    break
                await asyncio.sleep(0.05)
            offset = 0
            while offset < end:
                result = await consumer.pull(mq, offset, 5, expression=expression)
                out.extend(m for m in result.messages if m.queue_offset < end)
                assert result.next_begin_offset > offset, result.status
                offset = result.next_begin_offset
        return out

    rows = RowBuffer()
    for msg in asyncio.run(main()):
        rows.add(msg)
    return rows.flush()


@pytest.mark.parametrize("expression", ["*", "Aa"])
def test_read_range_equals_sdk_pulls(broker: BrokerThread, expression: str) -> None:
    topic = "ColsReal"
    _put(broker, topic)
    mq = MessageQueue(topic, broker.broker.ctx.identity.broker_name, 0)
    end = len(STORED) * 3
    reference = _sdk_rows(broker.namesrv, mq, end, expression)
    part = QueueRange(broker.namesrv, mq, 0, end, sub_expression=expression, pull_batch_size=5)
    batches = list(read_range(part))
    bulk = pa.Table.from_batches(batches, arrow_schema()).combine_chunks().to_batches()[0]
    _assert_same(bulk, reference)
    rows = bulk.to_pylist()
    if expression == "Aa":  # BB shares Aa's tag hash: dropped here, not by the broker
        assert [r["tags"] for r in rows] == ["Aa"] * 6
    else:
        assert rows[2]["body"] == b"z" * 6000 and rows[1]["msgId"] != "K1"
        assert rows[1]["properties"] == [("città", "Zürich ✓")]
