"""Spark's own floor for a Python data source: what a source or sink that does nothing costs.

Two trivial data sources, registered in the benchmark's session, bound what the
connector can reach on this machine:

* ``floor-read``: partitions that yield prebuilt Arrow batches of the connector's own
  schema (the columns a real read builds from pull bodies), with no broker and no
  decoding; read through the ``noop`` sink like the benchmark's Spark read;
* ``floor-write``: an Arrow writer that reads every batch Spark hands it and sends
  nothing; written from the same generated DataFrame as the benchmark's Spark write.

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
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

__all__ = ["floor_read", "floor_write", "register"]

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


class _NullWriter(DataSourceArrowWriter):
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
