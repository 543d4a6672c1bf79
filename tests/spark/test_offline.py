"""The offline reader over commitlog segments: RocketMQ's golden store and Rocklet's own."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from rocklet.protocol.message import MESSAGE_MAGIC
from tests.conftest import GOLDEN_STORE
from tests.spark.support import BrokerThread, produce, pull_all

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
