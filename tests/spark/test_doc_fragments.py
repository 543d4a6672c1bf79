"""docs/spark.md's Python fragments, run in order in one session against a real broker.

The fragments live inside a reader's own program (they use the reader's ``spark`` and,
for the sink, the reader's ``orders``), so tests/ops/test_doc_examples.py cannot run
them as programs. Here they run as written, with the documented name server and paths
replaced by the test's, in one namespace the way a notebook runs its cells; each is then
checked against the messages the test sent. A fragment added to the document fails
:func:`test_every_fragment_is_checked` until it has its check here.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from rocklet.client.message import Message
from rocklet.client.producer import Producer
from tests.spark.support import BrokerThread, pull_all
from tests.spark.test_pushdown import pushdown_enabled

pytestmark = pytest.mark.spark

DOC = Path(__file__).resolve().parents[2] / "docs" / "spark.md"
DEFAULT_NAMESRV = "127.0.0.1:9876"
#: The fragments, in the document's order, by what they define or do.
CHECKED = [
    "df: one topic",
    "register",
    "df: two topics, two tags, shown",
    "orders: pushed-down filters",
    "eu_orders: SQL92",
    "stream by pattern into parquet",
    "topic_progress",
    "stream with commitOffsets",
    "audit: offline",
    "write, then a streaming copy",
]

# (topic, queues, messages): tags cycle through TAGS, regions through eu/us, and the
# amounts through 0, 50, ..., 250, so every filter of the document keeps some and drops some.
TAGS = ("created", "paid", "shipped")
TOPICS = {"orders": (4, 36), "refunds": (2, 9), "orders-2025": (2, 10)}


def fragments() -> list[str]:
    """The document's Python blocks, in order."""
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_every_fragment_is_checked() -> None:
    assert len(fragments()) == len(CHECKED)


def _row(topic: str, i: int) -> dict[str, Any]:
    return {
        "topic": topic,
        "tags": TAGS[i % 3],
        "region": "eu" if i % 2 else "us",
        "amount": i % 6 * 50,
        "body": f"{topic} #{i}".encode(),
    }


def _send(namesrv: str, rows: list[dict[str, Any]], queues: dict[str, int]) -> list[dict[str, Any]]:
    """Send each row to queue ``i % queues`` of its topic; returns them with ``queueId``."""

    async def main() -> list[dict[str, Any]]:
        sent = []
        async with Producer("spark-doc-producer", namesrv) as producer:
            for i, row in enumerate(rows):
                props = {"region": row["region"], "amount": str(row["amount"])}
                msg = Message(row["topic"], row["body"], tags=row["tags"], properties=props)
                result = await producer.send_orderly(msg, i % queues[row["topic"]])
                sent.append({**row, "queueId": result.message_queue.queue_id})
        return sent

    return asyncio.run(main())


class Fragments:
    """Runs the document's fragments one by one in a shared namespace."""

    def __init__(self, spark: SparkSession, namesrv: str, paths: dict[str, Path]) -> None:
        self.blocks = fragments()
        self.namespace: dict[str, Any] = {"spark": spark}
        self.namesrv = namesrv
        self.paths = paths
        self.next = 0

    def run(self, **inputs: Any) -> dict[str, Any]:
        """Run the next fragment with ``inputs`` in scope; returns the namespace."""
        source = self.blocks[self.next].replace(DEFAULT_NAMESRV, self.namesrv)
        for documented, real in self.paths.items():
            source = source.replace(f'"{documented}"', repr(str(real)))
        self.namespace.update(inputs)
        exec(compile(source, f"docs/spark.md fragment {self.next}", "exec"), self.namespace)
        self.next += 1
        return self.namespace


def _bodies(df: DataFrame) -> set[bytes]:
    return {bytes(row.body) for row in df.select("body").collect()}


def test_the_fragments_of_spark_md_run_in_order(
    spark: SparkSession,
    filtering_broker: BrokerThread,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    broker = filtering_broker  # SQL92 selectors need enablePropertyFilter, as the text says
    queues = {topic: n for topic, (n, _) in TOPICS.items()}
    for topic, n in queues.items():
        broker.set_queues(topic, n)
    rows = [_row(topic, i) for topic, (_, count) in TOPICS.items() for i in range(count)]
    sent = _send(broker.namesrv, rows, queues)

    def bodies(keep: Any, topics: tuple[str, ...] = ("orders",)) -> set[bytes]:
        return {r["body"] for r in sent if r["topic"] in topics and keep(r)}

    store_copy = tmp_path / "store-copy"
    paths = {
        "/data/orders": tmp_path / "lake" / "orders",
        "/chk/orders": tmp_path / "chk" / "orders",
        "/chk/orders-copy": tmp_path / "chk" / "orders-copy",
        "/var/lib/rocklet/store": store_copy,
    }
    docs = Fragments(spark, broker.namesrv, paths)

    # "Registering the format", then the section's first read.
    ns = docs.run()
    assert _bodies(ns["df"]) == bodies(lambda r: True)
    docs.run()

    ns = docs.run()  # two topics, `created || paid`, and .show()
    paid_or_created = bodies(lambda r: r["tags"] in ("created", "paid"), ("orders", "refunds"))
    assert _bodies(ns["df"]) == paid_or_created
    assert "created" in capsys.readouterr().out

    with pushdown_enabled(spark):  # the fragment turns it on; the session gets it back
        ns = docs.run()
        pushed = bodies(lambda r: r["tags"] in ("created", "paid") and r["queueId"] in (0, 1))
        assert _bodies(ns["orders"]) == pushed

    ns = docs.run()
    assert _bodies(ns["eu_orders"]) == bodies(lambda r: r["region"] == "eu" and r["amount"] > 100)

    ns = docs.run()  # a pattern stream into parquet, availableNow: it has stopped
    assert ns["query"].exception() is None
    lake = spark.read.parquet(str(paths["/data/orders"]))
    assert _bodies(lake) == bodies(lambda r: True, ("orders-2025",))

    capsys.readouterr()
    docs.run()
    # The first batch of a new checkpoint has no start offsets: rows is None there.
    assert capsys.readouterr().out.split() == ["orders-2025", "None", "0", "2"]

    ns = docs.run()  # defines a stream with commitOffsets; the reader starts it
    assert ns["stream"].isStreaming

    shutil.copytree(tmp_path / "store", store_copy)  # "Read a stopped store or a copy."
    ns = docs.run()
    assert _bodies(ns["audit"]) == bodies(lambda r: r["tags"] == "created")

    # "Writing": the reader's own orders, then a stream that copies what arrives from now on.
    for topic in ("orders-out", "orders-copy"):
        broker.set_queues(topic, 2)
    mine = spark.createDataFrame(
        [("alice", "created", 120.0), ("bob", "paid", 80.0)],
        "customer string, status string, amount double",
    )
    docs.run(orders=mine)
    written = pull_all(broker.namesrv, "orders-out")
    assert sorted(json.loads(m.body)["customer"] for m in written) == ["alice", "bob"]
    assert sorted((m.keys, m.tags) for m in written) == [
        (("alice",), "created"),
        (("bob",), "paid"),
    ]
    (copy,) = spark.streams.active
    try:
        copy.processAllAvailable()  # it has its starting offsets: the queues' ends
        arrived = _send(broker.namesrv, [_row("orders", 99)], queues)
        copy.processAllAvailable()
        assert [m.body for m in pull_all(broker.namesrv, "orders-copy")] == [arrived[0]["body"]]
    finally:
        copy.stop()
    assert copy.exception() is None
