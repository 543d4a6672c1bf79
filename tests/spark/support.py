"""Helpers for the connector's tests: a broker in a background thread, produce, pull."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Coroutine, Iterable, Sequence
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from rocklet.broker.app import Broker
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from rocklet.client.pull_api import PullStatus
from rocklet.client.pull_consumer import PullConsumer
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.topic import TopicConfig
from tests.cluster import Cluster, running_cluster

T = TypeVar("T")

#: The repository root: on the Python workers' path (see :func:`driver_environment`).
ROOT = Path(__file__).resolve().parents[2]
#: Headroom for anything that crosses processes on a busy 2-core machine.
TIMEOUT = 60.0
#: Seconds a streaming query may take to finish (``awaitTermination`` wants an int).
QUERY_TIMEOUT = 120


class BrokerThread:
    """A real name server + broker on loopback, served by an event loop in a thread.

    Spark's executors are other processes: they reach it over TCP like any client.
    The test thread talks to it only through :meth:`call` (coroutines run on its loop).
    Unhandled exceptions on that loop are collected and fail :meth:`stop`.
    """

    def __init__(self, store: Path, **overrides: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._errors: list[dict[str, Any]] = []
        self._loop.set_exception_handler(lambda _loop, ctx: self._errors.append(ctx))
        self._thread = threading.Thread(target=self._loop.run_forever, name="broker", daemon=True)
        self._cm: AbstractAsyncContextManager[Cluster] = running_cluster(store, **overrides)
        self._thread.start()
        self.cluster: Cluster = self.call(self._cm.__aenter__())

    @property
    def namesrv(self) -> str:
        """The name server address, ``127.0.0.1:<port>``."""
        return self.cluster.namesrv_addr

    @property
    def broker(self) -> Broker:
        """The running broker (use it only inside :meth:`call`)."""
        return self.cluster.broker

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = TIMEOUT) -> T:
        """Run ``coro`` on the broker's loop and wait for its result."""
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout)

    def set_queues(self, topic: str, queues: int) -> None:
        """Create or resize ``topic`` and wait until the name server has the new route."""

        async def update() -> None:
            self.broker.ctx.topics.update(TopicConfig(topic, queues, queues))
            await self.broker.next_registration()

        self.call(update())

    def stop(self) -> None:
        """Stop the broker and name server, then the loop; fail on loop errors."""
        try:
            self.call(self._cm.__aexit__(None, None, None))
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(TIMEOUT)
            self._loop.close()
        if self._errors:
            details = "; ".join(f"{c.get('message')}: {c.get('exception')!r}" for c in self._errors)
            raise AssertionError(f"unhandled exception(s) on the broker loop: {details}")


def produce(
    namesrv: str,
    topic: str,
    bodies: Sequence[bytes],
    *,
    queues: int = 4,
    tags: Sequence[str | None] | None = None,
    keys: Sequence[str] | None = None,
) -> list[tuple[int, int, bytes]]:
    """Send ``bodies[i]`` to queue ``i % queues`` of ``topic``, in order, with the SDK.

    So message ``i`` lands at queue offset ``i // queues`` of a fresh topic.

    Returns:
        ``(queueId, queueOffset, body)`` of each message, as the broker answered.
    """

    async def main() -> list[tuple[int, int, bytes]]:
        out = []
        async with Producer("spark-test-producer", namesrv) as producer:
            for i, body in enumerate(bodies):
                msg = Message(
                    topic,
                    body,
                    tags=tags[i] if tags else None,
                    keys=keys[i] if keys else (),
                )
                sent = await producer.send_orderly(msg, i % queues)
                out.append((sent.message_queue.queue_id, sent.queue_offset, body))
        return out

    return asyncio.run(main())


def pull_all(namesrv: str, topic: str) -> list[MessageExt]:
    """Every message of ``topic``, queue by queue, through the SDK's PullConsumer."""

    async def main() -> list[MessageExt]:
        out: list[MessageExt] = []
        async with PullConsumer("spark-test-reader", namesrv) as consumer:
            queues: Iterable[MessageQueue] = await consumer.fetch_queues(topic)
            for mq in queues:
                offset = await consumer.min_offset(mq)
                while True:
                    result = await consumer.pull(mq, offset, 32)
                    if result.status is not PullStatus.FOUND:
                        break
                    out.extend(result.messages)
                    offset = result.next_begin_offset
        return out

    return asyncio.run(main())


def drop_last_commit(checkpoint: Path) -> int:
    """Delete the newest ``commits/<batchId>`` file, as if the query died before it.

    On restart Spark replays that batch with the offsets from ``offsets/<batchId>``.

    Returns:
        The batch id that will be replayed.
    """
    commits = [p for p in (checkpoint / "commits").iterdir() if p.name.isdigit()]
    last = max(commits, key=lambda p: int(p.name))
    last.unlink()
    crc = last.with_name(f".{last.name}.crc")
    crc.unlink(missing_ok=True)
    return int(last.name)


def stream_copy(
    spark: SparkSession,
    namesrv: str,
    source: str,
    sink: str,
    checkpoint: Path,
    *,
    per_trigger: int,
    columns: Sequence[str] = ("body",),
    **sink_options: str,
) -> StreamingQueryException | None:
    """Copy ``source`` to ``sink`` with an availableNow query, from ``checkpoint``.

    Returns:
        The query's failure, or None when it read everything and stopped.
    """
    stream = (
        spark.readStream.format("rocklet")
        .option("nameServer", namesrv)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(per_trigger))
        .load()
    )
    writer = (
        stream.select(*columns)
        .writeStream.format("rocklet")
        .option("nameServer", namesrv)
        .option("topic", sink)
        .option("checkpointLocation", str(checkpoint))
    )
    for key, value in sink_options.items():
        writer = writer.option(key, value)
    query = writer.trigger(availableNow=True).start()
    try:
        finished = query.awaitTermination(QUERY_TIMEOUT)
    except StreamingQueryException as failure:
        return failure
    assert finished, "the availableNow query did not finish"
    return None


def driver_environment() -> dict[str, str]:
    """What a Spark driver needs in its environment to run the connector.

    Spark's Python workers must run this interpreter (it has pyarrow and the connector)
    and must find ``pyspark_rocklet`` with ``pkgutil.iter_modules`` for the automatic
    registration of the ``rocklet`` format, which an editable install's import hook
    does not provide: so the repository root goes on their PYTHONPATH.
    """
    path = os.environ.get("PYTHONPATH")
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT),
    }


def local_session(app: str, scratch: Path | None = None) -> SparkSession:
    """The tests' SparkSession: local[2], loopback only, small and quick to plan.

    Args:
        app: The application's name.
        scratch: Where the driver's JVM keeps its temporary files (``spark.local.dir``
            and ``java.io.tmpdir``) instead of ``/tmp``: for a driver a test kills,
            whose shutdown hooks never remove them. Default: Spark's own.
    """
    builder = SparkSession.builder
    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
        builder = builder.config("spark.local.dir", str(scratch)).config(
            "spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={scratch}"
        )
    session = (
        builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        # Tiny test data: compiling whole-stage code and re-planning adaptively cost
        # more than they save (about half the time of the first stateful query).
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.python.worker.faulthandler.enabled", "true")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session
