"""Spark connector benchmark: rows/s read and written through Spark, beside the SDK alone.

Usage: python bench/spark_bench.py [--rows N] [--body-size B] [--quick] [--exactly-once]

One ``rocklet standalone`` (ASYNC_FLUSH) on a temporary directory, an 8-queue topic
filled with ``--rows`` messages of ``--body-size`` bytes by the SDK's batch producer,
then, in one run so the figures compare:

1. SDK read: the SDK's PullConsumer drains the topic, one task per queue, in this
   process (the floor the connector's executors build on);
2. Spark read: ``spark.read.format("rocklet")`` over the same topic, every row
   materialised (``write.format("noop")``), local[2] (8 partitions, 2 at a time);
3. Spark stream copy: ``readStream`` -> ``writeStream.format("rocklet")`` with
   ``trigger(availableNow=True)`` into a second topic (read + write through Spark);
4. SDK write: the SDK's Producer sends the same number of messages, batches of 256,
   8 batches in flight (what each sink task does);
5. Spark write: ``df.write.format("rocklet")`` of a generated DataFrame with the same
   bodies;
6. with ``--exactly-once``: the stream copy and the Spark write again with
   ``deliveryGuarantee=exactly-once`` (half messages, then a commit per batch);
7. with ``--floors``: Spark's own floor for a Python data source
   (:mod:`spark_floors`): a read of prebuilt Arrow batches with no broker, a write to a
   sink that discards its rows, and a stream copy from the one to the other; the
   connector cannot beat these.

Spark is warmed up first (a small read and write), so the figures are steady-state
rather than JVM start-up. Each row reports rows/s, wall seconds and the broker's CPU
seconds (on 2 cores Spark's JVM, its Python workers and the broker compete).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import spark_floors
from broker_bench import QUEUES, TOPIC, Standalone, create_topic, machine, standalone
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from rocklet.client.message import Message
from rocklet.client.producer import Producer
from rocklet.client.pull_api import PullStatus
from rocklet.client.pull_consumer import PullConsumer
from rocklet.protocol.bodies.queue import MessageQueue

ROOT = Path(__file__).resolve().parents[1]
_BATCH = 256
_IN_FLIGHT = 8


@dataclass
class Row:
    """One benchmark case."""

    case: str
    rows: int
    seconds: float
    broker_cpu_s: float

    @property
    def rate(self) -> float:
        """Rows per second."""
        return self.rows / self.seconds if self.seconds else 0.0


@contextmanager
def timed(broker: Standalone, case: str, rows: int, out: list[Row]) -> Iterator[None]:
    """Time the block and record the broker's CPU over it."""
    cpu0, t0 = broker.cpu_seconds(), time.perf_counter()
    yield
    out.append(Row(case, rows, time.perf_counter() - t0, broker.cpu_seconds() - cpu0))


# -- the SDK alone ----------------------------------------------------------------------------


async def sdk_produce(namesrv: str, topic: str, rows: int, body: bytes) -> None:
    """Send ``rows`` messages in batches, several in flight, like one sink task."""
    async with Producer("spark-bench-producer", namesrv) as producer:
        pending: set[asyncio.Task[object]] = set()
        for start in range(0, rows, _BATCH):
            batch = [Message(topic, body) for _ in range(min(_BATCH, rows - start))]
            pending.add(asyncio.ensure_future(producer.send(batch)))
            if len(pending) >= _IN_FLIGHT:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
        for task in pending:
            await task


async def sdk_drain(namesrv: str, topic: str) -> int:
    """Read every message of ``topic`` with one task per queue; return the count."""
    async with PullConsumer("spark-bench-reader", namesrv) as consumer:
        queues = await consumer.fetch_queues(topic)

        async def drain(mq: MessageQueue) -> int:
            offset, end, n = await consumer.min_offset(mq), await consumer.max_offset(mq), 0
            while offset < end:
                result = await consumer.pull(mq, offset, 32)
                if result.status is not PullStatus.FOUND:
                    break
                n += len(result.messages)
                offset = result.next_begin_offset
            return n

        return sum(await asyncio.gather(*(drain(mq) for mq in queues)))


# -- Spark ------------------------------------------------------------------------------------


