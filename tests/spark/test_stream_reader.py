"""The stream reader's methods, called as Spark's runner calls them, on a real broker.

No Spark session: what is checked is what the reader logs when an availableNow run
has nothing to read, which Spark would print on a worker's stderr, and what it writes
to the consumer group with ``commitOffsets``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pyspark.sql.streaming.datasource import ReadAllAvailable

from rocklet.client.admin import Admin
from rocklet.protocol.bodies.stats import ConsumeStats
from rocklet.spark.offsets import OffsetJson, to_json
from rocklet.spark.options import parse_source_options
from rocklet.spark.stream_source import RockletStreamReader
from tests.logcapture import capture_sdk_logs
from tests.spark.support import TIMEOUT, BrokerThread, produce


def group_progress(broker: BrokerThread, group: str) -> tuple[OffsetJson, int]:
    """A group's committed offsets (as offset JSON) and lag, as consumerProgress shows them.

    GET_CONSUME_STATS on the brokers of the group (found through the route of its retry
    topic), through the SDK's admin client.
    """

    async def registered() -> bool:
        # The broker creates the retry topic on the group's first heartbeat and registers
        # it with the name server without making the heartbeat wait: wait for that here.
        ctx = broker.broker.ctx
        return await ctx.registration.wait_for(ctx.topics.data_version.counter, TIMEOUT)

    async def main() -> ConsumeStats:
        async with Admin(broker.namesrv) as admin:
            return await admin.consume_stats(group)

    assert broker.call(registered())
    stats = asyncio.run(main())
    offsets = {mq: progress.consumer_offset for mq, progress in stats.offset_table.items()}
    return to_json(offsets), stats.total_diff


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


def test_commit_offsets_writes_each_completed_batch_end_once(broker: BrokerThread) -> None:
    broker.set_queues("Dash", 2)
    produce(broker.namesrv, "Dash", [b"d"] * 6, queues=2)
    source = reader(
        broker.namesrv,
        "Dash",
        startingOffsets="earliest",
        commitOffsets="true",
        consumerGroup="dash-progress",
    )
    start = source.initialOffset()
    end = source.latestOffset(start, ReadAllAvailable())  # plans batch 0
    # Where a new checkpoint starts is no completed batch: nothing written yet.
    assert group_progress(broker, "dash-progress") == ({}, 0)

    produce(broker.namesrv, "Dash", [b"e"] * 2, queues=2)
    with capture_sdk_logs("rocklet.spark") as events:
        # Batch 0 done: the next trigger starts from its end, which is written then.
        source.latestOffset(end, ReadAllAvailable())
        source.commit(end)  # Spark's own call for batch 0: nothing left to write
        # A queue whose broker is unknown: the write fails, the query does not.
        source.commit({"Dash": {"broker-a:0": 3, "broker-a:1": 3, "nowhere:0": 1}})
    assert end == {"Dash": {"broker-a:0": 3, "broker-a:1": 3}}
    assert group_progress(broker, "dash-progress") == (end, 2)  # 2 stored since
    warnings = [e for e in events if e["log_level"] == "warning"]
    assert [e["event"] for e in warnings] == [
        "could not write the consumer group's offsets (commitOffsets); the query goes on, "
        "its checkpoint is unaffected"
    ]
    assert warnings[0]["not_written"] == {"Dash": {"nowhere:0": 1}}
    assert "nowhere" in warnings[0]["error"]
