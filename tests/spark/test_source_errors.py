"""Reads that cannot work fail on the driver and say what to create: topics, groups."""

from __future__ import annotations

import asyncio
import io
import re
import shlex
from pathlib import Path

import pytest
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from rocklet.admin.run import run_admin_async
from rocklet.cli import build_parser
from rocklet.spark.options import DEFAULT_CONSUMER_GROUP
from tests.spark.support import QUERY_TIMEOUT, BrokerThread, produce

pytestmark = pytest.mark.spark


def read(spark: SparkSession, namesrv: str, **options: str) -> DataFrame:
    reader = spark.read.format("rocklet").option("nameServer", namesrv)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_stream(spark: SparkSession, namesrv: str, checkpoint: Path, **options: str) -> None:
    reader = spark.readStream.format("rocklet").option("nameServer", namesrv)
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT), "the availableNow query did not finish"
    exc = query.exception()
    if exc is not None:
        raise exc


def suggested_commands(message: str, verb: str) -> list[list[str]]:
    """The ``rocklet admin <verb> ...`` commands an error message suggests, as argv."""
    found = re.findall(rf"rocklet admin {verb} [^;\n]*?(?=;|\. |\n| \(|$)", message)
    assert found, f"no 'rocklet admin {verb}' command in: {message}"
    return [shlex.split(cmd)[1:] for cmd in found]


def run_admin(argv: list[str]) -> tuple[int, str]:
    args = build_parser().parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    code = asyncio.run(run_admin_async(args, out, err, environ={}))
    return code, out.getvalue() + err.getvalue()


def test_a_topic_that_does_not_exist_fails_batch_and_stream_reads(
    spark: SparkSession, broker: BrokerThread, tmp_path: Path
) -> None:
    wanted = rf"topic 'Nope' does not exist on name server {re.escape(broker.namesrv)}"
    with pytest.raises(PySparkException, match=wanted) as batch:
        read(spark, broker.namesrv, subscribe="Nope").collect()
    # The suggested command is a real one, and it works.
    (create,) = suggested_commands(str(batch.value), "updateTopic")
    assert create[create.index("-c") + 1] == "DefaultCluster"
    with pytest.raises(PySparkException, match=r"'Nope' does not exist"):
        read(spark, broker.namesrv, assign='{"Nope": [0]}').collect()
    with pytest.raises(PySparkException, match=r"no topic .* matches subscribePattern 'Nop.*'"):
        read(spark, broker.namesrv, subscribePattern="Nop.*").collect()

    with pytest.raises(StreamingQueryException, match=wanted):
        run_stream(spark, broker.namesrv, tmp_path / "chk", subscribe="Nope")

    code, out = run_admin(create)  # answers once the name server has the route
    assert code == 0, out
    assert read(spark, broker.namesrv, subscribe="Nope").count() == 0
    run_stream(spark, broker.namesrv, tmp_path / "chk2", subscribe="Nope")


def test_a_missing_consumer_group_is_named_with_the_command_that_creates_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    broker = BrokerThread(tmp_path / "store", auto_create_subscription_group=False)
    try:
        broker.set_queues("Audit", 2)
        produce(broker.namesrv, "Audit", [b"a", b"b", b"c"], queues=2)
        with pytest.raises(PySparkException) as batch:
            read(spark, broker.namesrv, subscribe="Audit").collect()
        message = str(batch.value)
        assert f"consumer group '{DEFAULT_CONSUMER_GROUP}' does not exist" in message
        assert "autoCreateSubscriptionGroup=false" in message and "consumerGroup" in message
        with pytest.raises(StreamingQueryException, match="consumer group 'auditors' does not"):
            run_stream(
                spark,
                broker.namesrv,
                tmp_path / "chk",
                subscribe="Audit",
                consumerGroup="auditors",
                startingOffsets="earliest",
            )

        # Create the group with the command the message gives; the read then works.
        (create,) = suggested_commands(message, "updateSubGroup")
        assert create[create.index("-g") + 1] == DEFAULT_CONSUMER_GROUP
        assert create[create.index("-b") + 1] == broker.broker.addr
        code, out = run_admin(create)
        assert code == 0, out
        assert read(spark, broker.namesrv, subscribe="Audit").count() == 3
        # Another group is an option away (and needs creating just the same).
        create[create.index("-g") + 1] = "auditors"
        assert run_admin(create)[0] == 0
        df = read(spark, broker.namesrv, subscribe="Audit", consumerGroup="auditors")
        assert sorted(r.body for r in df.collect()) == [b"a", b"b", b"c"]
    finally:
        broker.stop()
