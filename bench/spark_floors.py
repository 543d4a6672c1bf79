"""Spark's own floor for a Python data source: what a source or sink that does nothing costs.

Two trivial data sources, registered in the benchmark's session, bound what the
connector can reach on this machine:

* ``floor-read``: partitions that yield prebuilt Arrow batches of the connector's own
  schema (the columns a real read builds from pull bodies), with no broker and no
  decoding; read through the ``noop`` sink like the benchmark's Spark read;
* ``floor-write``: an Arrow writer that reads every batch Spark hands it and sends
  nothing; written from the same generated DataFrame as the benchmark's Spark write;
* a stream copy from one to the other: ``floor-read`` as a streaming source (one
  micro-batch of prebuilt batches) into ``floor-write`` as a streaming sink, with
  ``trigger(availableNow=True)`` and a checkpoint, as the benchmark's stream copy.

The connector's rate divided by the SDK's cannot exceed the floor's divided by the SDK's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

__all__ = ["floor_copy", "floor_read", "floor_write", "register"]

_BATCH = 4096


class _Part(InputPartition):
    def __init__(self, index: int, rows: int, body_size: int) -> None:
        super().__init__(index)
        self.rows = rows
        self.body_size = body_size


def _prebuilt(queue_id: int, rows: int, body_size: int) -> pa.RecordBatch:
    """``rows`` records built into columns by the connector's own column builder."""
    from rocklet.protocol.message import encode_message, pack_host
    from rocklet.spark.columns import RecordColumns

    host = pack_host("127.0.0.1", 10911)
    data = b"".join(
        bytes(
            encode_message(
                topic="BenchTopic",
                body=b"x" * body_size,
                queue_id=queue_id,
                queue_offset=i,
                physical_offset=i * (body_size + 200),
                born_timestamp=1_700_000_000_000,
                store_timestamp=1_700_000_000_001,
                born_host=host,
                store_host=host,
                properties={"UNIQ_KEY": f"7F00000100002A9F0000000000{i:06d}", "WAIT": "true"},
            )
        )
        for i in range(rows)
    )
    cols = RecordColumns("broker-a")
    cols.add(data, 0, 1 << 62)
    return cols.flush()


class _FloorReader(DataSourceReader):
    def __init__(self, rows: int, body_size: int, partitions: int) -> None:
        self._rows, self._size, self._parts = rows, body_size, partitions

    def partitions(self) -> Sequence[InputPartition]:
        per = self._rows // self._parts
        return [_Part(i, per, self._size) for i in range(self._parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Part)
        batch = _prebuilt(partition.value, min(_BATCH, partition.rows), partition.body_size)
        left = partition.rows
        while left > 0:
            part = batch.slice(0, min(left, _BATCH))
            left -= part.num_rows
            yield part


class _FloorStream(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """One micro-batch holding every row: offsets 0 -> 1."""

    def __init__(self, rows: int, body_size: int, partitions: int) -> None:
        self._batch = _FloorReader(rows, body_size, partitions)

    def initialOffset(self) -> dict[str, int]:
        return {"at": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return {"at": 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return self._batch.partitions() if start["at"] < end["at"] else []

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self._batch.read(partition)


class FloorRead(DataSource):
    """``spark.read.format("floor-read")``: prebuilt batches, no broker."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "floor-read"

    def schema(self) -> StructType:
        """The connector's source schema."""
        from rocklet.spark.schema import SOURCE_SCHEMA

        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """Rows, body size and partitions from the options."""
        opts = self.options
        return _FloorReader(int(opts["rows"]), int(opts["bodySize"]), int(opts["partitions"]))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The same rows as one micro-batch."""
        opts = self.options
        return _FloorStream(int(opts["rows"]), int(opts["bodySize"]), int(opts["partitions"]))


class _NullWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()


class _NullStreamWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()


class FloorWrite(DataSource):
    """``df.write.format("floor-write")``: reads what Spark hands it, sends nothing."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "floor-write"

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        """The discarding writer."""
        return _NullWriter()

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        """The discarding streaming writer."""
        return _NullStreamWriter()


def register(spark: SparkSession) -> None:
    """Register both formats in ``spark``."""
    spark.dataSource.register(FloorRead)
    spark.dataSource.register(FloorWrite)


def floor_read(spark: SparkSession, rows: int, body_size: int, partitions: int) -> None:
    """Read ``rows`` prebuilt rows through the noop sink (as the benchmark's Spark read)."""
    spark.read.format("floor-read").option("rows", str(rows)).option(
        "bodySize", str(body_size)
    ).option("partitions", str(partitions)).load().write.format("noop").mode("overwrite").save()


def floor_write(spark: SparkSession, rows: int, body: bytes, partitions: int) -> None:
    """Hand ``rows`` generated rows to the discarding writer (as the Spark write)."""
    df = spark.range(rows, numPartitions=partitions).select(F.lit(body).alias("body"))
    df.write.format("floor-write").mode("append").save()


def floor_copy(
    spark: SparkSession, rows: int, body_size: int, partitions: int, checkpoint: str
) -> None:
    """Stream ``rows`` prebuilt rows into the discarding sink (as the stream copy)."""
    query = (
        spark.readStream.format("floor-read")
        .option("rows", str(rows))
        .option("bodySize", str(body_size))
        .option("partitions", str(partitions))
        .load()
        .select("body")
        .writeStream.format("floor-write")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"floor copy failed: {query.exception()}")
