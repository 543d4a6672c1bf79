"""The streaming source: restarts, replays, queues appearing, data lost to retention,
and what operators see of a stream's progress (per topic, and as a consumer group's)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from rocklet.spark import topic_progress
from rocklet.store.retention import DiskUsage, RetentionService
from tests.spark.support import QUERY_TIMEOUT, BrokerThread, drop_last_commit, produce
from tests.spark.test_stream_reader import group_progress

pytestmark = pytest.mark.spark

Row = tuple[int, int, bytes]  # queueId, queueOffset, body


class Collector:
    """A foreachBatch sink (run in this process) that keeps each micro-batch's rows."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[Row]]] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.batches.append(
            (batch_id, sorted((r.queueId, r.queueOffset, r.body) for r in df.collect()))
        )

    def rows(self) -> list[Row]:
        return [row for _, rows in self.batches for row in rows]


def stream(spark: SparkSession, namesrv: str, topic: str | None, **options: str) -> DataFrame:
    reader = spark.readStream.format("rocklet").option("nameServer", namesrv)
    subscribe = {"subscribe": topic} if topic else {}
    for key, value in {**subscribe, "startingOffsets": "earliest", **options}.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(df: DataFrame, sink: Collector, checkpoint: Path) -> StreamingQuery:
    query = (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT), "the availableNow query did not finish"
    return query


def last_end(query: StreamingQuery) -> dict[str, dict[str, int]]:
    """The end offsets of the query's last report (its only source's)."""
    progress = query.lastProgress
    assert progress is not None
    end: dict[str, dict[str, int]] = json.loads(progress["sources"][0]["endOffset"])
    return end


def test_available_now_restarts_lose_nothing_and_replay_exactly_their_range(
    spark: SparkSession, broker: BrokerThread, tmp_path: Path
) -> None:
    broker.set_queues("Events", 4)
    sent = produce(broker.namesrv, "Events", [f"e{i}".encode() for i in range(40)])
    checkpoint, first = tmp_path / "checkpoint", Collector()
    # commitOffsets: the group shows the stream's position (and lag) to consumerProgress.
    options = {"maxOffsetsPerTrigger": "15", "commitOffsets": "true", "consumerGroup": "ev-dash"}
    events = stream(spark, broker.namesrv, "Events", **options)
    query = run_available_now(events, first, checkpoint)
    assert [len(rows) for _, rows in first.batches] == [15, 15, 10]
    # Per topic, from Spark's reports: 15, 15 then 10 of 40 read, 25, 10 then 0 left. The
    # first batch of a new checkpoint has no startOffset in Spark's report.
    figures = [topic_progress(p)["Events"] for p in query.recentProgress if p["numInputRows"]]
    assert [(f.rows, f.lag) for f in figures] == [(None, 25), (15, 10), (10, 0)]
    assert figures[0].queues == ("broker-a:0", "broker-a:1", "broker-a:2", "broker-a:3")
    # The run's last trigger found nothing more, and wrote the last batch's end.
    end = last_end(query)
    assert end == {"Events": {f"broker-a:{q}": 10 for q in range(4)}}
    assert group_progress(broker, "ev-dash") == (end, 0)

    replayed = drop_last_commit(checkpoint)  # the query "died" before committing batch 2
    broker.set_queues("Events", 6)  # two new queues while it was down: read from 0
    sent += produce(broker.namesrv, "Events", [f"e{i}".encode() for i in range(40, 64)], queues=6)
    assert group_progress(broker, "ev-dash")[1] == 24  # consumerProgress: the stream's lag
    second = Collector()
    events = stream(spark, broker.namesrv, "Events", **options)
    query = run_available_now(events, second, checkpoint)
    end = last_end(query)
    assert group_progress(broker, "ev-dash") == (end, 0)
    assert sum(end["Events"].values()) == 64

    assert second.batches[0] == first.batches[-1] == (replayed, first.batches[-1][1])
    # 16 new rows on queues 0-3 (capped at 15; queues 4 and 5 registered), then the rest.
    assert [len(rows) for _, rows in second.batches[1:]] == [15, 9]
    # Nothing lost, nothing twice: every message in exactly one batch id.
    by_batch = dict(first.batches) | dict(second.batches)
    assert sorted(row for rows in by_batch.values() for row in rows) == sorted(sent)


def test_queues_and_topics_added_mid_stream_are_read_from_their_start(
    spark: SparkSession, broker: BrokerThread, tmp_path: Path
) -> None:
    broker.set_queues("Grow-a", 2)
    produce(broker.namesrv, "Grow-a", [f"a{i}".encode() for i in range(6)], queues=2)
    sink = Collector()
    query = (
        stream(spark, broker.namesrv, None, subscribePattern="Grow-.*", startingOffsets="latest")
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()  # Spark's own "wait until caught up", meant for tests
        assert sink.rows() == []  # startingOffsets=latest: what was there is skipped
        broker.set_queues("Grow-a", 4)
        broker.set_queues("Grow-b", 1)
        produce(broker.namesrv, "Grow-a", [f"b{i}".encode() for i in range(8)], queues=4)
        produce(broker.namesrv, "Grow-b", [f"c{i}".encode() for i in range(3)], queues=1)
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    rows = sink.rows()
    assert len(set(rows)) == len(rows) == 11
    assert sorted(r for r in rows if r[2].startswith(b"b") and r[0] >= 2) == [
        (2, 0, b"b2"),
        (2, 1, b"b6"),
        (3, 0, b"b3"),
        (3, 1, b"b7"),
    ]
    assert sorted(r for r in rows if r[2].startswith(b"c")) == [
        (0, 0, b"c0"),
        (0, 1, b"c1"),
        (0, 2, b"c2"),
    ]
    # reportLatestOffset shows up as the source's latestOffset: the last batch with
    # rows read up to it (no lag).
    last = [p["sources"][0] for p in query.recentProgress if p["numInputRows"]][-1]
    assert json.loads(last["latestOffset"]) == json.loads(last["endOffset"])
    assert json.loads(last["endOffset"]) == {
        "Grow-a": {"broker-a:0": 5, "broker-a:1": 5, "broker-a:2": 2, "broker-a:3": 2},
        "Grow-b": {"broker-a:0": 3},
    }


def test_retention_below_the_checkpoint(spark: SparkSession, tmp_path: Path) -> None:
    broker = BrokerThread(
        tmp_path / "store",
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=20 * 50,
    )
    try:
        broker.set_queues("Old", 1)
        produce(broker.namesrv, "Old", [b"x" * 1000] * 10, queues=1)
        checkpoint = tmp_path / "checkpoint"
        run_available_now(stream(spark, broker.namesrv, "Old"), Collector(), checkpoint)
        produce(broker.namesrv, "Old", [b"y" * 1000] * 290, queues=1)  # ~6 segments of 64 KiB
        retention = RetentionService(broker.broker.ctx.store, lambda _: DiskUsage(100, 99, 1))
        assert broker.call(asyncio.to_thread(retention.run_once)) > 0  # disk "full": delete
        low = broker.broker.ctx.store.min_offset("Old", 0)
        assert 10 < low < 300

        with pytest.raises(
            StreamingQueryException, match="deleted \\(retention\\) before they were read"
        ):
            run_available_now(stream(spark, broker.namesrv, "Old"), Collector(), checkpoint)
        sink = Collector()
        run_available_now(
            stream(spark, broker.namesrv, "Old", failOnDataLoss="false"), sink, checkpoint
        )
        assert sorted(r[1] for r in sink.rows()) == list(range(low, 300))
    finally:
        broker.stop()
