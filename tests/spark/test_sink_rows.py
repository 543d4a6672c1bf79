"""Sink rows to messages, without Spark or a broker (Arrow batches as Spark hands them)."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest

from rocklet.spark.sink import WRITE_ID_PROPERTY, RowError, batches_by_topic, rows_to_messages

pytestmark = pytest.mark.spark


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
