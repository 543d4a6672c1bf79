"""Queue ranges: the source's input partitions, how they are planned and read.

A :class:`QueueRange` is ``[start, end)`` of one queue plus everything an executor
needs to read it. Executors only see the pickled partition (state set on the driver is not
visible in ``read()``), so it is self-contained.

Reading is deterministic for a given range, which is what lets Spark replay a
micro-batch after a restart: the same offsets give the same rows, whatever arrived
since. Rows filtered out by ``subExpression`` are skipped but still consumed.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pyspark.sql.datasource import InputPartition

from rocklet.client.errors import SubscriptionGroupNotExistError
from rocklet.client.pull_api import PullResult, PullStatus, RawPullResult
from rocklet.client.selector import TAG, MessageSelector
from rocklet.protocol.acl import Credentials
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.filter import parse_tag_expression
from rocklet.spark.broker import Cluster
from rocklet.spark.columns import RecordColumns
from rocklet.spark.errors import group_not_found
from rocklet.spark.options import DEFAULT_CONSUMER_GROUP, SourceOptions
from rocklet.spark.tls_options import NO_TLS, TlsOptions
from rocklet.transport.logs import get_logger

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["DataLossError", "QueueRange", "plan_ranges", "read_range"]

_log = get_logger(__name__)

#: Rows per yielded Arrow batch, and bytes: whichever comes first.
FLUSH_ROWS: Final = 4096
FLUSH_BYTES: Final = 8 << 20
#: Pulls in a row that may answer "retry" without progress (a file being deleted).
_MAX_STALLS: Final = 3
#: Pulls of one range in flight at once.
_PULLS_IN_FLIGHT: Final = 4


class DataLossError(RuntimeError):
    """Offsets the query needs are no longer (or not yet) stored, and failOnDataLoss is on."""


@dataclass(frozen=True)
class QueueRange(InputPartition):
    """One queue's offsets ``[start, end)`` and how to read them.

    Attributes:
        name_server: Where the executor finds the queue's broker.
        mq: The queue.
        start: First offset to read.
        end: Offset after the last to read.
        sub_expression: Tag filter, or an SQL92 selector (``expression_type``).
        expression_type: ``"TAG"`` or ``"SQL92"``.
        pull_batch_size: Messages asked per pull.
        pull_timeout_ms: Timeout of each pull.
        fail_on_data_loss: Fail (True) or skip with a warning (False) when part of
            the range is gone.
        consumer_group: The consumer group the pulls name.
        tls: TLS of the executor's connections.
        credentials: ACL account the pulls are signed with, or ``None``.
    """

    name_server: str
    mq: MessageQueue
    start: int
    end: int
    sub_expression: str = "*"
    expression_type: str = TAG
    pull_batch_size: int = 32
    pull_timeout_ms: int = 3000
    fail_on_data_loss: bool = True
    consumer_group: str = DEFAULT_CONSUMER_GROUP
    tls: TlsOptions = NO_TLS
    credentials: Credentials | None = None

    def __repr__(self) -> str:
        mq = self.mq
        return f"QueueRange({mq.topic} {mq.broker_name}:{mq.queue_id} [{self.start}, {self.end}))"


def plan_ranges(
    start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int], opts: SourceOptions
) -> list[QueueRange]:
    """One partition per queue with data (Kafka's rule), split for ``minPartitions``.

    Args:
        start: First offset per queue (queues missing here are not read).
        end: End offset per queue.
        opts: Source options (copied into each partition).

    Returns:
        Partitions in queue order; empty ranges are left out.
    """
    spans = [(mq, start[mq], end[mq]) for mq in sorted(end) if mq in start and end[mq] > start[mq]]
    total = sum(e - s for _, s, e in spans)
    piece = total
    if opts.min_partitions and opts.min_partitions > len(spans) and total:
        piece = max(1, math.ceil(total / opts.min_partitions))
    out: list[QueueRange] = []
    for mq, s, e in spans:
        pieces = max(1, math.ceil((e - s) / piece)) if piece else 1
        edges = [s + (e - s) * i // pieces for i in range(pieces + 1)]
        out.extend(
            QueueRange(
                name_server=opts.name_server,
                mq=mq,
                start=lo,
                end=hi,
                sub_expression=opts.sub_expression,
                expression_type=opts.expression_type,
                pull_batch_size=opts.pull_batch_size,
                pull_timeout_ms=opts.pull_timeout_ms,
                fail_on_data_loss=opts.fail_on_data_loss,
                consumer_group=opts.consumer_group,
                tls=opts.tls,
                credentials=opts.credentials,
            )
            for lo, hi in itertools.pairwise(edges)
            if hi > lo
        )
    return out


def read_range(part: QueueRange) -> Iterator[pa.RecordBatch]:
    """Read one range on an executor, as Arrow record batches.

    Runs its own event loop and SDK client for the duration of the read and closes
    both when the iterator ends or is closed early (a ``limit`` query).

    Args:
        part: The range.

    Yields:
        Batches of rows in offset order.

    Raises:
        DataLossError: Part of the range is gone and ``fail_on_data_loss`` is on.
        ConsumerGroupNotFoundError: The broker no longer has the consumer group (the
            driver checked it when planning; someone deleted it since).
    """
    with asyncio.Runner() as runner:
        cluster = Cluster(
            part.name_server,
            group=part.consumer_group,
            timeout_s=part.pull_timeout_ms / 1000,
            tls=part.tls.context(),
            credentials=part.credentials,
        )
        runner.run(cluster.__aenter__())
        try:
            yield from _read(runner, cluster, part)
        except SubscriptionGroupNotExistError as exc:
            broker = {part.mq.broker_name: exc.addr}
            raise group_not_found(part.consumer_group, part.name_server, broker) from exc
        finally:
            runner.run(cluster.__aexit__(None, None, None))


def _read(runner: asyncio.Runner, cluster: Cluster, part: QueueRange) -> Iterator[pa.RecordBatch]:
    # Each turn of the event loop reads a chunk of offsets with several pulls in flight;
    # entering the loop costs far more than a pull, so it is entered once per chunk.
    # The pull bodies stay raw: RecordColumns builds the columns from them in bulk.
    # An SQL92 selector is applied by the broker alone (RocketMQ's clients do not check
    # it again); a tag filter is re-checked, since the broker filters by tag hash.
    tags = parse_tag_expression(part.sub_expression) if part.expression_type == TAG else None
    rows = RecordColumns(part.mq.broker_name, tags)
    offset, span = part.start, part.pull_batch_size * _PULLS_IN_FLIGHT * 8
    size = 0
    while offset < part.end:
        high = min(part.end, offset + span)
        chunk: list[_Window] = []
        # The coroutine returns nothing on purpose: asyncio.Runner.run, in the main
        # thread, checks its SIGINT handler with signal.getsignal, whose failed enum
        # lookup formats the repr of the finished task, result included: megabytes of
        # bodies, a third of a millisecond per chunk.
        runner.run(_read_chunk(cluster, part, offset, high, chunk))
        chunk_bytes = 0
        for body, low, top in chunk:
            chunk_bytes += rows.add(body, low, top)
        size += chunk_bytes
        offset = high
        if len(rows) >= FLUSH_ROWS or size >= FLUSH_BYTES:
            yield rows.flush()
            size = 0
        # Keep a chunk's bodies around FLUSH_BYTES: large messages, smaller chunks.
        if chunk_bytes > FLUSH_BYTES:
            span = max(part.pull_batch_size, span // 2)
    if len(rows):
        yield rows.flush()


#: One pull's records, raw, and the queue offsets ``[low, high)`` of them to keep.
_Window = tuple[bytes, int, int]


async def _read_chunk(
    cluster: Cluster, part: QueueRange, low: int, high: int, out: list[_Window]
) -> None:
    """Offsets ``[low, high)`` as windows of one pull each, a few at a time, into ``out``."""
    gate = asyncio.Semaphore(_PULLS_IN_FLIGHT)

    async def window(start: int) -> list[_Window]:
        async with gate:
            return await _read_window(cluster, part, start, min(high, start + part.pull_batch_size))

    tasks = [asyncio.ensure_future(window(w)) for w in range(low, high, part.pull_batch_size)]
    try:
        found = await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    out.extend(body for bodies in found for body in bodies)


async def _read_window(cluster: Cluster, part: QueueRange, low: int, high: int) -> list[_Window]:
    """Pull ``[low, high)`` of the queue: usually one pull, more if the broker cut it short.

    With a tag filter the broker returns matching messages from past ``high`` too
    (it scans until it has enough); those belong to the next window and are dropped
    (by :meth:`RecordColumns.add`, given the window).
    """
    out: list[_Window] = []
    offset, stalls = low, 0
    consumer = cluster.consumer
    selector = MessageSelector(part.expression_type, part.sub_expression)
    while offset < high:
        # Cluster.pull decodes into SDK messages; the raw records go to RecordColumns.
        result = await consumer.pull_raw(part.mq, offset, high - offset, expression=selector)
        nxt = _advance(part, offset, high, result)
        if result.body:
            out.append((result.body, offset, high))
        if nxt <= offset:
            stalls += 1
            if stalls > _MAX_STALLS:
                raise RuntimeError(
                    f"{part!r}: the broker keeps answering {result.status.value} at {offset}"
                )
            continue
        offset, stalls = nxt, 0
    return out


def _advance(part: QueueRange, offset: int, high: int, result: PullResult | RawPullResult) -> int:
    """Where the next pull starts; reports offsets that are gone."""
    if result.status is PullStatus.FOUND:
        return result.next_begin_offset
    if result.min_offset > offset:
        lost_to = min(result.min_offset, high)
        _data_loss(
            part,
            f"offsets [{offset}, {lost_to}) were deleted (retention) before they were read; "
            f"the queue now starts at {result.min_offset}",
        )
        return lost_to
    if result.status is PullStatus.NO_MATCHED_MSG:
        return result.next_begin_offset
    # NO_NEW_MSG / OFFSET_ILLEGAL at or past the queue's end: the range was planned
    # against a larger max offset (the broker lost data or its store was replaced).
    _data_loss(
        part,
        f"the queue ends at {result.max_offset} but the batch was planned up to {part.end}",
    )
    return high


def _data_loss(part: QueueRange, detail: str) -> None:
    message = f"data loss in {part!r}: {detail}"
    if part.fail_on_data_loss:
        raise DataLossError(f"{message}. Set failOnDataLoss=false to skip what is gone and go on.")
    _log.warning("skipping lost offsets (failOnDataLoss=false)", detail=message)
