"""The exactly-once sink against a real RocketMQ 4.9.4 name server and broker.

The sink uses only requests RocketMQ has (half messages, END_TRANSACTION, query by key
and by UNIQ_KEY, view by id, topic creation); this runs its two-phase commit on
RocketMQ's own transactional store: a ``df.write`` with
``deliveryGuarantee=exactly-once``, then the replay of its commit, which must read the
decision back, find every message committed (RocketMQ's index) and end nothing twice.

Needs a RocketMQ 4.9.4 release and Java (see tests/replication/test_anchor_interop.py);
skipped, saying which is missing, otherwise.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from rocklet.spark.options import parse_sink_options
from rocklet.spark.sink_txn import JOURNAL_TOPIC, TXN_PROPERTY, commit_batch, connect
from tests.replication.test_anchor_interop import _missing, _rmq_topic, _rmq_up
from tests.spark.support import pull_all

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.skipif(_missing() is not None, reason=_missing() or ""),
    pytest.mark.timeout(300),
]

ROWS = 150
TOPIC = "EoRmqOut"


def test_an_exactly_once_write_and_its_replayed_commit_on_rocketmq(
    spark: SparkSession, tmp_path: Path
) -> None:
    rocketmq = _rmq_up(tmp_path / "rmq")
    ns = rocketmq.namesrv
    try:
        asyncio.run(_rmq_topic(ns, TOPIC, 2))  # the journal topic is left to the sink
        df = spark.range(ROWS, numPartitions=3).select(
            F.concat(F.lit("rmq-row-"), F.col("id").cast("string")).alias("body")
        )
        df.write.format("rocklet").option("nameServer", ns).option("topic", TOPIC).option(
            "deliveryGuarantee", "exactly-once"
        ).mode("append").save()
        expected = Counter(f"rmq-row-{i}".encode() for i in range(ROWS))
        delivered = pull_all(ns, TOPIC)
        assert Counter(m.body for m in delivered) == expected
        assert all(m.properties.get(TXN_PROPERTY) for m in delivered)
        heads = [m for m in pull_all(ns, JOURNAL_TOPIC) if m.keys]
        assert len(heads) == 1  # the write's one decision
        (batch_key,) = heads[0].keys

        # A commit of the same batch again (as a replay after a driver crash runs it):
        # it reads the decision and its handles back from RocketMQ, looks each message
        # up by UNIQ_KEY, finds all committed, and ends none a second time.
        async def replay() -> int:
            async with connect(parse_sink_options({"nameServer": ns, "topic": TOPIC})) as (
                admin,
                producer,
            ):
                return await commit_batch(admin, producer, batch_key, [])

        assert asyncio.run(replay()) == 0
        assert Counter(m.body for m in pull_all(ns, TOPIC)) == expected
    finally:
        rocketmq.stop()
