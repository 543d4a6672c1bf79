"""The streaming source (``spark.readStream.format("rocklet")``): micro-batches.

Spark calls these methods in a long-lived driver-side runner process, one per query
run, so state kept here (the availableNow target, the
last latest offsets) lives for one run only; anything a restart needs is in the
checkpointed offsets.

Offsets: ``{"<topic>": {"<broker>:<queueId>": next}}`` in canonical order
(:mod:`rocklet.spark.offsets`). Queue discovery happens at every ``latestOffset``:
a queue or topic that appears is first *registered* at its earliest offset (its end
entry equals its start, no rows), and read from there by the next micro-batch. So
``partitions(start, end)`` needs no lookup at all: a replayed batch after a restart
reads exactly the rows it read the first time.

A subscribed topic that does not exist fails the query (at its start, or when a topic
the checkpoint does not hold yet is missing); one the checkpoint holds may vanish. The
consumer group is checked once per run. An availableNow run with nothing to read logs
why at WARNING (:mod:`rocklet.spark.empty_run`).

With ``commitOffsets``, the end of each completed micro-batch is written as the
consumer group's offsets (:func:`rocklet.spark.progress.commit_group_offsets`). Spark
calls :meth:`RockletStreamReader.commit` with a batch's end only when it plans the
*next* batch (pyspark 4.3's ``MicroBatchExecution``: after the offset log is written),
which would leave the group a batch behind while no new data arrives, and never record
the last batch of an availableNow run. So the reader also writes the ``start`` Spark
passes to ``latestOffset``: at every trigger, that is the end of the last batch the
checkpoint records as complete (or, in a new checkpoint, where it starts, which is not
written). Each offset is written once per run; ``commit`` retries what failed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from rocklet.spark.broker import Cluster, run_with_cluster
from rocklet.spark.empty_run import reachable_rows, why_nothing_to_read
from rocklet.spark.offsets import Offsets, from_json, limit_offsets, to_json
from rocklet.spark.options import SourceOptions
from rocklet.spark.planning import Snapshot, resolve_offsets, take_snapshot
from rocklet.spark.progress import commit_group_offsets
from rocklet.spark.ranges import DataLossError, QueueRange, plan_ranges, read_range
from rocklet.transport.logs import get_logger

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["RockletStreamReader", "next_end"]

_log = get_logger(__name__)


def next_end(
    begin: Mapping[Any, int],
    snapshot: Snapshot,
    *,
    target: Mapping[Any, int] | None,
    max_rows: int | None,
    fail_on_data_loss: bool,
) -> Offsets:
    """The end offset of the next micro-batch (pure: the stream reader's policy).

    Args:
        begin: The batch's start (the previous end).
        snapshot: The queues now, with their stored ranges.
        target: With ``trigger(availableNow=True)``: the latest offsets when the run
            began; no queue goes past it, queues not in it do not move.
        max_rows: Cap on rows across queues (``maxOffsetsPerTrigger``), or None.
        fail_on_data_loss: Raise when a queue's end moved backwards.

    Returns:
        The end: every queue of ``begin`` (vanished ones keep their offset), new
        queues registered at their earliest offset.

    Raises:
        DataLossError: A queue now ends before ``begin`` and ``fail_on_data_loss``.
    """
    end: Offsets = dict(begin)
    starts: Offsets = {}
    reachable: Offsets = {}
    for mq, bounds in snapshot.bounds.items():
        if mq not in begin:
            end[mq] = bounds.min_offset  # registered; read from the next batch on
            continue
        if bounds.max_offset < begin[mq]:
            detail = (
                f"queue {mq.broker_name}:{mq.queue_id} of {mq.topic!r} now ends at "
                f"{bounds.max_offset}, before the checkpoint's {begin[mq]}"
            )
            if fail_on_data_loss:
                raise DataLossError(
                    f"data loss: {detail}. Set failOnDataLoss=false to go on from there."
                )
            _log.warning("queue moved backwards; following it", detail=detail)
            end[mq] = bounds.max_offset
            continue
        high = bounds.max_offset
        if target is not None:
            high = min(high, max(begin[mq], target.get(mq, begin[mq])))
        starts[mq] = begin[mq]
        reachable[mq] = high
    if max_rows is not None:
        reachable = limit_offsets(starts, reachable, max_rows)
    end.update(reachable)
    return end


class RockletStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over the subscribed queues.

    Args:
        opts: Parsed source options (``streaming=True``).
    """

    def __init__(self, opts: SourceOptions) -> None:
        self._opts = opts
        self._target: Offsets | None = None
        self._latest: Offsets | None = None
        self._group_checked = False
        self._new_checkpoint = False
        self._first_batch_planned = False
        self._replayed_rows = False
        # commitOffsets: where a new checkpoint starts (never written: no batch
        # completed there), and per queue what this run tried to write and wrote.
        self._initial: dict[str, Any] | None = None
        self._attempted: Offsets = {}
        self._written: Offsets = {}

    def _snapshot(
        self,
        *,
        with_times: bool = False,
        require_topics: bool = True,
        known_topics: frozenset[str] = frozenset(),
        group_offsets: Offsets | None = None,
    ) -> Snapshot:
        opts = self._opts
        check_group = not self._group_checked

        async def snapshot(cluster: Cluster) -> Snapshot:
            snap = await take_snapshot(
                cluster,
                opts,
                with_times=with_times,
                require_topics=require_topics,
                known_topics=known_topics,
                check_group=check_group,
            )
            if group_offsets:  # same connections, after the snapshot fetched the routes
                self._written.update(await commit_group_offsets(cluster, group_offsets))
            return snap

        snap = run_with_cluster(
            opts.name_server,
            snapshot,
            group=opts.consumer_group,
            tls=opts.tls.context(),
            credentials=opts.credentials,
        )
        # Checked once there was a queue to ask about: a run that starts before its
        # topics have queues asks again later.
        self._group_checked = self._group_checked or bool(snap.bounds)
        return snap

    def initialOffset(self) -> dict[str, Any]:
        """Where a new checkpoint starts: ``startingOffsets`` or ``startingTimestamp``.

        Raises:
            TopicNotFoundError: A subscribed topic does not exist.
            ConsumerGroupNotFoundError: A broker does not have the consumer group.
        """
        snap = self._snapshot(with_times=True)
        self._new_checkpoint = True
        if not snap.bounds and self._opts.subscription.pattern is not None:
            _log.warning(
                "subscribePattern matches no topic yet; matching topics are read as they appear",
                subscription=self._opts.subscription.describe(),
                name_server=self._opts.name_server,
            )
        start = resolve_offsets(self._opts.starting, snap, option="startingOffsets")
        _log.info("stream starts", start=to_json(start))
        self._initial = dict(to_json(start))
        return dict(self._initial)

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxOffsetsPerTrigger`` as ReadMaxRows, else everything available."""
        cap = self._opts.max_offsets_per_trigger
        return ReadAllAvailable() if cap is None else ReadMaxRows(cap)

    def prepareForTriggerAvailableNow(self) -> None:
        """Record what is stored now: this run reads up to there and stops."""
        # Lenient: whether a missing topic is an error depends on the checkpoint, which
        # initialOffset / latestOffset see.
        self._target = self._snapshot(require_topics=False).maxima()
        _log.info("availableNow target", target=to_json(self._target))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The next batch's end (``start`` itself when there is nothing new).

        Args:
            start: The previous end, from the checkpoint.
            limit: The read limit Spark applies to this batch.

        Returns:
            The end offsets, canonical.

        Raises:
            TopicNotFoundError: A subscribed topic the checkpoint does not hold yet
                does not exist.
            DataLossError: A queue now ends before ``start`` and failOnDataLoss is on.
        """
        begin = from_json(start)
        due: Offsets = {}
        if self._opts.commit_offsets and start != self._initial:
            # ``start`` is the end of the last batch the checkpoint records as complete.
            due = _changed(begin, self._attempted)
            self._attempted.update(due)
        snap = self._snapshot(known_topics=frozenset(mq.topic for mq in begin), group_offsets=due)
        self._latest = {**begin, **snap.maxima()}
        if self._target is not None and not (self._first_batch_planned or self._replayed_rows):
            self._explain_if_empty(begin, snap, self._target)
        self._first_batch_planned = True
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = next_end(
            begin,
            snap,
            target=self._target,
            max_rows=max_rows,
            fail_on_data_loss=self._opts.fail_on_data_loss,
        )
        return dict(to_json(end))

    def _explain_if_empty(self, begin: Offsets, snap: Snapshot, target: Offsets) -> None:
        if reachable_rows(begin, snap, target):
            return
        # The reason is in the event text: unconfigured, Python's last-resort handler
        # prints this dict on the Spark worker's stderr, and the event comes first.
        _log.warning(
            "this availableNow run has nothing to read: "
            + why_nothing_to_read(self._opts, snap, new_checkpoint=self._new_checkpoint),
            name_server=self._opts.name_server,
            start=to_json(begin),
        )

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """What the brokers hold now (shown as ``latestOffset`` in query progress: lag)."""
        return None if self._latest is None else dict(to_json(self._latest))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """The ranges of one micro-batch: a pure function of ``(start, end)``.

        Raises:
            DataLossError: A queue's end is before its start and failOnDataLoss is on
                (a replay of a batch planned when the queue moved backwards).
        """
        begin, stop = from_json(start), from_json(end)
        for mq, last in stop.items():
            first = begin.get(mq)
            if first is not None and last < first:
                detail = f"{mq.topic} {mq.broker_name}:{mq.queue_id} went from {first} to {last}"
                if self._opts.fail_on_data_loss:
                    raise DataLossError(f"data loss: {detail}; set failOnDataLoss=false to go on")
                _log.warning("skipping a queue that moved backwards", detail=detail)
        ranges = plan_ranges(begin, stop, self._opts)
        if ranges and not self._first_batch_planned:
            self._replayed_rows = True  # a restart replays a batch before planning new ones
        return ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one range (executor)."""
        if not isinstance(partition, QueueRange):
            return iter(())
        return read_range(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """A batch is complete: with ``commitOffsets``, write what is not written yet.

        The checkpoint stays the source of truth (as with Kafka's source): a failed
        write logs a WARNING and the query goes on. Spark calls this when it plans the
        next batch; :meth:`latestOffset` usually wrote these offsets already.
        """
        _log.debug("batch committed", end=end)
        if not self._opts.commit_offsets:
            return
        due = _changed(from_json(end), self._written)
        if not due:
            return
        self._attempted.update(due)
        opts = self._opts
        try:
            written = run_with_cluster(
                opts.name_server,
                lambda cluster: commit_group_offsets(cluster, due),
                group=opts.consumer_group,
                tls=opts.tls.context(),
                credentials=opts.credentials,
            )
        except Exception as exc:  # the cluster could not even be reached: dashboards only
            _log.warning(
                "could not write the consumer group's offsets (commitOffsets); the query "
                "goes on, its checkpoint is unaffected",
                group=opts.consumer_group,
                name_server=opts.name_server,
                error=f"{type(exc).__name__}: {exc}",
                not_written=to_json(due),
            )
            return
        self._written.update(written)

    def stop(self) -> None:
        """Nothing to release: no connection outlives a call."""


def _changed(offsets: Offsets, done: Offsets) -> Offsets:
    """The queues of ``offsets`` whose offset differs from the one in ``done``."""
    return {mq: offset for mq, offset in offsets.items() if done.get(mq) != offset}
