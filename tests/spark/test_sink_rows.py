"""Sink rows to messages and batch bodies, without Spark or a broker (Arrow batches as
Spark hands them), and the sends in flight."""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
from types import SimpleNamespace
from typing import cast

import pyarrow as pa
import pytest

from rocklet.client.errors import InvalidMessageError
from rocklet.client.message import UniqKeyGenerator
from rocklet.client.producer import Producer
from rocklet.client.send_wire import EncodedBatch, encode_batch, reserve_uniq_keys
from rocklet.protocol.batch import decode_batch
from rocklet.protocol.errors import MessageFormatError
from rocklet.spark.in_flight import InFlight
from rocklet.spark.sink import (
    WRITE_ID_PROPERTY,
    RowError,
    _send_batches,
    batches_by_topic,
    rows_to_messages,
)
from rocklet.spark.sink_batches import PY_WHITESPACE, WriteIds, encode_rows
from rocklet.spark.sink_marker import WriteIdent

pytestmark = pytest.mark.spark

#: The producer's default largest message and batch body.
_MAX = 4 << 20
_INT_MAP = pa.map_(pa.string(), pa.int64())


def batch(**columns: list[object]) -> pa.RecordBatch:
    types = {
        "body": pa.binary(),
        "topic": pa.string(),
        "tags": pa.string(),
        "keys": pa.list_(pa.string()),
        "properties": pa.map_(pa.string(), pa.string()),
    }
    return pa.RecordBatch.from_arrays(
        [pa.array(v, type=types[k]) for k, v in columns.items()], names=list(columns)
    )


def test_rows_become_messages_with_reserved_properties_dropped() -> None:
    rows = batch(
        body=[b"a", b"b"],
        topic=["T1", "T2"],
        tags=["x", None],
        keys=[["k1", "k2"], None],
        properties=[[("n", "1"), ("KEYS", "no"), ("UNIQ_KEY", "no")], None],
    )
    ids = (f"q:0:3:{i}" for i in itertools.count())
    first, second = rows_to_messages(rows, None, ids)
    assert (first.topic, first.body, first.tags, first.key_list) == ("T1", b"a", "x", ("k1", "k2"))
    assert first.properties == {"n": "1", WRITE_ID_PROPERTY: "q:0:3:0"}
    assert (second.topic, second.tags, second.key_list) == ("T2", None, ())
    assert second.properties == {WRITE_ID_PROPERTY: "q:0:3:1"}
    override = rows_to_messages(rows, "Out", None)
    assert [m.topic for m in override] == ["Out", "Out"] and override[1].properties is None


def test_string_keys_split_on_spaces_and_bad_rows_are_refused() -> None:
    keys = pa.RecordBatch.from_arrays(
        [pa.array(["x"]), pa.array(["k1  k2"])], names=["body", "keys"]
    )
    assert rows_to_messages(keys, "T", None)[0].key_list == ("k1", "k2")
    with pytest.raises(RowError, match="empty body"):
        rows_to_messages(batch(body=[b""]), "T", None)
    with pytest.raises(RowError, match="no topic"):
        rows_to_messages(batch(body=[b"x"], topic=[None]), None, None)


def test_chunks_hold_one_topic_and_respect_the_caps() -> None:
    msgs = rows_to_messages(batch(body=[b"x"] * 600, topic=["A", "B"] * 300), None, None)
    chunks = list(batches_by_topic(msgs))
    assert [(c[0].topic, len(c)) for c in chunks] == [("A", 256), ("A", 44), ("B", 256), ("B", 44)]
    assert all(len({m.topic for m in c}) == 1 for c in chunks)
    big = rows_to_messages(batch(body=[b"y" * 400_000] * 6), "T", None)
    assert [len(c) for c in batches_by_topic(big)] == [2, 2, 2]  # 1 MiB per batch send


# -- the columnar bodies (rocklet.spark.sink_batches) ------------------------------------


def _uniq_keys() -> UniqKeyGenerator:
    """A generator that makes the same UNIQ_KEYs every time (same prefix and start)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "urandom", lambda n: b"\x5a" * n)
        return UniqKeyGenerator("10.1.2.3", now_ms=1_700_000_000_000)


class _Ids:
    """The producer's ``reserve_uniq_keys`` over a generator."""

    def __init__(self, ids: UniqKeyGenerator) -> None:
        self.ids = ids

    def reserve_uniq_keys(self, n: int) -> tuple[str, int]:
        return reserve_uniq_keys(self.ids, n)


