"""A stream's progress for operators: per-topic figures, and the consumer group's offsets.

Two views, for lag dashboards:

* :func:`topic_progress` reads one of Spark's ``StreamingQueryProgress`` reports and
  sums, per topic, the rows a micro-batch covered and how far it is behind the brokers.
  Spark reports, for each source, the batch's ``startOffset`` and ``endOffset`` and the
  ``latestOffset`` the source saw when it planned the batch; the connector's offsets are
  per-queue message counters (:mod:`rocklet.spark.offsets`), so a topic's rows are
  ``sum(end - start)`` and its lag ``sum(latest - end)`` over its queues.
* :func:`commit_group_offsets` writes a completed batch's end offsets as a consumer
  group's offsets on the brokers (the ``commitOffsets`` option), so RocketMQ's
  ``mqadmin consumerProgress`` and ``rocklet admin consumerProgress`` show the stream.

Bytes per topic are not available: a source reports them through Spark's custom source
metrics (``ReportsSourceMetrics``), which pyspark 4.3 does not offer to Python
streaming sources (its ``PythonMicroBatchStream`` does not implement that interface).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.spark.offsets import Offsets, from_json, queue_key, to_json
from rocklet.transport.logs import get_logger

if TYPE_CHECKING:
    from rocklet.spark.broker import Cluster

__all__ = ["TopicProgress", "commit_group_offsets", "topic_progress"]

_log = get_logger(__name__)

#: How an absent offset reaches Python: ``null`` in the JSON, and ``"None"`` when
#: pyspark turns a Java progress object into strings (``str(None)``).
_NO_OFFSET = frozenset({"", "null", "None"})


@dataclass(frozen=True)
class TopicProgress:
    """One topic's share of a micro-batch, from Spark's progress report.

    Attributes:
        topic: The topic.
        rows: Messages the batch's offsets cover on this topic, ``sum(end - start)``
            over its queues. Offsets also advance over the messages a
            ``subExpression`` leaves out, so this can exceed the rows Spark counted
            (``numInputRows``). ``None`` when the report has no ``startOffset``: Spark
            gives none for the first batch of a new checkpoint.
        lag: Messages stored but not read yet when the batch was planned,
            ``sum(latest - end)``. ``None`` when the report has no ``latestOffset``
            (a batch replayed after a restart is not planned again).
        queues: The queues counted, ``"<brokerName>:<queueId>"``, sorted.
    """

    topic: str
    rows: int | None
    lag: int | None
    queues: tuple[str, ...]


def topic_progress(progress: Mapping[str, Any] | str) -> dict[str, TopicProgress]:
    """Rows and lag per topic of one micro-batch, over the query's ``rocklet`` sources.

    Only sources whose ``endOffset`` has this connector's shape
    (``{"<topic>": {"<brokerName>:<queueId>": offset}}``) are counted; other sources of
    the query (Kafka, files, a rate source...) are left out. A topic read by two
    ``rocklet`` sources of one query has their figures added up.

    Args:
        progress: ``query.lastProgress`` (or an item of ``query.recentProgress``, or
            the progress of a ``StreamingQueryListener`` event), its ``.json`` text,
            or that text decoded.

    Returns:
        Topic -> its progress, sorted by topic.

    Raises:
        ValueError: ``progress`` is not a streaming query progress report.
    """
    report = json.loads(progress) if isinstance(progress, str) else progress
    sources = report.get("sources") if isinstance(report, Mapping) else None
    if not isinstance(sources, list):
        raise ValueError("not a streaming query progress (no 'sources' list)")
    totals: dict[str, TopicProgress] = {}
    for source in sources:
        for topic, figures in _source_topics(source).items():
            totals[topic] = _add(totals[topic], figures) if topic in totals else figures
    return dict(sorted(totals.items()))


class _NotOurs(Exception):
    """An offset of another kind of source."""


def _offsets(value: object) -> Offsets | None:
    """One offset of a source's report: ours, absent (None), or raises _NotOurs."""
    if value is None or (isinstance(value, str) and value.strip() in _NO_OFFSET):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise _NotOurs from None
    if not isinstance(value, Mapping):
        raise _NotOurs
    try:
        return from_json(value)
    except ValueError:
        raise _NotOurs from None


