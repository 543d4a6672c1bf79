"""Keys Rocklet will not use: typos with a suggestion, RocketMQ keys it does not implement."""

from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

from rocklet.broker.config import (
    BrokerConfig,
    NamesrvConfig,
    load_broker_config,
    load_namesrv_config,
    property_names,
)
from rocklet.broker.config_keys import review_keys
from rocklet.broker.rocketmq_keys import (
    MESSAGE_STORE_CONFIG_KEYS,
    NETTY_CLIENT_CONFIG_KEYS,
    ROCKETMQ_BROKER_KEYS,
    ROCKETMQ_NAMESRV_KEYS,
)

BROKER = property_names(BrokerConfig)


def test_our_property_names_are_rocketmqs() -> None:
    # Every key Rocklet reads is RocketMQ's spelling, except our own additions and the
    # two disk thresholds RocketMQ 4.9.4 reads as JVM properties (5.x: broker.conf keys).
    disk = {"diskSpaceCleanForciblyRatio", "diskSpaceWarningLevelRatio"}
    ours = {
        "metricsPort",
        "maxRequestsInFlightPerConnection",
        "maxRequestsPerReadTurn",
        "listenHost",
        "fastListenPort",  # RocketMQ forces listenPort - 2
    }
    ours |= {"aclFile", "accessKey", "secretKey"}  # ACL: the file, registration signing
    ours |= {"haAllowedSlaves", "haAuthEnable", "haTlsEnable"}  # who may follow a master
    ours |= {"commitLogPageAheadBytes"}  # the commitlog's pages cached ahead of the writer
    assert ours | disk == BROKER - ROCKETMQ_BROKER_KEYS
    assert "mappedFileSizeCommitLog" in MESSAGE_STORE_CONFIG_KEYS
    assert "connectTimeoutMillis" in NETTY_CLIENT_CONFIG_KEYS
    assert property_names(NamesrvConfig) & ROCKETMQ_NAMESRV_KEYS == {
        "listenPort",
        "kvConfigPath",
        "orderMessageEnable",
        "serverSocketRcvBufSize",
        "serverSocketSndBufSize",
        "writeBufferHighWaterMark",
        "serverChannelMaxIdleTimeSeconds",
    }


def test_typos_get_the_closest_known_name() -> None:
    review = review_keys(
        ["mapedFileSizeCommitLog", "brokerip1", "flushDiskTyp", "listenPort", "colour"],
        BROKER,
        ROCKETMQ_BROKER_KEYS,
    )
    assert review.unknown == {
        "mapedFileSizeCommitLog": "mappedFileSizeCommitLog",
        "brokerip1": "brokerIP1",
        "flushDiskTyp": "flushDiskType",
        "colour": None,
    }
    assert review.not_implemented == ()
    assert not review.clean


def test_rocketmq_keys_rocklet_ignores_are_listed_apart() -> None:
    review = review_keys(
        ["highSpeedMode", "enableCalcFilterBitMap", "brokerName", "serverWorkerThreads"],
        BROKER,
        ROCKETMQ_BROKER_KEYS,
    )
    assert review.unknown == {}
    assert review.not_implemented == (
        "enableCalcFilterBitMap",
        "highSpeedMode",
        "serverWorkerThreads",
    )


def test_the_loaders_warn_and_keep_the_keys(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "mapedFileSizeCommitLog=1048576\nenableCalcFilterBitMap=true\nbrokerName=b\n"
        "enablePropertyFilter=true\n"
    )
    with capture_logs() as logs:
        config = load_broker_config(conf)
    assert config.broker_name == "b" and config.enable_property_filter
    assert config.extra == {"mapedFileSizeCommitLog": "1048576", "enableCalcFilterBitMap": "true"}
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [(e.get("key"), e.get("did_you_mean"), e.get("keys")) for e in warnings] == [
        ("mapedFileSizeCommitLog", "mappedFileSizeCommitLog", None),
        (None, None, "enableCalcFilterBitMap"),
    ]
    assert all(e["file"] == str(conf) for e in warnings)

    namesrv = tmp_path / "namesrv.conf"
    namesrv.write_text("listenPort=9877\nclusterTest=true\nlistenPrt=1\n")
    with capture_logs() as logs:
        assert load_namesrv_config(namesrv).listen_port == 9877
    assert [(e.get("key"), e.get("keys")) for e in logs] == [
        ("listenPrt", None),
        (None, "clusterTest"),
    ]


def test_a_clean_file_says_nothing(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=C\nmetricsPort=0\nstoreReplyMessageEnable=false\n")
    with capture_logs() as logs:
        config = load_broker_config(conf)
    assert logs == []
    assert config.store_reply_message_enable is False
