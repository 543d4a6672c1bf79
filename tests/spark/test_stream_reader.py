"""The stream reader's methods, called as Spark's runner calls them, on a real broker.

No Spark session: what is checked is what the reader logs when an availableNow run
has nothing to read, which Spark would print on a worker's stderr.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.streaming.datasource import ReadAllAvailable

from rocklet.spark.options import parse_source_options
from rocklet.spark.stream_source import RockletStreamReader
from tests.logcapture import capture_sdk_logs
from tests.spark.support import BrokerThread, produce


def reader(namesrv: str, topic: str, **options: str) -> RockletStreamReader:
    opts = parse_source_options(
        {"nameServer": namesrv, "subscribe": topic, **options}, streaming=True
    )
    return RockletStreamReader(opts)


def available_now_run(
    source: RockletStreamReader, checkpoint: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """Spark's calls for one availableNow run: (start, first end, warnings logged)."""
    with capture_sdk_logs("rocklet.spark") as events:
        source.prepareForTriggerAvailableNow()
        start = source.initialOffset() if checkpoint is None else checkpoint
        end = source.latestOffset(start, ReadAllAvailable())
    warnings = [e["event"] for e in events if e["log_level"] == "warning"]
    return start, end, warnings


def test_a_new_stream_at_latest_says_it_skips_what_is_stored(broker: BrokerThread) -> None:
    broker.set_queues("Stored", 2)
    produce(broker.namesrv, "Stored", [b"x"] * 5, queues=2)
    start, end, warnings = available_now_run(reader(broker.namesrv, "Stored"), None)
    assert end == start
    (warning,) = warnings
    assert "this availableNow run has nothing to read" in warning
    assert "startingOffsets is latest" in warning and "5 stored message(s)" in warning
    assert "set startingOffsets=earliest" in warning


def test_an_empty_topic_and_a_finished_checkpoint_are_told_apart(broker: BrokerThread) -> None:
    broker.set_queues("Quiet", 2)
    _, _, warnings = available_now_run(reader(broker.namesrv, "Quiet"), None)
    assert len(warnings) == 1 and "every queue of subscribe=Quiet is empty" in warnings[0]

    produce(broker.namesrv, "Quiet", [b"y"] * 4, queues=2)
    start, end, warnings = available_now_run(
        reader(broker.namesrv, "Quiet", startingOffsets="earliest"), None
    )
    assert warnings == []  # four rows to read: nothing to explain
    assert end == {"Quiet": {"broker-a:0": 2, "broker-a:1": 2}} != start

    # The next run resumes at that end: everything was read already.
    _, again, warnings = available_now_run(reader(broker.namesrv, "Quiet"), end)
    assert again == end
    assert len(warnings) == 1 and "the checkpoint is already at the end" in warnings[0]


def test_a_replayed_batch_is_not_reported_as_nothing_read(broker: BrokerThread) -> None:
    broker.set_queues("Replay", 1)
    produce(broker.namesrv, "Replay", [b"z"] * 3, queues=1)
    source = reader(broker.namesrv, "Replay")
    with capture_sdk_logs("rocklet.spark") as events:
        source.prepareForTriggerAvailableNow()
        # A restart replays the uncommitted batch [0, 3) first, then asks for more.
        assert len(source.partitions({"Replay": {"broker-a:0": 0}}, {"Replay": {"broker-a:0": 3}}))
        source.latestOffset({"Replay": {"broker-a:0": 3}}, ReadAllAvailable())
    assert [e for e in events if e["log_level"] == "warning"] == []
