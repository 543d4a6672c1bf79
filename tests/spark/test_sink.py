"""The sink: rows written through Spark, read back with the SDK."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from rocklet.spark.sink import WRITE_ID_PROPERTY
from tests.spark.support import BrokerThread, drop_last_commit, produce, pull_all, stream_copy

pytestmark = pytest.mark.spark


def test_batch_write_then_read_back_with_the_sdk(spark: SparkSession, broker: BrokerThread) -> None:
    rows = [
        (
            f"body-{i}",
            "Out-A" if i % 3 else "Out-B",
            f"t{i % 2}",
            [f"k{i}", "shared"],
            {"n": str(i), "TAGS": "x"},
        )
        for i in range(300)
    ]
    df = spark.createDataFrame(
        rows,
        "body string, topic string, tags string, keys array<string>, properties map<string,string>",
    )
    df.repartition(3).write.format("rocklet").option("nameServer", broker.namesrv).mode(
        "append"
    ).save()

    got = pull_all(broker.namesrv, "Out-A") + pull_all(broker.namesrv, "Out-B")
    assert sorted(m.body for m in got) == sorted(r[0].encode() for r in rows)
    for msg in got:
        i = int(msg.body.split(b"-")[1])
        assert msg.topic == ("Out-A" if i % 3 else "Out-B")
        assert msg.tags == f"t{i % 2}" and msg.keys == (f"k{i}", "shared")
        assert msg.properties["n"] == str(i)  # user property kept, reserved TAGS ignored
        assert WRITE_ID_PROPERTY not in msg.properties  # batch writes carry no write id

    # The topic option wins over the column; binary bodies go as they are.
    spark.createDataFrame([(b"\x00\xff", "ignored")], "body binary, topic string").write.format(
        "rocklet"
    ).option("nameServer", broker.namesrv).option("topic", "Out-C").mode("append").save()
    assert [m.body for m in pull_all(broker.namesrv, "Out-C")] == [b"\x00\xff"]


def test_stream_copy_survives_a_replay_without_duplicates(
    spark: SparkSession, broker: BrokerThread, tmp_path: Path
) -> None:
    """Source -> sink with availableNow; the last batch is replayed after a "crash"."""
    broker.set_queues("CopyIn", 2)
    produce(broker.namesrv, "CopyIn", [f"in-{i}".encode() for i in range(60)], queues=2)
    checkpoint = tmp_path / "checkpoint"

    def run() -> None:
        failure = stream_copy(
            spark,
            broker.namesrv,
            "CopyIn",
            "CopyOut",
            checkpoint,
            per_trigger=25,
            columns=("body", "keys"),
        )
        assert failure is None

    run()
    assert len(pull_all(broker.namesrv, "CopyOut")) == 60
    drop_last_commit(checkpoint)  # as if the query died after writing its last batch
    produce(broker.namesrv, "CopyIn", [f"in-{i}".encode() for i in range(60, 80)], queues=2)
    run()

    out = pull_all(broker.namesrv, "CopyOut")
    assert sorted(m.body for m in out) == sorted(f"in-{i}".encode() for i in range(80))
    ids = [m.properties[WRITE_ID_PROPERTY] for m in out]
    assert len(set(ids)) == len(ids) == 80
    assert {i.split(":")[1] for i in ids} == {"0", "1", "2", "3"}  # 25 + 25 + 10, then 20
