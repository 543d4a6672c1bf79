"""Options, offsets and planning: the connector's pure parts, without Spark or a broker."""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import pytest
from pyspark.sql.streaming.listener import StreamingQueryProgress

from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.spark.offsets import QueueBounds, from_json, limit_offsets, to_json
from rocklet.spark.options import (
    OffsetKind,
    RockletOptionError,
    SourceOptions,
    parse_offline_options,
    parse_sink_options,
    parse_source_options,
)
from rocklet.spark.planning import Snapshot, resolve_offsets
from rocklet.spark.progress import TopicProgress, topic_progress
from rocklet.spark.ranges import DataLossError, plan_ranges
from rocklet.spark.stream_source import next_end
from tests.conftest import GOLDEN_STORE

pytestmark = pytest.mark.spark

NS = "127.0.0.1:9876"


def mq(q: int, topic: str = "T", broker: str = "b") -> MessageQueue:
    return MessageQueue(topic, broker, q)


def source(streaming: bool = False, **opts: str) -> SourceOptions:
    return parse_source_options({"nameServer": NS, "subscribe": "T", **opts}, streaming=streaming)


# -- options -----------------------------------------------------------------------------


def test_defaults_differ_for_batch_and_stream() -> None:
    batch = parse_source_options({"nameserver": NS, "SUBSCRIBE": "b,a,a"}, streaming=False)
    stream = parse_source_options({"nameServer": NS, "topic": "a"}, streaming=True)
    assert batch.subscription.topics == ("a", "b")  # case-insensitive names, sorted, deduplicated
    assert batch.starting.kind is OffsetKind.EARLIEST and batch.ending.kind is OffsetKind.LATEST
    assert stream.starting.kind is OffsetKind.LATEST
    assert (batch.pull_batch_size, batch.pull_timeout_ms, batch.fail_on_data_loss) == (
        32,
        3000,
        True,
    )
    assert batch.consumer_group == stream.consumer_group == "rocklet-spark-source"
    assert source(consumergroup="analytics").consumer_group == "analytics"