def _both(
    rows: pa.RecordBatch, topic: str | None = None, write_ids: bool = False, max_size: int = _MAX
) -> tuple[list[EncodedBatch] | None, list[EncodedBatch]]:
    """The columnar batches and the per-row path's (messages encoded by the producer's
    encoder), from generators starting at the same UNIQ_KEY; and the same write ids."""
    ours, theirs = (WriteIds("q:7:3:") if write_ids else None for _ in range(2))
    columnar = encode_rows(rows, topic, ours, _Ids(_uniq_keys()), max_size)
    ids = _uniq_keys()
    per_row = []
    for chunk in batches_by_topic(rows_to_messages(rows, topic, theirs)):
        body, uniqs = encode_batch(chunk, ids, max_size)
        per_row.append(EncodedBatch(chunk[0].topic, body, ",".join(uniqs), len(chunk)))
    if columnar is not None and ours is not None and theirs is not None:
        assert ours.seq == theirs.seq == rows.num_rows
    return columnar, per_row


def _same(rows: pa.RecordBatch, topic: str | None = None, write_ids: bool = False) -> None:
    columnar, per_row = _both(rows, topic, write_ids)
    assert columnar is not None, "the columnar path handed the rows back"
    for ours, theirs in zip(columnar, per_row, strict=True):
        assert decode_batch(ours.body) == decode_batch(theirs.body)  # readable when not
        assert ours == theirs  # byte for byte, same keys


def _mixed(n: int) -> pa.RecordBatch:
    return batch(
        body=[b"b%d" % i for i in range(n)],
        topic=[("Out-B", "Out-A", "Out-C")[i % 3] for i in range(n)],
        tags=[(None, "t", "", "x y")[i % 4] for i in range(n)],
        keys=[(["k1", "k 2"], None, [], [None, "", "z"], ["q"])[i % 5] for i in range(n)],
        properties=[
            (
                [("n", str(i)), ("KEYS", "no"), ("UNIQ_KEY", "no"), ("e", ""), ("m", None)],
                None,
                [],
                [("é", "ü"), ("a", "b"), ("", "v")],
                [("rockletWriteIdX", "1")],
            )[i % 5]
            for i in range(n)
        ],
    )


@pytest.mark.parametrize("write_ids", [False, True])
def test_columnar_bodies_are_the_per_row_bodies(write_ids: bool) -> None:
    rows = _mixed(700)  # several topics, each over 256 rows: several batches each
    _same(rows, None, write_ids)
    _same(rows, "Out", write_ids)  # the option wins over the column
    _same(rows.slice(5, 600), None, write_ids)  # columns that do not start at 0
    _same(batch(body=[b"x"]), "T", write_ids)  # no other column
    nulls = pa.RecordBatch.from_pydict({"body": [b"x"], "tags": [None], "properties": [None]})
    _same(nulls, "T", write_ids)  # columns of Arrow's null type


def test_columnar_bodies_of_text_columns_and_big_bodies() -> None:
    keys = ["k1  k2", " a\tb\u3000c ", "plain", None, "", " ", "x\x85y\xa0z", "y z", "\x1c"]
    n = len(keys)
    large = pa.large_string()
    text = pa.RecordBatch.from_arrays(
        [
            pa.array(["body é"] * n, large),
            pa.array(["T"] * n, large),
            pa.array(keys, large),
            pa.array([[("é", "v")]] * n, pa.map_(large, large)),
        ],
        names=["body", "topic", "keys", "properties"],
    )
    _same(text, None, write_ids=True)
    lists = pa.array([["a", None], None, ["b c", "d"]], pa.large_list(large))
    _same(pa.RecordBatch.from_arrays([pa.array(["x"] * 3), lists], ["body", "keys"]), "T")
    _same(batch(body=[b"y" * 400_000] * 7), "T")  # 1 MiB of bodies per batch


def test_the_whitespace_keys_are_split_on_is_pythons() -> None:
    python = "".join(c for c in map(chr, range(0x110000)) if c.isspace())
    assert python == PY_WHITESPACE


@pytest.mark.parametrize(
    ("rows", "topic", "write_ids"),
    [
        (batch(body=[b"a"], properties=[[("n", "1"), ("n", "2")]]), "T", False),
        (batch(body=[b"a"], properties=[[(WRITE_ID_PROPERTY, "mine")]]), "T", True),
        (pa.RecordBatch.from_pydict({"body": [b"a"], "tags": [1]}), "T", False),
        (
            pa.RecordBatch.from_pydict(
                {"body": [b"a"], "properties": pa.array([[("n", 1)]], _INT_MAP)}
            ),
            "T",
            False,
        ),
        (batch(body=[b"a"], topic=["bad topic!"]), None, False),
        (batch(body=[b"a"], topic=["TBW102"]), None, False),
    ],
)
def test_rows_the_columnar_path_hands_back_are_sent_as_before(
    rows: pa.RecordBatch, topic: str | None, write_ids: bool
) -> None:
    ids = WriteIds("q:0:0:")
    assert encode_rows(rows, topic, ids if write_ids else None, _Ids(_uniq_keys()), _MAX) is None
    assert ids.seq == 0  # no write id taken: the per-row path numbers the rows
    assert list(batches_by_topic(rows_to_messages(rows, topic, ids if write_ids else None)))