def spark_session() -> SparkSession:
    """local[2], UI off, the connector importable by the Python workers."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    path = os.environ.get("PYTHONPATH")
    # The workers import the connector from the checkout, and spark_floors from bench/.
    here = f"{ROOT}{os.pathsep}{ROOT / 'bench'}"
    os.environ["PYTHONPATH"] = f"{here}{os.pathsep}{path}" if path else here
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("rocklet-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_read(spark: SparkSession, namesrv: str, topic: str, ending: str = "latest") -> None:
    """Materialise every row of ``topic`` (up to ``ending``) through the noop sink."""
    (
        spark.read.format("rocklet")
        .option("nameServer", namesrv)
        .option("subscribe", topic)
        .option("endingOffsets", ending)
        .load()
        .write.format("noop")
        .mode("overwrite")
        .save()
    )


def spark_write(
    spark: SparkSession,
    namesrv: str,
    topic: str,
    rows: int,
    body: bytes,
    guarantee: str = "at-least-once",
) -> None:
    """Write ``rows`` generated rows with ``body`` to ``topic`` (8 partitions)."""
    df = spark.range(rows, numPartitions=QUEUES).select(F.lit(body).alias("body"))
    df.write.format("rocklet").option("nameServer", namesrv).option("topic", topic).option(
        "deliveryGuarantee", guarantee
    ).mode("append").save()


def spark_copy(
    spark: SparkSession,
    namesrv: str,
    source: str,
    sink: str,
    checkpoint: str,
    guarantee: str = "at-least-once",
) -> None:
    """Copy ``source`` to ``sink`` with a rocklet-to-rocklet stream, availableNow."""
    query = (
        spark.readStream.format("rocklet")
        .option("nameServer", namesrv)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("body")
        .writeStream.format("rocklet")
        .option("nameServer", namesrv)
        .option("topic", sink)
        .option("deliveryGuarantee", guarantee)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"stream copy failed: {query.exception()}")


# -- the run ----------------------------------------------------------------------------------


def run(
    rows: int, body_size: int, root: Path, exactly_once: bool = False, floors: bool = False
) -> list[Row]:
    """Every case against one broker; returns the measurements."""
    body = b"x" * body_size
    out: list[Row] = []
    with standalone(root) as broker:
        namesrv = f"127.0.0.1:{broker.namesrv_port}"
        asyncio.run(create_topic(broker.broker_port, broker.namesrv_port))
        asyncio.run(sdk_produce(namesrv, TOPIC, rows, body))
        spark = spark_session()
        try:
            warm_up(spark, namesrv, body, root)
            with timed(broker, "SDK read (PullConsumer, 1 task/queue)", rows, out):
                assert asyncio.run(sdk_drain(namesrv, TOPIC)) == rows
            with timed(broker, "Spark read (batch, noop sink)", rows, out):
                spark_read(spark, namesrv, TOPIC)
            with timed(broker, "Spark stream copy (availableNow, read + write)", rows, out):
                spark_copy(spark, namesrv, TOPIC, "BenchCopy", str(root / "checkpoint"))
            with timed(broker, "SDK write (batches of 256, 8 in flight)", rows, out):
                asyncio.run(sdk_produce(namesrv, "BenchSdkOut", rows, body))
            with timed(broker, "Spark write (batch)", rows, out):
                spark_write(spark, namesrv, "BenchSparkOut", rows, body)
            assert asyncio.run(sdk_drain(namesrv, "BenchSparkOut")) == rows
            if exactly_once:
                with timed(broker, "Spark stream copy, exactly-once", rows, out):
                    spark_copy(
                        spark, namesrv, TOPIC, "BenchCopyEo", str(root / "eo"), "exactly-once"
                    )
                with timed(broker, "Spark write (batch), exactly-once", rows, out):
                    spark_write(spark, namesrv, "BenchSparkOutEo", rows, body, "exactly-once")
                assert asyncio.run(sdk_drain(namesrv, "BenchSparkOutEo")) == rows
                assert asyncio.run(sdk_drain(namesrv, "BenchCopyEo")) == rows
            if floors:
                spark_floors.register(spark)
                spark_floors.floor_read(spark, 1000, body_size, QUEUES)  # warm-up
                with timed(broker, "floor: Spark read of prebuilt batches (no broker)", rows, out):
                    spark_floors.floor_read(spark, rows, body_size, QUEUES)
                spark_floors.floor_write(spark, 1000, body, QUEUES)
                with timed(broker, "floor: Spark write to a sink that discards", rows, out):
                    spark_floors.floor_write(spark, rows, body, QUEUES)
                spark_floors.floor_copy(spark, 1000, body_size, QUEUES, str(root / "fw"))
                with timed(broker, "floor: stream copy, prebuilt source to that sink", rows, out):
                    spark_floors.floor_copy(spark, rows, body_size, QUEUES, str(root / "fc"))
        finally:
            spark.stop()
    return out


def warm_up(spark: SparkSession, namesrv: str, body: bytes, root: Path) -> None:
    """A small read, write and stream copy, so that JVM start-up is not measured."""
    spark_read(spark, namesrv, TOPIC, ending=f'{{"{TOPIC}": {{"0": 100}}}}')
    spark_write(spark, namesrv, "BenchWarmUp", 1000, body)
    spark_copy(spark, namesrv, "BenchWarmUp", "BenchWarmUpCopy", str(root / "warm-checkpoint"))


def report(results: list[Row], rows: int, body_size: int) -> str:
    """A markdown table of the results."""
    lines = [
        f"Spark connector benchmark: {rows} rows of {body_size} B, {QUEUES} queues, local[2]",
        f"Machine: {machine()}",
        "",
        "| case | rows/s | seconds | broker CPU s |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {r.case} | {r.rate:,.0f} | {r.seconds:.2f} | {r.broker_cpu_s:.1f} |" for r in results
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run every case, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--body-size", type=int, default=1024)
    parser.add_argument("--quick", action="store_true", help="20k rows")
    parser.add_argument(
        "--exactly-once",
        action="store_true",
        help="also the stream copy and batch write with deliveryGuarantee=exactly-once",
    )
    parser.add_argument(
        "--floors",
        action="store_true",
        help="also Spark's own floor: a read of prebuilt batches, a write that discards",
    )
    args = parser.parse_args(argv)
    rows = 20_000 if args.quick else args.rows
    with tempfile.TemporaryDirectory(prefix="spark-bench-") as tmp:
        results = run(rows, args.body_size, Path(tmp), args.exactly_once, args.floors)
    print(report(results, rows, args.body_size))


if __name__ == "__main__":
    main()
