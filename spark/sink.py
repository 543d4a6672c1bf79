"""The sink: ``df.write`` / ``df.writeStream`` ``.format("rocklet")``.

Each Spark task sends its rows with the SDK's :class:`~rocklet.client.producer.Producer`, in
batches (SEND_BATCH_MESSAGE) of one topic, several in flight, and returns only when
the broker acknowledged every one. Columns: ``body`` (required, binary or string),
``topic`` (the ``topic`` option overrides it), ``tags``, ``keys`` (a string of
space-separated keys, or an array of strings) and ``properties`` (map); other columns
are ignored, as Spark's Kafka sink does, so a source DataFrame can be written as is.
The batch bodies are built from each Arrow batch's columns at once
(:mod:`rocklet.spark.sink_batches`); rows that path does not build exactly as the SDK
would become SDK messages one by one (:func:`rows_to_messages`).
Property names RocketMQ reserves (TAGS, KEYS, UNIQ_KEY, WAIT, DELAY...) are dropped
from ``properties``: the SDK and the broker own them.

Guarantee: **at-least-once** (as the Kafka sink and the old rocketmq-spark connector).
A task that fails is retried by Spark and sends its rows again. Two things narrow the
duplicates in streaming queries, see :mod:`rocklet.spark.sink_marker`:

* a partition of a micro-batch that was completely written is not written again when
  Spark replays the batch after a restart (a per ``(queryId, partitionId)`` marker
  kept as a consumer offset on the broker);
* every message carries ``rockletWriteId = <queryId>:<batchId>:<partitionId>:<seq>``
  (option ``writeId``, default true), deterministic for a deterministic input, so
  consumers can drop the copies a failed task left behind.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from rocklet.client.message import Message
from rocklet.client.producer import Producer
from rocklet.client.send_wire import EncodedBatch
from rocklet.spark.broker import Cluster
from rocklet.spark.in_flight import InFlight
from rocklet.spark.options import SinkOptions
from rocklet.spark.sink_batches import (
    BATCH_BYTES,
    BATCH_MESSAGES,
    SYSTEM_PROPERTIES,
    WRITE_ID_PROPERTY,
    WriteIds,
    encode_rows,
)
from rocklet.spark.sink_marker import WriteIdent, mark_done, marker_done
from rocklet.spark.sink_txn import (
    Prepared,
    commit_batch,
    connect,
    find_decision,
    new_attempt,
    prepared_of,
    send_halves,
)
from rocklet.transport.logs import get_logger

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "WRITE_ID_PROPERTY",
    "RockletStreamWriter",
    "RockletWriter",
    "RowError",
    "SinkCommit",
    "batches_by_topic",
    "rows_to_messages",
]

_log = get_logger(__name__)

#: Batch sends in flight per task.
_IN_FLIGHT: Final = 8


@dataclass(frozen=True)
class SinkCommit(WriterCommitMessage):
    """What one task wrote.

    Attributes:
        partition_id: Spark's partition id.
        sent: Messages the broker acknowledged.
        skipped: The partition had been written before (a replayed micro-batch).
    """

    partition_id: int
    sent: int
    skipped: bool = False


class RowError(ValueError):
    """A row cannot become a message (no body, no topic)."""


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


def rows_to_messages(
    batch: pa.RecordBatch, topic: str | None, write_ids: Iterator[str] | None
) -> list[Message]:
    """Turn one Arrow batch of sink rows into messages.

    Args:
        batch: The rows.
        topic: The ``topic`` option (wins over the column), or None.
        write_ids: Source of ``rockletWriteId`` values, one per row, or None.

    Returns:
        One message per row, in row order.

    Raises:
        RowError: A row has no body or no topic.
    """
    n = batch.num_rows
    bodies = _column(batch, "body") or [None] * n
    topics = [topic] * n if topic else (_column(batch, "topic") or [None] * n)
    tags = _column(batch, "tags") or [None] * n
    keys = _column(batch, "keys") or [None] * n
    props = _column(batch, "properties") or [None] * n
    out: list[Message] = []
    for i in range(n):
        body, dest = bodies[i], topics[i]
        if not body:
            raise RowError(f"a row has an empty body (RocketMQ refuses empty messages): {i}")
        if not dest:
            raise RowError(f"a row has no topic (set the topic option or column): row {i}")
        user = {k: v for k, v in (props[i] or ()) if v is not None and k not in SYSTEM_PROPERTIES}
        if write_ids is not None:
            user[WRITE_ID_PROPERTY] = next(write_ids)
        key, tag = keys[i], tags[i]
        out.append(
            Message(
                dest,
                body.encode() if isinstance(body, str) else body,
                # A tags or keys column of another type (numbers) is sent as its text,
                # as properties are: the Message checks its fields' types.
                tags=str(tag) if tag else None,
                keys=tuple(key.split())
                if isinstance(key, str)
                else tuple(str(k) for k in key or () if k),
                properties=user or None,
            )
        )
    return out


def batches_by_topic(msgs: Sequence[Message]) -> Iterator[list[Message]]:
    """Batches of one topic within the message and byte caps (row order kept per topic)."""
    by_topic = sorted(msgs, key=lambda m: m.topic)  # stable: a batch holds one topic
    for _, same_topic in itertools.groupby(by_topic, key=lambda m: m.topic):
        chunk: list[Message] = []
        size = 0
        for msg in same_topic:
            if chunk and (len(chunk) >= BATCH_MESSAGES or size + len(msg.body) > BATCH_BYTES):
                yield chunk
                chunk, size = [], 0
            chunk.append(msg)
            size += len(msg.body)
        if chunk:
            yield chunk


def _rows_or_none(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch] | None:
    """The batches, or None when there is no row at all (nothing to connect for)."""
    it = iter(batches)
    for first in it:
        if first.num_rows:
            return itertools.chain((first,), it)
    return None


def _write(
    opts: SinkOptions, batches: Iterable[pa.RecordBatch], ident: WriteIdent | None
) -> SinkCommit | Prepared:
    rows = _rows_or_none(batches)
    if opts.exactly_once:
        assert ident is not None  # both writers name the batch when exactly-once
        if rows is None:
            return Prepared(ident.partition_id, ident.batch_key, None)
        return asyncio.run(_prepare_all(opts, rows, ident))
    if rows is None:  # an empty partition (common after a shuffle): no client at all
        return SinkCommit(ident.partition_id if ident else _partition_id(), 0)
    return asyncio.run(_send_all(opts, rows, ident))


async def _prepare_all(
    opts: SinkOptions, batches: Iterator[pa.RecordBatch], ident: WriteIdent
) -> Prepared:
    """Exactly-once: send the rows as half messages (:mod:`rocklet.spark.sink_txn`)."""
    async with connect(opts) as (admin, producer):
        if await find_decision(admin, ident.batch_key) is not None:
            _log.info("batch already committed; not sending it again", ident=str(ident))
            for _ in batches:  # Spark streams the input to us: read it to the end anyway
                pass
            return Prepared(ident.partition_id, ident.batch_key, None)
        attempt = new_attempt()
        write_ids = ident.write_ids() if opts.write_id else None
        chunks = (rows_to_messages(batch, opts.topic, write_ids) for batch in batches)
        tag = f"{ident.batch_key}:{ident.partition_id}:{attempt}"
        handles = await send_halves(producer, chunks, tag)
    return Prepared(ident.partition_id, ident.batch_key, attempt, tuple(handles))


def _commit_exactly_once(opts: SinkOptions, messages: Sequence[object]) -> None:
    """Decide and end the batch on the driver (exactly-once)."""
    prepared = prepared_of(messages)
    if not prepared:
        return

    async def run() -> int:
        async with connect(opts) as (admin, producer):
            return await commit_batch(admin, producer, prepared[0].batch_key, prepared)

    ended = asyncio.run(run())
    _log.info(
        "sink committed exactly once",
        batch=prepared[0].batch_key,
        committed=ended,
        skipped=sum(p.attempt is None for p in prepared),
        tasks=len(messages),
    )


async def _send_all(
    opts: SinkOptions, batches: Iterable[pa.RecordBatch], ident: WriteIdent | None
) -> SinkCommit:
    partition = ident.partition_id if ident else _partition_id()
    timeout_s = opts.send_timeout_ms / 1000
    cluster = Cluster(
        opts.name_server,
        timeout_s=timeout_s,
        consumer=False,
        tls=opts.tls.context(),
        credentials=opts.credentials,
    )
    async with cluster:
        if ident is not None and await marker_done(cluster, ident):
            _log.info("partition already written; not sending it again", ident=str(ident))
            for _ in batches:  # Spark streams the input to us: read it to the end anyway
                pass
            return SinkCommit(partition, 0, skipped=True)
        write_ids = WriteIds.of(ident) if ident is not None and opts.write_id else None
        producer = Producer(
            opts.producer_group,
            opts.name_server,
            send_timeout_ms=opts.send_timeout_ms,
            instance_name=cluster.instance_name,
            tls=cluster.tls,
            credentials=opts.credentials,
        )
        sent = 0

        async def send(chunk: list[Message] | EncodedBatch) -> None:
            nonlocal sent
            if isinstance(chunk, EncodedBatch):
                await producer.send_encoded_batch(chunk)
                sent += chunk.count
            else:
                await producer.send(chunk)
                sent += len(chunk)

        async with producer, InFlight(_IN_FLIGHT) as flight:
            for batch in batches:
                for chunk in _send_batches(batch, opts.topic, write_ids, producer):
                    await flight.submit(send(chunk))
            await flight.drain()
        if ident is not None:
            await mark_done(cluster, ident)
    return SinkCommit(partition, sent)


def _send_batches(
    rows: pa.RecordBatch, topic: str | None, write_ids: WriteIds | None, producer: Producer
) -> Sequence[list[Message] | EncodedBatch]:
    """The batch sends of some rows: built from the columns, else message by message."""
    max_size = producer.config.max_message_size
    encoded = encode_rows(rows, topic, write_ids, producer, max_size)
    if encoded is not None:
        return encoded
    _log.debug("rows sent message by message", rows=rows.num_rows)
    return list(batches_by_topic(rows_to_messages(rows, topic, write_ids)))


def _partition_id() -> int:
    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def _log_commit(messages: Sequence[WriterCommitMessage | None], **where: object) -> None:
    commits = [m for m in messages if isinstance(m, SinkCommit)]
    _log.info(
        "sink committed",
        sent=sum(c.sent for c in commits),
        skipped=sum(c.skipped for c in commits),
        tasks=len(messages),
        **where,
    )


def _log_abort(
    opts: SinkOptions, messages: Sequence[WriterCommitMessage | None], **where: object
) -> None:
    if opts.exactly_once:
        # Spark also aborts when the commit failed after deciding: the half messages
        # it holds may be winners, so they are left to the commit's replay and the
        # brokers' check-backs.
        _log.warning(
            "sink aborted; half messages left to the check-backs", tasks=len(messages), **where
        )
    else:
        _log.warning("sink aborted; messages already sent remain", tasks=len(messages), **where)


class RockletWriter(DataSourceArrowWriter):
    """Batch writes (``df.write.format("rocklet").mode("append").save()``).

    Args:
        opts: Parsed sink options.
    """

    def __init__(self, opts: SinkOptions) -> None:
        self._opts = opts
        # Made once on the driver and shipped with the writer to every task: the
        # exactly-once sink's name for this write (its one "batch").
        self._job = new_attempt()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit | Prepared:
        """Send one partition's rows (executor); returns after every ack."""
        ident = WriteIdent(self._job, 0, _partition_id()) if self._opts.exactly_once else None
        return _write(self._opts, iterator, ident)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Log what was written; exactly-once: commit the half messages (driver)."""
        if self._opts.exactly_once:
            _commit_exactly_once(self._opts, messages)
        else:
            _log_commit(messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """A task or the commit failed: log it; what was sent stays sent (at-least-once).

        Exactly-once: nothing is rolled back here (:mod:`rocklet.spark.sink_txn`).
        """
        _log_abort(self._opts, messages)


class RockletStreamWriter(DataSourceStreamArrowWriter):
    """Streaming writes (``df.writeStream.format("rocklet")``).

    Args:
        opts: Parsed sink options.
    """

    def __init__(self, opts: SinkOptions) -> None:
        self._opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit | Prepared:
        """Send one partition of a micro-batch (executor), unless it was sent before."""
        ident = WriteIdent.current()
        if ident is None and self._opts.exactly_once:
            raise RuntimeError("an exactly-once streaming write runs outside a streaming task")
        return _write(self._opts, iterator, ident)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Log what the micro-batch wrote; exactly-once: commit it (driver, fresh process)."""
        if self._opts.exactly_once:
            _commit_exactly_once(self._opts, messages)
        else:
            _log_commit(messages, batch_id=batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """A task or the commit failed: log it; what was sent stays sent (at-least-once).

        Exactly-once: nothing is rolled back here; Spark replays the batch.
        """
        _log_abort(self._opts, messages, batch_id=batchId)