def test_refused_rows_raise_the_per_row_errors() -> None:
    def refused(rows: pa.RecordBatch, topic: str | None = "T", max_size: int = _MAX) -> str:
        assert encode_rows(rows, topic, None, _Ids(_uniq_keys()), max_size) is None
        with pytest.raises((RowError, InvalidMessageError, MessageFormatError)) as info:
            _both(rows, topic, max_size=max_size)
        return str(info.value)

    assert "empty body" in refused(batch(body=[b"x", b""]))
    assert "empty body" in refused(batch(body=[b"x", None]))
    assert "empty body" in refused(
        pa.RecordBatch.from_pydict({"body": [b"x"]}).drop_columns("body")
    )
    assert "no topic" in refused(batch(body=[b"x", b"y"], topic=["T", ""]), None)
    assert "no topic" in refused(batch(body=[b"x"], topic=[None]), None)
    assert "bytes; max 10" in refused(batch(body=[b"x" * 11]), max_size=10)
    assert "the limit is" in refused(batch(body=[b"x"], properties=[[("p", "v" * 33_000)]]))
    assert "the batch is" in refused(batch(body=[b"x" * 2000] * 5), max_size=4000)
    numbers = pa.RecordBatch.from_pydict({"body": [1]})  # not a body at all: per row too
    assert encode_rows(numbers, "T", None, _Ids(_uniq_keys()), _MAX) is None


# -- the sends in flight -----------------------------------------------------------------


async def test_in_flight_keeps_its_window_and_waits_for_every_send() -> None:
    running, most, done = 0, 0, []

    async def send(i: int) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.001 * (i % 3))
        running -= 1
        done.append(i)

    async with InFlight(3) as flight:
        for i in range(20):
            await flight.submit(send(i))
            assert running <= 3
        await flight.drain()
    assert most == 3 and sorted(done) == list(range(20))


async def test_in_flight_fails_on_the_first_failure_and_cancels_the_rest() -> None:
    stuck = asyncio.Event()
    cancelled = []

    async def hang() -> None:
        try:
            await stuck.wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def fail() -> None:
        raise OSError("broker gone")

    with pytest.raises(OSError, match="broker gone"):
        async with InFlight(2) as flight:
            await flight.submit(hang())
            await flight.submit(fail())
            await flight.submit(hang())  # waits for a place, sees the failure
    assert cancelled == [True]  # the first hang was cancelled on the way out

    with pytest.raises(OSError, match="broker gone"):
        async with InFlight(8) as flight:
            await flight.submit(hang())
            await flight.submit(fail())
            await flight.drain()  # does not wait for the hanging send
    assert cancelled == [True, True]


def test_the_sink_sends_columnar_batches_and_falls_back_per_batch() -> None:
    ids = _Ids(_uniq_keys())
    config = SimpleNamespace(max_message_size=_MAX)
    producer = SimpleNamespace(config=config, reserve_uniq_keys=ids.reserve_uniq_keys)
    send = functools.partial(_send_batches, producer=cast(Producer, producer))
    write_ids = WriteIds("q:0:0:")
    columnar = send(batch(body=[b"a", b"b"], topic=["T", "U"]), None, write_ids)
    encoded = [b for b in columnar if isinstance(b, EncodedBatch)]
    assert [(b.topic, b.count) for b in encoded] == [("T", 1), ("U", 1)] and encoded == columnar
    (messages,) = send(batch(body=[b"c"], properties=[[("n", "1"), ("n", "2")]]), "T", write_ids)
    assert isinstance(messages, list)
    assert [m.properties for m in messages] == [{"n": "2", WRITE_ID_PROPERTY: "q:0:0:2"}]


def test_write_ids_number_as_the_marker_module_writes_them() -> None:
    ident = WriteIdent("query", 4, 2)
    ours, theirs = WriteIds.of(ident), ident.write_ids()
    assert [next(ours) for _ in range(12)] == [next(theirs) for _ in range(12)]
    assert ours.seq == 12
