"""SQL92 selectors in reads (``expressionType=SQL92``): the broker filters by properties."""

from __future__ import annotations

import asyncio

import pytest
from pyspark.sql import SparkSession

from rocklet.client.message import Message
from rocklet.client.producer import Producer
from tests.spark.support import BrokerThread
from tests.spark.test_pushdown import messages_pulled, pushdown_enabled

pytestmark = pytest.mark.spark


def _produce(namesrv: str, topic: str, n: int) -> None:
    async def main() -> None:
        async with Producer("spark-sql92-producer", namesrv) as producer:
            for i in range(n):
                props = {"n": str(i), "region": "eu" if i % 3 else "us"}
                tags = "even" if i % 2 == 0 else "odd"
                await producer.send(Message(topic, f"m{i}".encode(), tags=tags, properties=props))

    asyncio.run(main())


def test_an_sql92_selector_reads_only_matching_messages_and_keeps_tags_with_spark(
    spark: SparkSession, filtering_broker: BrokerThread
) -> None:
    broker = filtering_broker
    broker.set_queues("Sql92", 2)
    _produce(broker.namesrv, "Sql92", 60)
    selector = "n >= 30 AND region = 'eu'"
    wanted = {f"m{i}".encode() for i in range(30, 60) if i % 3}
    with pushdown_enabled(spark):
        df = (
            spark.read.format("rocklet")
            .option("nameServer", broker.namesrv)
            .option("subscribe", "Sql92")
            .option("expressionType", "sql92")
            .option("subExpression", selector)
            .option("consumerGroup", "sql92-reader")
            .load()
        )
        got = [(bytes(r.body), r.tags) for r in df.where("tags = 'even'").collect()]
    # The tag filter stays with Spark (a pull has one expression, the selector here).
    assert sorted(got) == sorted((b, "even") for b in wanted if int(b[1:]) % 2 == 0)
    # The broker applied the selector: only the 20 messages it matches left it.
    assert messages_pulled(broker, "Sql92", "sql92-reader") == len(wanted) == 20