def _source_topics(source: object) -> dict[str, TopicProgress]:
    if not isinstance(source, Mapping):
        return {}
    try:
        end = _offsets(source.get("endOffset"))
        start = _offsets(source.get("startOffset"))
        latest = _offsets(source.get("latestOffset"))
    except _NotOurs:
        return {}
    if end is None:
        return {}
    out: dict[str, TopicProgress] = {}
    for topic in sorted({mq.topic for mq in end}):
        queues = sorted(mq for mq in end if mq.topic == topic)
        out[topic] = TopicProgress(
            topic=topic,
            rows=None if start is None else _rows(queues, start, end),
            lag=None if latest is None else _lag(queues, end, latest),
            queues=tuple(queue_key(mq) for mq in queues),
        )
    return out


def _rows(queues: Iterable[MessageQueue], start: Offsets, end: Offsets) -> int:
    # A queue missing from the start was registered by this batch at its first offset
    # (rocklet.spark.stream_source): nothing of it was read yet. A queue that moved
    # backwards (failOnDataLoss=false) read nothing either.
    return sum(max(0, end[mq] - start[mq]) for mq in queues if mq in start)


def _lag(queues: Iterable[MessageQueue], end: Offsets, latest: Offsets) -> int:
    return sum(max(0, latest[mq] - end[mq]) for mq in queues if mq in latest)


def _add(a: TopicProgress, b: TopicProgress) -> TopicProgress:
    return TopicProgress(
        topic=a.topic,
        rows=None if a.rows is None or b.rows is None else a.rows + b.rows,
        lag=None if a.lag is None or b.lag is None else a.lag + b.lag,
        queues=tuple(sorted(set(a.queues) | set(b.queues))),
    )


async def commit_group_offsets(cluster: Cluster, offsets: Mapping[MessageQueue, int]) -> Offsets:
    """Write ``offsets`` as the consumer offsets of :attr:`Cluster.group`.

    One UPDATE_CONSUMER_OFFSET per queue, all at once, through the SDK pull consumer's
    ``commit``: to the queue's master (a slave while the master is away), as RocketMQ's
    consumers commit. Nothing is raised for a broker that refuses or cannot be reached:
    these offsets only feed dashboards (the checkpoint is the truth), so the failure is
    logged at WARNING and the stream goes on.

    Args:
        cluster: An open cluster client whose group is the one to write.
        offsets: Next offset to read, per queue.

    Returns:
        The offsets written (those of the queues whose broker accepted).
    """
    queues = sorted(offsets)
    # The commit needs each queue's broker address: routes of topics the snapshot did
    # not just fetch (no longer subscribed, say) are asked for here, or come from cache.
    await asyncio.gather(
        *(cluster.instance.topic_route(t) for t in sorted({mq.topic for mq in queues})),
        return_exceptions=True,
    )
    results = await asyncio.gather(
        *(cluster.consumer.commit(mq, offsets[mq]) for mq in queues), return_exceptions=True
    )
    written: Offsets = {}
    failed: dict[MessageQueue, int] = {}
    errors: list[str] = []
    for mq, result in zip(queues, results, strict=True):
        if result is None:
            written[mq] = offsets[mq]
        elif isinstance(result, Exception):
            failed[mq] = offsets[mq]
            errors.append(f"{mq.topic} {queue_key(mq)}: {result}")
        else:
            raise result  # cancelled: not a broker's answer
    if failed:
        _log.warning(
            "could not write the consumer group's offsets (commitOffsets); the query goes "
            "on, its checkpoint is unaffected",
            group=cluster.group,
            name_server=cluster.name_server,
            error=errors[0],
            not_written=to_json(failed),
        )
    if written:
        _log.debug("consumer group offsets written", group=cluster.group, offsets=to_json(written))
    return written
