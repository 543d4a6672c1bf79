r"""Count a topic's messages per tag and time window; write the counts to another topic.

A complete Structured Streaming pipeline over Rocklet (or RocketMQ 4.x) with the
``rocklet`` connector (``pyspark_rocklet``):

    source topic --> window(storeTimestamp, 1 minute) x tags --> count --> sink topic

Event time: the ``ts`` field (epoch milliseconds) of a JSON body such as
``{"ts": 1763719200000, "page": "/home"}``; messages without one count at their store
time. Windows are tumbling; a window is written once, when the watermark (the latest
event time seen minus the allowed lateness) has passed its end, so each output message
is final (the sink runs in append mode, the only mode Spark offers Python sinks).

Each output message is one window's count for one tag, as JSON::

    {"windowStart": "2026-11-21T10:00:00.000Z", "windowEnd": "...", "tag": "TagA", "count": 42}

with the tag as its TAGS and ``<tag>@<windowStart>`` as its KEYS. See
examples/README.md for running it locally and on a cluster.

Time zone: window times are written as ISO 8601 with their UTC offset, in Spark's
session time zone (``spark.sql.session.timeZone``): ``...Z`` in UTC, ``...+01:00`` in
Europe/Paris. The command sets that zone from ``--time-zone`` (default UTC) and prints
it, so its output is UTC unless asked otherwise. Spark aligns windows to UTC (minutes
and hours are the same everywhere; day windows start at midnight UTC).

With ``--available-now`` the command prints how many messages the run read; when
there were none it says so, and the connector logs the reason at WARNING (e.g.
``startingOffsets=latest`` on a new checkpoint, an empty topic, or a checkpoint that
already read everything).

Usage::

    spark-submit examples/windowed_counts.py --name-server 127.0.0.1:9876 \\
        --source orders --sink order-counts --checkpoint /tmp/order-counts-chk
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamWriter

from rocklet.spark import RockletDataSource

FORMAT = "rocklet"
#: ISO 8601 with the offset of the session time zone: "Z" when it is UTC.
TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"


def windowed_counts(events: DataFrame, window: str, watermark: str) -> DataFrame:
    """Count events per tag and tumbling window of event time, as sink rows.

    Args:
        events: Rows of the rocklet source.
        window: Window length, e.g. ``"1 minute"``.
        watermark: How late an event may arrive and still count, e.g. ``"1 minute"``.

    Returns:
        Rows with the sink's columns: ``body`` (JSON), ``tags``, ``keys``.
    """
    ts = F.get_json_object(F.col("body").cast("string"), "$.ts").cast("long")
    counts = (
        events.withColumn("eventTime", F.coalesce(F.timestamp_millis(ts), F.col("storeTimestamp")))
        .withColumn("tag", F.coalesce(F.col("tags"), F.lit("(none)")))
        .withWatermark("eventTime", watermark)
        .groupBy(F.window("eventTime", window), "tag")
        .count()
    )
    # date_format renders in the session time zone; the offset it appends keeps each
    # time exact whatever that zone is (a literal 'Z' would mislabel non-UTC times).
    start = F.date_format("window.start", TIME_FORMAT)
    end = F.date_format("window.end", TIME_FORMAT)
    body = F.to_json(
        F.struct(start.alias("windowStart"), end.alias("windowEnd"), F.col("tag"), F.col("count"))
    )
    return counts.select(
        body.alias("body"),
        F.col("tag").alias("tags"),
        F.concat_ws("@", F.col("tag"), start).alias("keys"),
    )


def build(
    spark: SparkSession,
    *,
    name_server: str,
    source: str,
    sink: str,
    checkpoint: str,
    window: str = "1 minute",
    watermark: str = "1 minute",
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
) -> DataStreamWriter:
    """The pipeline, ready to ``.start()`` (set a trigger first if you like).

    Args:
        spark: The session.
        name_server: Name server address(es), ``host:port[;host:port]``.
        source: Topic to read.
        sink: Topic to write the counts to.
        checkpoint: Checkpoint directory (a restart resumes from it).
        window: Window length.
        watermark: Allowed lateness.
        starting_offsets: Where a new checkpoint starts: earliest or latest.
        max_offsets_per_trigger: Cap on messages per micro-batch.

    Returns:
        The stream writer.
    """
    reader = (
        spark.readStream.format(FORMAT)
        .option("nameServer", name_server)
        .option("subscribe", source)
        .option("startingOffsets", starting_offsets)
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    counts = windowed_counts(reader.load(), window, watermark)
    return (
        counts.writeStream.format(FORMAT)
        .outputMode("append")
        .option("nameServer", name_server)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .queryName(f"windowed-counts-{source}-to-{sink}")
    )


def messages_read(query: StreamingQuery) -> tuple[int, int]:
    """How many messages a finished query read, and in how many micro-batches.

    Args:
        query: A query that has terminated.

    Returns:
        ``(messages, batches)`` over its recent progress reports.
    """
    reports = [p for p in query.recentProgress if p.numInputRows]
    return sum(p.numInputRows for p in reports), len(reports)


def report_run(query: StreamingQuery, source: str, out: TextIO) -> None:
    """Print what an availableNow run read, and where to look when it read nothing.

    Args:
        query: The finished query.
        source: The topic it read.
        out: Where the lines go.
    """
    messages, batches = messages_read(query)
    if messages:
        out.write(f"read {messages} message(s) from {source} in {batches} micro-batch(es)\n")
        return
    out.write(
        f"read no message from {source}: the rocklet source logged why at WARNING above "
        "(startingOffsets=latest on a new checkpoint skips what is stored; an empty "
        "topic; or a checkpoint that already read everything)\n"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Run the pipeline until stopped, or until caught up with ``--available-now``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--name-server", default="127.0.0.1:9876")
    parser.add_argument("--source", required=True, help="topic to read")
    parser.add_argument("--sink", required=True, help="topic to write the counts to")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory")
    parser.add_argument("--window", default="1 minute")
    parser.add_argument("--watermark", default="1 minute")
    parser.add_argument("--starting-offsets", default="earliest", choices=["earliest", "latest"])
    parser.add_argument("--max-offsets-per-trigger", type=int)
    parser.add_argument(
        "--available-now", action="store_true", help="process what is there, then stop"
    )
    parser.add_argument(
        "--time-zone",
        default="UTC",
        help="zone of the window times written (spark.sql.session.timeZone; default UTC)",
    )
    args = parser.parse_args(argv)
    spark = (
        SparkSession.builder.appName("rocklet-windowed-counts")
        .config("spark.sql.session.timeZone", args.time_zone)
        .getOrCreate()
    )
    zone = spark.conf.get("spark.sql.session.timeZone")
    print(f"window times are written in the {zone} time zone (--time-zone)", flush=True)
    # Installed normally, Spark finds the format by itself; registering it here also
    # covers editable installs and --py-files, which its automatic lookup may miss.
    spark.dataSource.register(RockletDataSource)
    writer = build(
        spark,
        name_server=args.name_server,
        source=args.source,
        sink=args.sink,
        checkpoint=args.checkpoint,
        window=args.window,
        watermark=args.watermark,
        starting_offsets=args.starting_offsets,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    query.awaitTermination()
    if args.available_now:
        report_run(query, args.source, sys.stdout)


if __name__ == "__main__":
    main()
