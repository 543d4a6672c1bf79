r"""PySpark connector for Rocklet and RocketMQ 4.x: format ``rocklet``.

Spark 4's Python Data Source API (pyspark >= 4.2). Installing this package is enough:
Spark registers every top-level ``pyspark_*`` module's ``DefaultSource`` by itself.
Otherwise, register it per session::

    from rocklet.spark import RockletDataSource
    spark.dataSource.register(RockletDataSource)

Read a topic (batch or stream), write to one, or read a store directory offline::

    spark.read.format("rocklet").option("nameServer", "127.0.0.1:9876") \\
        .option("subscribe", "orders").load()
    df.write.format("rocklet").option("nameServer", "127.0.0.1:9876") \\
        .option("topic", "out").mode("append").save()
    spark.read.format("rocklet").load("/var/lib/rocketmq/store")

Per-topic rows and lag of a stream's micro-batch: ``topic_progress(query.lastProgress)``.
"""

from rocklet.spark.datasource import FORMAT, RockletDataSource
from rocklet.spark.errors import (
    ConsumerGroupNotFoundError,
    RockletSourceError,
    TopicNotFoundError,
)
from rocklet.spark.options import RockletOptionError
from rocklet.spark.progress import TopicProgress, topic_progress

#: What Spark's automatic registration looks for in a ``pyspark_*`` module.
DefaultSource = RockletDataSource

__all__ = [
    "FORMAT",
    "ConsumerGroupNotFoundError",
    "DefaultSource",
    "RockletDataSource",
    "RockletOptionError",
    "RockletSourceError",
    "TopicNotFoundError",
    "TopicProgress",
    "topic_progress",
]