@pytest.mark.parametrize(
    ("opts", "streaming", "message"),
    [
        ({}, False, "say what to read"),
        ({"subscribe": "a", "assign": '{"a": [0]}'}, False, "exactly one of"),
        ({"subscribe": "a", "startingOfsets": "earliest"}, False, "unknown option"),
        ({"subscribe": "a b"}, False, "not a valid topic name"),
        ({"subscribePattern": "("}, False, "not a valid regex"),
        ({"subscribe": "a", "endingOffsets": "latest"}, True, "batch queries only"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "5"}, False, "streaming queries only"),
        ({"subscribe": "a", "startingOffsets": "latest"}, False, "cannot be latest"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": -1}}'}, False, "cannot be latest"),
        ({"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, False, "cannot be earliest"),
        ({"subscribe": "a", "startingOffsets": "{nope"}, False, "not valid JSON"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"x:y": 1}}'}, False, "is not '<queueId>'"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, False, "is not an offset"),
        (
            {"subscribe": "a", "startingTimestamp": "1", "startingOffsets": "earliest"},
            False,
            "not both",
        ),
        ({"subscribe": "a", "pullBatchSize": "0"}, False, "pullBatchSize must be in"),
        ({"subscribe": "a", "failOnDataLoss": "yes"}, False, "true or false"),
        ({"subscribe": "a", "minPartitions": "-1"}, False, "must be positive"),
        ({"subscribe": "a", "subExpression": "A || "}, False, "empty tag"),
        ({"assign": '{"a": []}'}, False, "non-empty list"),
        ({"subscribe": "a", "consumerGroup": "my group"}, False, "consumerGroup: .*illegal"),
        ({"subscribe": "a", "consumerGroup": "g" * 256}, False, "consumerGroup: .*max length"),
        (
            {"subscribe": "a", "commitOffsets": "true", "consumerGroup": "g"},
            False,
            "commitOffsets is for streaming queries only",
        ),
        ({"subscribe": "a", "commitOffsets": "true"}, True, "needs a consumerGroup of this query"),
        (
            {"subscribe": "a", "commitOffsets": "true", "consumerGroup": "rocklet-spark-source"},
            None,
            "default 'rocklet-spark-source' is shared by every query",
        ),
        ({"subscribe": "a", "commitOffsets": "1"}, True, "commitOffsets must be true or false"),
    ],
)
def test_bad_source_options_name_the_problem(
    opts: dict[str, str], streaming: bool | None, message: str
) -> None:
    with pytest.raises(RockletOptionError, match=message):
        parse_source_options({"nameServer": NS, **opts}, streaming=streaming)


def test_commit_offsets_is_off_by_default_and_needs_a_group_of_its_own() -> None:
    assert not source(streaming=True).commit_offsets
    assert not source(commitOffsets="false").commit_offsets  # off is fine in a batch read
    dash = source(streaming=True, COMMITOFFSETS="True", consumerGroup="orders-dashboard")
    assert dash.commit_offsets and dash.consumer_group == "orders-dashboard"
    # load() checks the options before it knows the mode (streaming=None).
    assert parse_source_options(
        {"nameServer": NS, "subscribe": "T", "commitOffsets": "true", "consumerGroup": "g"},
        streaming=None,
    ).commit_offsets


def test_name_server_is_required() -> None:
    with pytest.raises(RockletOptionError, match="nameServer is required"):
        parse_source_options({"subscribe": "a"}, streaming=False)


def test_assign_and_offsets_json_accept_both_queue_forms() -> None:
    opts = parse_source_options(
        {
            "nameServer": NS,
            "assign": '{"a": [1, "b2:0", 1]}',
            "startingOffsets": '{"a": {"1": 5, "b2:0": -2}}',
        },
        streaming=True,
    )
    assert opts.subscription.assign == {"a": ((None, 1), ("b2", 0))}
    assert opts.starting.per_topic == {"a": {(None, 1): 5, ("b2", 0): -2}}


def test_sink_and_offline_options() -> None:
    sink = parse_sink_options({"nameServer": NS, "topic": "out", "writeId": "false"})
    assert (sink.topic, sink.producer_group, sink.write_id) == ("out", "rocklet-spark-sink", False)
    with pytest.raises(RockletOptionError, match="unknown option"):
        parse_sink_options({"nameServer": NS, "subscribe": "x"})
    with pytest.raises(RockletOptionError, match=r"producerGroup: .*illegal"):
        parse_sink_options({"nameServer": NS, "producerGroup": "a/b"})
    offline = parse_offline_options({"path": str(GOLDEN_STORE), "topic": "GoldenTopic"})
    assert offline.commitlog_dir == GOLDEN_STORE / "commitlog"
    assert offline.topics == ("GoldenTopic",)
    with pytest.raises(RockletOptionError, match="no commitlog segments"):
        parse_offline_options({"path": str(GOLDEN_STORE / "config")})


# -- offsets -----------------------------------------------------------------------------


def test_offset_json_is_canonical_whatever_the_insertion_order() -> None:
    queues = [mq(q, t, b) for t in ("b", "a") for b in ("y", "x") for q in (10, 2, 1)]
    texts = set()
    for seed in range(5):
        random.Random(seed).shuffle(queues)
        texts.add(json.dumps(to_json({m: m.queue_id * 7 for m in queues})))
    assert len(texts) == 1
    text = texts.pop()
    assert text.startswith('{"a": {"x:1": 7, "x:2": 14, "x:10": 70, "y:1": 7')
    assert from_json(json.loads(text)) == {m: m.queue_id * 7 for m in queues}
    with pytest.raises(ValueError, match="not canonical"):
        from_json({"a": {"1": 3}})


def test_limit_offsets_is_exact_proportional_and_never_goes_back() -> None:
    start = {mq(0): 0, mq(1): 100, mq(2): 50, mq(3): 10}
    latest = {mq(0): 90, mq(1): 130, mq(2): 40, mq(3): 10}
    end = limit_offsets(start, latest, 50)
    assert sum(end[m] - start[m] for m in start) == 50
    assert end[mq(2)] == 50 and end[mq(3)] == 10  # backwards and empty queues stay
    assert end[mq(0)] - start[mq(0)] == 38 and end[mq(1)] - start[mq(1)] == 12  # 90:30
    assert limit_offsets(start, latest, 1000) == {mq(0): 90, mq(1): 130, mq(2): 50, mq(3): 10}
    tiny = limit_offsets({mq(q): 0 for q in range(8)}, {mq(q): 5 for q in range(8)}, 3)
    assert tiny == {mq(0): 1, mq(1): 1, mq(2): 1, **{mq(q): 0 for q in range(3, 8)}}


# -- planning ----------------------------------------------------------------------------


def snapshot(**ranges: tuple[int, int]) -> Snapshot:
    return Snapshot({mq(int(q[1:])): QueueBounds(lo, hi) for q, (lo, hi) in ranges.items()})


def test_resolve_offsets_json_with_markers_and_defaults() -> None:
    snap = snapshot(q0=(5, 50), q1=(0, 20), q2=(3, 9))
    spec = source(startingOffsets='{"T": {"0": -2, "b:1": 7}}').starting
    assert resolve_offsets(spec, snap, option="startingOffsets") == {mq(0): 5, mq(1): 7, mq(2): 3}
    spec = source(endingOffsets='{"T": {"2": 4}}').ending
    assert resolve_offsets(spec, snap, option="endingOffsets") == {mq(0): 50, mq(1): 20, mq(2): 4}


def test_resolve_offsets_rejects_unknown_and_ambiguous_queues() -> None:
    two_brokers = Snapshot(
        {mq(0, broker="b1"): QueueBounds(0, 1), mq(0, broker="b2"): QueueBounds(0, 1)}
    )
    spec = source(startingOffsets='{"T": {"0": 0}}').starting
    with pytest.raises(RockletOptionError, match="several brokers"):
        resolve_offsets(spec, two_brokers, option="startingOffsets")
    spec = source(startingOffsets='{"T": {"b1:7": 0}}').starting
    with pytest.raises(RockletOptionError, match="no readable queue b1:7"):
        resolve_offsets(spec, two_brokers, option="startingOffsets")
    spec = source(startingOffsets='{"U": {"0": 0}}').starting
    with pytest.raises(RockletOptionError, match="not subscribed"):
        resolve_offsets(spec, two_brokers, option="startingOffsets")


def test_plan_ranges_skips_empty_queues_and_splits_for_min_partitions() -> None:
    opts = parse_source_options(
        {"nameServer": NS, "subscribe": "T", "minPartitions": "5"}, streaming=False
    )
    parts = plan_ranges({mq(0): 0, mq(1): 10, mq(2): 4}, {mq(0): 80, mq(1): 10, mq(2): 24}, opts)
    spans = [(p.mq.queue_id, p.start, p.end) for p in parts]
    assert spans == [(0, 0, 20), (0, 20, 40), (0, 40, 60), (0, 60, 80), (2, 4, 24)]
    assert all(p.name_server == NS and p.fail_on_data_loss for p in parts)


def test_next_end_registers_new_queues_caps_at_target_and_keeps_vanished_ones() -> None:
    begin = {mq(0): 10, mq(1): 0, mq(9): 4}  # queue 9 vanished from the route
    snap = snapshot(q0=(0, 30), q1=(0, 30), q2=(2, 30))
    end = next_end(begin, snap, target=None, max_rows=None, fail_on_data_loss=True)
    assert end == {mq(0): 30, mq(1): 30, mq(2): 2, mq(9): 4}  # new queue 2 registered at min
    capped = next_end(begin, snap, target={mq(0): 20}, max_rows=None, fail_on_data_loss=True)
    assert capped == {mq(0): 20, mq(1): 0, mq(2): 2, mq(9): 4}  # not in target: no progress
    limited = next_end(begin, snap, target=None, max_rows=10, fail_on_data_loss=True)
    assert limited[mq(0)] - 10 + limited[mq(1)] == 10


def test_next_end_reports_a_queue_that_moved_backwards() -> None:
    snap = snapshot(q0=(0, 3))
    with pytest.raises(DataLossError, match="now ends at 3, before the checkpoint's 10"):
        next_end({mq(0): 10}, snap, target=None, max_rows=None, fail_on_data_loss=True)
    end = next_end({mq(0): 10}, snap, target=None, max_rows=None, fail_on_data_loss=False)
    assert end == {mq(0): 3}


# -- progress per topic ---------------------------------------------------------------------


def source_report(start: object, end: object, latest: object, rows: int = 0) -> dict[str, Any]:
    """One source of a progress report, as Spark's JSON has it (offsets are JSON values)."""
    return {
        "description": "PythonMicroBatchStream",
        "startOffset": start,
        "endOffset": end,
        "latestOffset": latest,
        "numInputRows": rows,
        "inputRowsPerSecond": 0.0,
        "processedRowsPerSecond": 0.0,
        "metrics": {},
    }


def progress_report(*sources: dict[str, Any]) -> dict[str, Any]:
    """``json.loads(query.lastProgress.json)``: a whole report."""
    return {
        "id": str(uuid.uuid4()),
        "runId": str(uuid.uuid4()),
        "name": None,
        "timestamp": "2025-06-01T00:00:00.000Z",
        "batchId": 3,
        "batchDuration": 10,
        "durationMs": {},
        "eventTime": {},
        "stateOperators": [],
        "sources": list(sources),
        "sink": {"description": "ForeachBatchSink", "numOutputRows": -1, "metrics": {}},
        "numInputRows": 12,
        "inputRowsPerSecond": 0.0,
        "processedRowsPerSecond": 0.0,
        "observedMetrics": {},
    }


def test_topic_progress_sums_rows_and_lag_per_topic_and_skips_other_sources() -> None:
    ours = source_report(
        {"A": {"b:0": 10, "b:1": 4}, "B": {"b:0": 0}},
        {"A": {"b:0": 15, "b:1": 4, "b:2": 0}, "B": {"b:0": 7}},  # A's b:2 appeared: registered
        {"A": {"b:0": 20, "b:1": 6, "b:2": 3}, "B": {"b:0": 7}},
        rows=12,
    )
    kafka = source_report({"orders": {"0": 1}}, {"orders": {"0": 5}}, {"orders": {"0": 9}})
    rate = source_report(10, 20, 20)
    files = source_report({"logOffset": 2}, {"logOffset": 3}, None)
    report = progress_report(kafka, ours, rate, files)
    expected = {
        "A": TopicProgress("A", rows=5, lag=5 + 2 + 3, queues=("b:0", "b:1", "b:2")),
        "B": TopicProgress("B", rows=7, lag=0, queues=("b:0",)),
    }
    assert topic_progress(report) == expected
    assert list(topic_progress(report)) == ["A", "B"]
    # The same report as text, and as pyspark's object (offsets as JSON strings there).
    assert topic_progress(json.dumps(report)) == expected
    assert topic_progress(StreamingQueryProgress.fromJson(report)) == expected


def test_topic_progress_without_start_or_latest_and_with_two_sources() -> None:
    end = {"A": {"b:0": 8, "c:0": 1}}
    first = source_report(None, end, {"A": {"b:0": 9, "c:0": 1}})  # a new checkpoint's first batch
    replayed = source_report({"A": {"b:0": 6, "c:0": 1}}, end, None)  # replayed after a restart
    (a,) = topic_progress(progress_report(first)).values()
    assert (a.rows, a.lag, a.queues) == (None, 1, ("b:0", "c:0"))
    (a,) = topic_progress(StreamingQueryProgress.fromJson(progress_report(replayed))).values()
    assert (a.rows, a.lag) == (2, None)
    # Two rocklet sources reading one topic: added up.
    other = source_report({"A": {"d:0": 0}}, {"A": {"d:0": 4}}, {"A": {"d:0": 4}})
    twice = source_report({"A": {"b:0": 6, "c:0": 1}}, end, {"A": {"b:0": 10, "c:0": 1}})
    assert topic_progress(progress_report(twice, other)) == {
        "A": TopicProgress("A", rows=2 + 4, lag=2, queues=("b:0", "c:0", "d:0"))
    }
    assert topic_progress(progress_report()) == {}
    with pytest.raises(ValueError, match="not a streaming query progress"):
        topic_progress({"batchId": 1})


def test_sql92_selectors_are_checked_when_the_options_are_read() -> None:
    base = {"nameServer": "127.0.0.1:9876", "subscribe": "T"}
    opts = parse_source_options(
        {**base, "expressionType": "sql92", "subExpression": "a > 1 AND b = 'x'"},
        streaming=False,
    )
    assert (opts.expression_type, opts.sub_expression) == ("SQL92", "a > 1 AND b = 'x'")
    assert parse_source_options(base, streaming=True).expression_type == "TAG"
    for options, message in [
        ({"expressionType": "SQL92"}, "needs a subExpression selector"),
        ({"expressionType": "SQL92", "subExpression": "a >"}, "not a valid SQL92 selector"),
        ({"expressionType": "regex", "subExpression": "x"}, "must be TAG or SQL92"),
    ]:
        with pytest.raises(RockletOptionError, match=message):
            parse_source_options({**base, **options}, streaming=False)
