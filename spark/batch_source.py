"""The batch source (``spark.read.format("rocklet")``): a fixed range of every queue.

``partitions()`` runs once on the driver while Spark plans the query: it discovers the
subscribed queues, resolves ``startingOffsets`` (default earliest) and
``endingOffsets`` (default latest) against their stored ranges, and returns one
:class:`~rocklet.spark.ranges.QueueRange` per queue with data. ``read()`` runs on the
executors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceReader, InputPartition

from rocklet.spark.broker import Cluster, run_with_cluster
from rocklet.spark.offsets import to_json
from rocklet.spark.options import RockletOptionError, SourceOptions
from rocklet.spark.planning import Snapshot, resolve_offsets, take_snapshot
from rocklet.spark.ranges import QueueRange, plan_ranges, read_range
from rocklet.transport.logs import get_logger

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["RockletBatchReader"]

_log = get_logger(__name__)


class RockletBatchReader(DataSourceReader):
    """Reads ``[startingOffsets, endingOffsets)`` of every subscribed queue once.

    Args:
        opts: Parsed source options (``streaming=False``).
    """

    def __init__(self, opts: SourceOptions) -> None:
        self._opts = opts

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
        opts = self._opts

        async def snapshot(cluster: Cluster) -> Snapshot:
            return await take_snapshot(
                cluster, opts, with_times=True, require_match=True, check_group=True
            )

        snap = run_with_cluster(
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
        ranges = plan_ranges(start, end, opts)
        _log.info(
            "batch read planned",
            subscription=opts.subscription.describe(),
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
