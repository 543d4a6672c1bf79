"""Which partitions of a streaming query's micro-batches were completely written.

Spark replays micro-batch N after a restart when the sink had written it but the query
stopped before recording it as done. Writing it again
would duplicate every message. So each task, after the broker acknowledged all of its
rows, records "partition P of query Q is done up to batch N" in a durable place the
broker already has: the consumer offset table (UPDATE_CONSUMER_OFFSET), under

    group = rocklet-sink-<queryId>, topic = ROCKLET_SINK_COMMIT, queueId = P,
    offset = N + 1

and a task of batch N first reads it (QUERY_CONSUMER_OFFSET): a value above N means
the partition was written, and it sends nothing. Spark's ``queryId`` survives restarts
of one checkpoint, and a replay plans the same partitions over the same input, so the
key is stable. The record lives on the first broker (by name) of the cluster.

This narrows duplicates; it does not remove them all: a task that dies after sending
part of its rows is retried from its first row (at-least-once). The broker writes an
answered offset commit to disk before answering it, so a broker crash does not lose a
marker :func:`mark_done` saw acknowledged.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Self

from rocklet.client.errors import error_for_code
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import (
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocklet.spark.broker import Cluster

__all__ = ["MARKER_TOPIC", "WriteIdent", "mark_done", "marker_done"]

#: The pseudo-topic the markers are kept under (no messages are ever sent to it).
MARKER_TOPIC: Final = "ROCKLET_SINK_COMMIT"


@dataclass(frozen=True)
class WriteIdent:
    """One task's place in a streaming query.

    Attributes:
        query_id: Spark's ``queryId`` (stable across restarts of a checkpoint).
        batch_id: The micro-batch.
        partition_id: The task's partition.
    """

    query_id: str
    batch_id: int
    partition_id: int

    @classmethod
    def current(cls) -> Self | None:
        """The running Spark task's identity, or None outside a streaming task."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            return None
        query = ctx.getLocalProperty("sql.streaming.queryId")
        batch = ctx.getLocalProperty("streaming.sql.batchId")
        if not query or batch is None:
            return None
        return cls(query, int(batch), ctx.partitionId())

    @property
    def batch_key(self) -> str:
        """``<queryId>:<batchId>``: the exactly-once sink's name for this batch."""
        return f"{self.query_id}:{self.batch_id}"

    @property
    def group(self) -> str:
        """The consumer group the marker is kept under."""
        return f"rocklet-sink-{self.query_id}"

    @property
    def write_id_prefix(self) -> str:
        """What every write id of this task starts with: ``<queryId>:<batchId>:<partitionId>:``."""
        return f"{self.query_id}:{self.batch_id}:{self.partition_id}:"

    def write_ids(self) -> Iterator[str]:
        """``<queryId>:<batchId>:<partitionId>:<seq>`` for seq = 0, 1, ..."""
        prefix = self.write_id_prefix
        return (f"{prefix}{seq}" for seq in itertools.count())

    def __str__(self) -> str:
        return f"{self.query_id}/{self.batch_id}/{self.partition_id}"


async def _marker_broker(cluster: Cluster) -> str:
    async with cluster.admin() as admin:
        info = await admin.cluster_info()
    for name in sorted(info.broker_addr_table):
        addr = info.broker_addr_table[name].master_addr
        if addr is not None:
            return addr
    raise RuntimeError("no broker master is registered with the name server")


async def marker_done(cluster: Cluster, ident: WriteIdent) -> bool:
    """Whether this task's partition of this batch was written completely before."""
    addr = await _marker_broker(cluster)
    header = QueryConsumerOffsetRequestHeader(ident.group, MARKER_TOPIC, ident.partition_id)
    cmd = RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, ext_fields=header.to_ext_fields())
    answer = await cluster.instance.invoke(addr, cmd)
    if answer.code == ResponseCode.QUERY_NOT_FOUND:
        return False
    if answer.code != ResponseCode.SUCCESS:
        raise error_for_code(answer.code, answer.remark, addr=addr)
    done = QueryConsumerOffsetResponseHeader.from_ext_fields(answer.ext_fields).offset
    return done > ident.batch_id


async def mark_done(cluster: Cluster, ident: WriteIdent) -> None:
    """Record that this task's partition of this batch is completely written."""
    addr = await _marker_broker(cluster)
    header = UpdateConsumerOffsetRequestHeader(
        ident.group, MARKER_TOPIC, ident.partition_id, ident.batch_id + 1
    )
    cmd = RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=header.to_ext_fields())
    answer = await cluster.instance.invoke(addr, cmd)
    if answer.code != ResponseCode.SUCCESS:
        raise error_for_code(answer.code, answer.remark, addr=addr)
