"""The offline reader over commitlog segments: RocketMQ's golden store and Rocklet's own."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from rocklet.protocol.message import BLANK_MAGIC, MESSAGE_MAGIC, pack_host
from rocklet.spark.offline import (
    SegmentRange,
    StoreCorruptionError,
    first_record_at,
    plan_ranges,
    read_range,
    split_segment,
)
from rocklet.spark.options import RockletOptionError, parse_offline_options
from rocklet.store.message_store import MessageStore
from rocklet.store.results import MessageToStore, PutMessageStatus
from tests.conftest import GOLDEN_STORE
from tests.spark.support import BrokerThread, produce, pull_all
from tests.store.helpers import small_config

pytestmark = pytest.mark.spark

MANIFEST = GOLDEN_STORE.parent / "rocketmq-4.9.4-store.manifest.json"


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    # A copy: the golden store is never opened for anything but a copy (read-only anyway).
    shutil.copytree(GOLDEN_STORE / "commitlog", tmp_path / "golden" / "commitlog")
    return tmp_path / "golden"


def test_reads_the_rocketmq_golden_store(spark: SparkSession, golden: Path) -> None:
    df = spark.read.format("rocklet").option("brokerName", "broker-a").load(str(golden))
    assert df.rdd.getNumPartitions() == 3  # one per commitlog segment
    counts = {r.topic: r["count"] for r in df.groupBy("topic").count().collect()}
    assert counts == {
        "GoldenTopic": 2001,
        "GoldenOrdered": 30,
        "GoldenDelayed": 1,
        "SCHEDULE_TOPIC_XXXX": 1,
    }

    golden_topic = df.where("topic = 'GoldenTopic'").select(
        "msgId", "queueId", "queueOffset", "tags", "keys", "body", "properties", "brokerName"
    )
    rows = {r.msgId: r for r in golden_topic.collect()}
    for entry in json.loads(MANIFEST.read_text()):
        row = rows[entry["msg_id"]]
        seq = entry["seq"]
        assert (row.queueOffset, row.tags, row.brokerName) == (
            entry["queue_offset"],
            entry["tags"],
            "broker-a",
        )
        if seq == "unicode":  # the one non-ASCII message
            assert row.keys == "ключ"
            continue
        assert row.keys == f"order-{seq} user-{seq % 7}" and row.properties["seq"] == str(seq)
        assert row.body.startswith(f"golden-{seq:05d}-".encode())
    assert len(rows) == 2001

    tag_a = (
        spark.read.format("rocklet").option("topic", "GoldenTopic").option("subExpression", "TagA")
    )
    assert tag_a.load(str(golden / "commitlog")).count() == 1000


def test_a_corrupt_record_fails_the_read_or_ends_its_segment(
    spark: SparkSession, golden: Path
) -> None:
    segment = golden / "commitlog" / "00000000000000000000"
    data = bytearray(segment.read_bytes())
    third = _record_start(data, 2)
    data[third + 200] ^= 0xFF  # inside the third record's body: its CRC no longer matches
    segment.write_bytes(data)
    reader = spark.read.format("rocklet").option("topic", "GoldenTopic")
    with pytest.raises(PySparkException, match=r"bad record in .*00000000000000000000 at byte \d+"):
        reader.load(str(golden)).count()
    survivors = reader.option("failOnCorruption", "false").load(str(golden))
    first_segment = survivors.where("commitLogOffset < 1048576").count()
    assert first_segment == 2  # the two records before the bad one
    assert survivors.count() > 2000 - 1000  # the other segments are read in full


def _record_start(data: bytearray, index: int) -> int:
    pos = 0
    for _ in range(index):
        assert int.from_bytes(data[pos + 4 : pos + 8], "big", signed=True) == MESSAGE_MAGIC
        pos += int.from_bytes(data[pos : pos + 4], "big")
    return pos


def test_reads_a_rocklet_store_like_the_broker_serves_it(
    spark: SparkSession, broker: BrokerThread, tmp_path: Path
) -> None:
    broker.set_queues("Audit", 2)
    bodies = [
        f"audit-{i}-".encode() * (1 + 600 * (i % 5 == 0)) for i in range(50)
    ]  # some > 4 KiB: compressed
    produce(broker.namesrv, "Audit", bodies, queues=2, tags=["t"] * 50)
    served = {
        (m.queue_id, m.queue_offset, m.msg_id, m.body) for m in pull_all(broker.namesrv, "Audit")
    }
    store = tmp_path / "store"  # the broker's store root (commitlog/ inside)
    rows = (
        spark.read.format("rocklet")
        .option("subscribePattern", "Aud.*")
        .load(str(store))
        .select("queueId", "queueOffset", "msgId", "body")
        .collect()
    )
    assert {(r.queueId, r.queueOffset, r.msgId, bytes(r.body)) for r in rows} == served
    assert len(rows) == 50


# -- byte ranges of a segment --------------------------------------------------------------

SEGMENT = 16 * 1024
#: A record head inside every body: a scan for magic codes would take it for a record.
FAKE_HEAD = struct.pack(">ii", 200, MESSAGE_MAGIC)


@pytest.fixture
def ranged(tmp_path: Path) -> tuple[Path, list[tuple[int, str]]]:
    """A Rocklet store of 16 KiB segments; the (commitlog offset, msgId) of each record.

    Records of 250 to 1000 bytes straddle 4 KiB range borders, and each full segment
    ends in the blank filler.
    """
    root, written = tmp_path / "ranged", []
    host = pack_host("127.0.0.1", 5555)
    with MessageStore.open(small_config(root, commitlog_file_size_bytes=SEGMENT)) as store:
        for n in range(130):
            body = FAKE_HEAD + bytes([n]) * (100 + n * 97 % 700)
            uniq = f"U{n:08d}"
            msg = MessageToStore(
                "Ranged", n % 3, body, {"UNIQ_KEY": uniq}, born_host=host, store_host=host
            )
            result = store.put_message(msg)
            assert result.status is PutMessageStatus.PUT_OK
            written.append((result.wrote_offset, uniq))
    assert written[-1][0] > 4 * SEGMENT  # five segments
    return root, written


def _offsets(part: SegmentRange, **options: str) -> list[int]:
    opts = parse_offline_options({"path": part.path.rsplit("/commitlog/", 1)[0], **options})
    batches = read_range(part, opts)
    return [offset for b in batches for offset in b.column("commitLogOffset").to_pylist()]


def test_split_segment_counts_by_written_bytes_and_ends_at_the_file_end() -> None:
    assert split_segment(1 << 30, 300 << 20, 128 << 20) == [
        (0, 100 << 20),
        (100 << 20, 200 << 20),
        (200 << 20, 1 << 30),
    ]
    assert split_segment(SEGMENT, SEGMENT, 4096) == [(i, i + 4096) for i in range(0, SEGMENT, 4096)]
    assert split_segment(SEGMENT, 0, 4096) == [(0, SEGMENT)]  # nothing written: one range
    assert split_segment(0, 0, 4096) == [(0, 0)]
    assert parse_offline_options({"path": str(GOLDEN_STORE)}).max_partition_bytes == 128 << 20
    with pytest.raises(RockletOptionError, match=r"maxPartitionBytes must be in \[4096, "):
        parse_offline_options({"path": str(GOLDEN_STORE), "maxPartitionBytes": "4095"})


def test_first_record_at_finds_each_boundary_exactly(
    ranged: tuple[Path, list[tuple[int, str]]],
) -> None:
    root, written = ranged
    segments = sorted((root / "commitlog").iterdir())
    for segment in segments:
        base, data = int(segment.name), segment.read_bytes()
        starts = [offset - base for offset, _ in written if base <= offset < base + len(data)]
        chain_end = starts[-1] + int.from_bytes(data[starts[-1] : starts[-1] + 4], "big")
        filler = int.from_bytes(data[chain_end + 4 : chain_end + 8], "big", signed=True)
        assert filler == (0 if segment == segments[-1] else BLANK_MAGIC)
        boundaries = [*starts, chain_end]
        for start in sorted({*range(0, len(data), 53), *(s + d for s in starts for d in (-1, 1))}):
            expected = next((b for b in boundaries if b >= start), None)
            assert first_record_at(data, start) == expected, (segment.name, start)


def test_ranges_read_the_same_records_as_whole_segments(
    ranged: tuple[Path, list[tuple[int, str]]],
) -> None:
    root, written = ranged
    whole = plan_ranges(root / "commitlog", 1 << 30)
    ranges = plan_ranges(root / "commitlog", 4096)
    assert len(whole) == 5 and len(ranges) > 3 * len(whole)
    straddling = [
        r for r in ranges[1:] for offset, _ in written if offset - r.base_offset < r.start < offset
    ]
    assert straddling  # records cross range borders (the ones just before each border)
    split = [offset for part in ranges for offset in _offsets(part)]
    assert split == [offset for part in whole for offset in _offsets(part)]
    assert split == [offset for offset, _ in written]  # none lost, none twice, in order


def test_a_bad_head_is_reported_by_its_range_and_empties_the_later_ones(
    ranged: tuple[Path, list[tuple[int, str]]],
) -> None:
    root, written = ranged
    segment = root / "commitlog" / f"{SEGMENT:020d}"
    inside = [offset - SEGMENT for offset, _ in written if SEGMENT + 4096 < offset < 2 * SEGMENT]
    bad = inside[len(inside) // 2]  # in the second or third range of the segment
    data = bytearray(segment.read_bytes())
    data[bad + 4 : bad + 8] = b"\0\0\0\1"  # the magic: the chain is cut there
    segment.write_bytes(data)
    parts = [p for p in plan_ranges(root / "commitlog", 4096) if p.base_offset == SEGMENT]
    assert len(parts) == 4
    failures, rows = [], []
    for part in parts:
        try:
            rows.append(_offsets(part))
        except StoreCorruptionError as exc:
            failures.append((part.start, str(exc)))
            rows.append([])
    assert len(failures) == 1 and f"at byte {bad} " in failures[0][1]
    assert failures[0][0] <= bad < failures[0][0] + 4096
    assert rows[0] and all(o - SEGMENT < bad for r in rows for o in r)
    later = [r for part, r in zip(parts, rows, strict=True) if part.start > bad]
    assert later and not any(later)


def test_spark_reads_small_ranges_of_several_segments(
    spark: SparkSession, ranged: tuple[Path, list[tuple[int, str]]]
) -> None:
    root, written = ranged
    df = spark.read.format("rocklet").option("maxPartitionBytes", "4096").load(str(root))
    assert df.rdd.getNumPartitions() == len(plan_ranges(root / "commitlog", 4096)) > 15
    rows = df.select("commitLogOffset", "msgId").collect()
    assert [(r.commitLogOffset, r.msgId) for r in rows] == written


def test_a_corrupt_body_in_a_split_segment_fails_or_ends_the_segment(
    spark: SparkSession, ranged: tuple[Path, list[tuple[int, str]]]
) -> None:
    root, written = ranged
    segment = root / "commitlog" / f"{SEGMENT:020d}"
    inside = [o for o, _ in written if SEGMENT + 4096 < o < 2 * SEGMENT - 4096]
    bad = inside[len(inside) // 2]  # in the middle of the segment: neither first nor last range
    data = bytearray(segment.read_bytes())
    data[bad - SEGMENT + 200] ^= 0xFF  # in the body: only its CRC tells
    segment.write_bytes(data)
    assert len([p for p in plan_ranges(root / "commitlog", 4096) if p.base_offset == SEGMENT]) == 4
    reader = spark.read.format("rocklet").option("maxPartitionBytes", "4096")
    with pytest.raises(PySparkException, match=rf"bad record in .*{segment.name} at byte"):
        reader.load(str(root)).count()
    # Read whole (a later range cannot know a body before it was bad), cut at the bad one.
    survivors = reader.option("failOnCorruption", "false").load(str(root))
    offsets = [r.commitLogOffset for r in survivors.select("commitLogOffset").collect()]
    assert offsets == [o for o, _ in written if not bad <= o < 2 * SEGMENT]
