"""Batch reads through Spark: offsets, filters, partitions, registration and errors."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from rocklet.spark import RockletDataSource
from rocklet.spark.schema import SOURCE_SCHEMA
from tests.spark.support import BrokerThread, produce, pull_all

pytestmark = pytest.mark.spark


def test_batch_read_between_start_and_end_offsets(
    spark: SparkSession, broker: BrokerThread
) -> None:
    broker.set_queues("Orders", 4)
    bodies = [f"order-{i}".encode() for i in range(40)]  # message i: queue i % 4, offset i // 4
    produce(
        broker.namesrv,
        "Orders",
        bodies,
        tags=["even" if (i // 4) % 2 == 0 else "odd" for i in range(40)],  # by queue offset
        keys=[f"k{i} user{i % 3}" for i in range(40)],
    )
    before = dt.datetime.now(dt.UTC).replace(tzinfo=None)  # Spark gives naive UTC
    df = (
        spark.read.format("rocklet")
        .option("nameServer", broker.namesrv)
        .option("subscribe", "Orders")
        .option("startingOffsets", '{"Orders": {"0": 3, "1": -2, "broker-a:2": 8}}')
        .option("endingOffsets", '{"Orders": {"0": 6, "3": 2}}')
        .load()
    )
    assert df.schema == SOURCE_SCHEMA
    rows = df.orderBy("queueId", "queueOffset").collect()
    got = [(r.queueId, r.queueOffset, r.body) for r in rows]
    wanted = [
        (q, o, bodies[o * 4 + q])
        for q, lo, hi in ((0, 3, 6), (1, 0, 10), (2, 8, 10), (3, 0, 2))
        for o in range(lo, hi)
    ]
    assert got == wanted
    first = rows[0]  # message 12
    assert (first.topic, first.tags, first.keys, first.brokerName) == (
        "Orders",
        "odd",
        "k12 user0",
        "broker-a",
    )
    assert len(first.msgId) == 32 and first.commitLogOffset >= 0 and first.reconsumeTimes == 0
    assert first.storeTimestamp <= before and first.bornTimestamp <= first.storeTimestamp
    assert "TAGS" not in first.properties and "KEYS" not in first.properties

    # The broker filters by tag and scans past the end: rows at or after it are dropped.
    odd = (
        spark.read.format("rocklet")
        .option("nameServer", broker.namesrv)
        .option("topic", "Orders")
        .option("subExpression", "odd")
        .option("endingOffsets", '{"Orders": {"0": 5}}')
        .option("minPartitions", "6")
        .load()
    )
    assert odd.rdd.getNumPartitions() >= 6
    wanted_odd = [b for i, b in enumerate(bodies) if (i // 4) % 2 and (i % 4 or i // 4 < 5)]
    assert sorted(r.body for r in odd.select("body").collect()) == sorted(wanted_odd)


def test_pattern_subscription_and_explicit_registration(
    spark: SparkSession, broker: BrokerThread
) -> None:
    for topic in ("metrics-a", "metrics-b", "other"):
        broker.set_queues(topic, 2)
        produce(broker.namesrv, topic, [topic.encode()] * 3, queues=2)
    spark.dataSource.register(RockletDataSource)  # works besides the automatic registration
    counts = (
        spark.read.format("rocklet")
        .option("nameServer", broker.namesrv)
        .option("subscribePattern", "metrics-.*")
        .load()
        .groupBy("topic")
        .count()
        .orderBy("topic")
        .collect()
    )
    assert [(r.topic, r["count"]) for r in counts] == [("metrics-a", 3), ("metrics-b", 3)]


def test_bad_options_and_schemas_fail_with_the_connectors_message(spark: SparkSession) -> None:
    reader = spark.read.format("rocklet").option("nameServer", "127.0.0.1:1")
    with pytest.raises(PySparkException, match=r"unknown option.*startingofset"):
        reader.option("subscribe", "a").option("startingOfset", "earliest").load()
    with pytest.raises(PySparkException, match="fixed schema"):
        reader.option("subscribe", "a").schema("body binary").load().collect()
    with pytest.raises(PySparkException, match="only appends"):
        spark.createDataFrame([("x",)], "body string").write.format("rocklet").option(
            "nameServer", "127.0.0.1:1"
        ).option("topic", "t").mode("overwrite").save()
    with pytest.raises(PySparkException, match="needs a 'body' column"):
        spark.createDataFrame([("x",)], "value string").write.format("rocklet").option(
            "nameServer", "127.0.0.1:1"
        ).option("topic", "t").mode("append").save()


def test_starting_timestamp_starts_each_queue_at_its_first_later_message(
    spark: SparkSession, broker: BrokerThread
) -> None:
    broker.set_queues("Timed", 2)
    produce(broker.namesrv, "Timed", [f"t{i}".encode() for i in range(20)], queues=2)
    stored = pull_all(broker.namesrv, "Timed")
    cut = sorted(m.store_timestamp for m in stored)[10]
    wanted = set()
    for queue in (0, 1):
        in_queue = sorted((m for m in stored if m.queue_id == queue), key=lambda m: m.queue_offset)
        first = next((m.queue_offset for m in in_queue if m.store_timestamp >= cut), 10**9)
        wanted |= {m.body for m in in_queue if m.queue_offset >= first}
    df = (
        spark.read.format("rocklet")
        .option("nameServer", broker.namesrv)
        .option("subscribe", "Timed")
        .option("startingTimestamp", str(cut))
        .load()
    )
    assert {r.body for r in df.select("body").collect()} == wanted
