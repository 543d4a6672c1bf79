"""The batch source (``spark.read.format("rocklet")``): a fixed range of every queue.

``partitions()`` runs once on the driver while Spark plans the query: it discovers the
subscribed queues, resolves ``startingOffsets`` (default earliest) and
``endingOffsets`` (default latest) against their stored ranges, and returns one
:class:`~rocklet.spark.ranges.QueueRange` per queue with data. ``read()`` runs on the
executors.

Filter pushdown (:mod:`rocklet.spark.pushdown`): the reader built for Spark's
filter-pushdown planner is a :class:`FilteringBatchReader`
(:meth:`~rocklet.spark.datasource.RockletDataSource.reader` decides), which narrows the
planned queues, their starts and the pulls' tag filter to the query's ``WHERE``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition

from rocklet.protocol.sql92 import TAG
from rocklet.spark.broker import Cluster, run_with_cluster
from rocklet.spark.offsets import Offsets, to_json
from rocklet.spark.options import RockletOptionError, SourceOptions
from rocklet.spark.planning import Snapshot, resolve_offsets, take_snapshot
from rocklet.spark.pushdown import NO_PUSHDOWN, Pushdown, translate
from rocklet.spark.ranges import QueueRange, plan_ranges, read_range
from rocklet.transport.logs import get_logger

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["FilteringBatchReader", "RockletBatchReader"]

_log = get_logger(__name__)


class RockletBatchReader(DataSourceReader):
    """Reads ``[startingOffsets, endingOffsets)`` of every subscribed queue once.

    Args:
        opts: Parsed source options (``streaming=False``).
    """

    def __init__(self, opts: SourceOptions) -> None:
        self._opts = opts
        self._pushdown: Pushdown = NO_PUSHDOWN

    def partitions(self) -> list[InputPartition]:
        """Plan the ranges (driver, once).

        Returns:
            One partition per queue with data (more with ``minPartitions``).

        Raises:
            RockletOptionError: A queue's start is after its end, or the offsets JSON
                names something that does not exist.
            TopicNotFoundError: A named topic does not exist, or the pattern matches
                none.
            ConsumerGroupNotFoundError: A broker does not have the consumer group.
        """
        opts, push = self._opts, self._pushdown

        async def snapshot(cluster: Cluster) -> tuple[Snapshot, Offsets]:
            snap = await take_snapshot(
                cluster, opts, with_times=True, require_match=True, check_group=True
            )
            when = push.time_lookup_ms
            if when is None:
                return snap, {}
            kept = [mq for mq in snap.bounds if push.keeps(mq)]
            return snap, await cluster.offsets_for_time(kept, when)

        snap, by_time = run_with_cluster(
            opts.name_server,
            snapshot,
            group=opts.consumer_group,
            tls=opts.tls.context(),
            credentials=opts.credentials,
        )
        start = resolve_offsets(opts.starting, snap, option="startingOffsets")
        end = resolve_offsets(opts.ending, snap, option="endingOffsets")
        for mq, first in start.items():
            if first > end[mq]:
                raise RockletOptionError(
                    f"startingOffsets {first} is after endingOffsets {end[mq]} for queue "
                    f"{mq.broker_name}:{mq.queue_id} of {mq.topic!r}"
                )
        # After the check above: a start moved past its end by the filters reads nothing.
        start = push.narrow(start, by_time)
        expression = push.sub_expression(opts.sub_expression)
        ranges = (
            []
            if expression is None  # the tags asked for and subExpression share none
            else plan_ranges(start, end, dataclasses.replace(opts, sub_expression=expression))
        )
        _log.info(
            "batch read planned",
            subscription=opts.subscription.describe(),
            pushed=push.describe(),
            start=to_json(start),
            end=to_json(end),
            partitions=len(ranges),
        )
        return list(ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one range (executor).

        Args:
            partition: A :class:`QueueRange`, or Spark's placeholder when there was
                nothing to read.

        Returns:
            Arrow batches of rows.
        """
        if not isinstance(partition, QueueRange):
            return iter(())
        return read_range(partition)


class FilteringBatchReader(RockletBatchReader):
    """The batch reader that takes Spark's pushed filters (Spark 4.1+, pushdown on).

    Spark calls :meth:`pushFilters` once, on the driver, before :meth:`partitions`.
    """

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Keep what the read can apply; return what Spark must still evaluate.

        Args:
            filters: The conjuncts of the query's ``WHERE`` Spark can express.

        Returns:
            The filters left to Spark (the ``storeTimestamp`` bounds among them).
        """
        self._pushdown, left = translate(filters, tags=self._opts.expression_type == TAG)
        # explain("formatted") lists only the filters Spark no longer evaluates, so
        # the time bounds, which narrow the read too, show only here.
        _log.info("filters pushed", pushed=self._pushdown.describe(), left_to_spark=len(left))
        return left
