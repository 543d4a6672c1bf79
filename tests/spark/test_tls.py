"""The connector over TLS: a sink and a batch read against a broker that enforces TLS."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from rocklet.broker.tls_config import TlsSettings
from rocklet.spark.options import parse_source_options
from rocklet.transport.tls import ServerTlsConfig, TlsMode
from tests.spark.support import BrokerThread
from tests.tlscerts import Pki, make_pki

pytestmark = pytest.mark.spark


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
def tls_broker(tmp_path: Path, pki: Pki) -> Iterator[BrokerThread]:
    server = ServerTlsConfig(
        mode=TlsMode.ENFORCING, cert_path=pki.server_cert, key_path=pki.server_key
    )
    tls = TlsSettings(server=server, client_enabled=True, client_trust_cert_path=pki.ca_file)
    thread = BrokerThread(tmp_path / "store", tls=tls)
    try:
        yield thread
    finally:
        thread.stop()


def test_write_and_read_back_over_tls(
    spark: SparkSession, tls_broker: BrokerThread, pki: Pki
) -> None:
    tls_broker.set_queues("TlsOut", 2)
    rows = [(f"secret-{i}",) for i in range(20)]
    df = spark.createDataFrame(rows, "body string")
    df.write.format("rocklet").option("nameServer", tls_broker.namesrv).option(
        "topic", "TlsOut"
    ).option("tlsCaFile", str(pki.ca_file)).mode("append").save()

    read = (
        spark.read.format("rocklet")
        .option("nameServer", tls_broker.namesrv)
        .option("subscribe", "TlsOut")
        .option("tls", "true")
        .option("tlsCaFile", str(pki.ca_file))
        .load()
    )
    assert sorted(r.body for r in read.collect()) == sorted(r[0].encode() for r in rows)

    # Without TLS options the connector cannot talk to this broker; with TLS but without
    # the CA, the certificate does not verify.
    plain = spark.read.format("rocklet").option("nameServer", tls_broker.namesrv)
    with pytest.raises(PySparkException, match="requires TLS"):
        plain.option("subscribe", "TlsOut").load().collect()
    unverified = plain.option("subscribe", "TlsOut").option("tls", "true")
    with pytest.raises(PySparkException, match="certificate verify failed"):
        unverified.load().collect()


def test_tls_options_are_checked_and_the_password_hidden() -> None:
    opts = parse_source_options(
        {"nameServer": "h:1", "subscribe": "t", "tlsCertFile": "c.pem", "tlsKeyPassword": "pw"},
        streaming=False,
    )
    assert opts.tls.enabled and opts.tls.cert_file == "c.pem"
    assert "pw" not in repr(opts)
    with pytest.raises(ValueError, match="contradicts"):
        parse_source_options(
            {"nameServer": "h:1", "subscribe": "t", "tls": "false", "tlsInsecure": "true"},
            streaming=False,
        )
