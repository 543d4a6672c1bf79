"""The connector's ``accessKey``/``secretKey`` options against a broker with ACL on."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from rocklet.spark.options import RockletOptionError, parse_sink_options, parse_source_options
from tests.broker.acl_helpers import CONSUMER, GROUP, PRODUCER, TOPIC, acl_document, write_acl
from tests.spark.support import BrokerThread

pytestmark = pytest.mark.spark


def test_options_parse_credentials_and_hide_the_secret() -> None:
    opts = parse_sink_options({"nameServer": "h:1", "accessKey": "ak12345", "secretKey": "sk12345"})
    assert opts.credentials is not None and opts.credentials.access_key == "ak12345"
    assert "sk12345" not in repr(opts)
    with pytest.raises(RockletOptionError, match="together"):
        parse_source_options(
            {"nameServer": "h:1", "topic": "t", "accessKey": "ak"}, streaming=False
        )


def test_write_and_read_signed_and_unsigned_refused(spark: SparkSession, tmp_path: Path) -> None:
    acl_file = tmp_path / "conf" / "plain_acl.yml"
    write_acl(acl_file, acl_document())
    broker = BrokerThread(tmp_path / "store", acl_enable=True, acl_file=acl_file)
    try:
        broker.set_queues(TOPIC, 2)
        df = spark.createDataFrame([(f"row-{i}",) for i in range(20)], "body string")
        (
            df.write.format("rocklet")
            .option("nameServer", broker.namesrv)
            .option("topic", TOPIC)
            .option("accessKey", PRODUCER.access_key)
            .option("secretKey", PRODUCER.secret_key)
            .mode("append")
            .save()
        )

        def read(**creds: str) -> list[str]:
            reader = (
                spark.read.format("rocklet")
                .option("nameServer", broker.namesrv)
                .option("subscribe", TOPIC)
                .option("startingOffsets", "earliest")
                .option("consumerGroup", GROUP)
            )
            for key, value in creds.items():
                reader = reader.option(key, value)
            return sorted(r.body.decode() for r in reader.load().select("body").collect())

        got = read(accessKey=CONSUMER.access_key, secretKey=CONSUMER.secret_key)
        assert got == sorted(f"row-{i}" for i in range(20))
        with pytest.raises(Exception, match="No accessKey is configured"):
            read()
    finally:
        broker.stop()
