"""broker.conf parsing: Java properties syntax, RocketMQ names and defaults, overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocklet.broker.config import (
    BrokerConfig,
    BrokerRole,
    ConfigError,
    NamesrvConfig,
    load_broker_config,
    parse_properties,
    property_name,
    with_overrides,
)
from rocklet.store.config import FlushDiskType

# The broker.conf RocketMQ ships in conf/2m-2s-async, plus our edge cases.
SAMPLE = r"""
# comment
! another comment
brokerClusterName=DefaultCluster
brokerName : broker-b
brokerId=0
deleteWhen=04
fileReservedTime=48
brokerRole=ASYNC_MASTER
flushDiskType = SYNC_FLUSH
   listenPort   10921
namesrvAddr=127.0.0.1:9876;\
            127.0.0.2:9876
storePathRootDir=/tmp/rocklet-store
autoCreateTopicEnable=false
messageDelayLevel=1s 5s \
  10s
someFutureKey=keep me
"""


def test_parses_java_properties_syntax() -> None:
    props = parse_properties(SAMPLE)
    assert props["brokerName"] == "broker-b"
    assert props["flushDiskType"] == "SYNC_FLUSH"
    assert props["listenPort"] == "10921"
    assert props["namesrvAddr"] == "127.0.0.1:9876;127.0.0.2:9876"
    assert props["messageDelayLevel"] == "1s 5s 10s"
    assert "comment" not in "".join(props)


def test_escapes_and_separators() -> None:
    props = parse_properties("a\\=b=c\\u0041\nempty=\nflag\nx:y=z\n\\#notcomment=1\nend\\\\\n")
    assert props == {
        "a=b": "cA",
        "empty": "",
        "flag": "",
        "x": "y=z",
        "#notcomment": "1",
        "end\\": "",
    }


def test_broker_conf_maps_to_fields(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(SAMPLE)
    config = load_broker_config(conf, environ={})
    assert config.broker_cluster_name == "DefaultCluster"
    assert config.broker_name == "broker-b"
    assert config.listen_port == 10921
    assert config.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert config.broker_role is BrokerRole.ASYNC_MASTER
    assert config.file_reserved_time_hours == 48
    assert config.auto_create_topic_enable is False
    assert config.store_path_root_dir == Path("/tmp/rocklet-store")
    assert config.commit_log_dir == Path("/tmp/rocklet-store/commitlog")
    assert config.namesrv_addr == "127.0.0.1:9876;127.0.0.2:9876"
    assert config.extra == {"someFutureKey": "keep me"}


def test_defaults_are_rocketmqs() -> None:
    config = load_broker_config(None, environ={})
    assert (config.listen_port, config.broker_id, config.default_topic_queue_nums) == (10911, 0, 8)
    assert config.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert config.mapped_file_size_commit_log == 1 << 30
    assert config.mapped_file_size_consume_queue == 6_000_000
    assert (config.max_hash_slot_num, config.max_index_num) == (5_000_000, 20_000_000)
    assert config.max_message_size == 4 * 1024 * 1024
    assert config.flush_interval_commit_log_ms == 500
    assert config.register_name_server_period_ms == 30_000
    assert config.message_delay_level.split()[-1] == "2h"
    assert config.namesrv_addr is None
    assert NamesrvConfig().listen_port == 9876


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("listenPort=ten", "listenPort"),
        ("autoCreateTopicEnable=yes", "autoCreateTopicEnable"),
        ("flushDiskType=SOMETIMES", "flushDiskType"),
        ("listenPort=70000", "listenPort"),
        ("diskMaxUsedSpaceRatio=99", "diskMaxUsedSpaceRatio"),
        ("diskSpaceWarningLevelRatio=95", "diskSpaceWarningLevelRatio"),
        ("diskSpaceWarningLevelRatio=0.9", "diskSpaceWarningLevelRatio"),
        ("diskSpaceCleanForciblyRatio=20", "diskSpaceCleanForciblyRatio"),
        ("cleanFileForciblyEnable=maybe", "cleanFileForciblyEnable"),
        ("brokerId=1", "brokerId"),
        ("deleteWhen=25", "deleteWhen"),
        ("deleteWhen=4am", "deleteWhen"),
        ("messageDelayLevel=1s 5x", "messageDelayLevel"),
        ("mappedFileSizeCommitLog=2147483648", "mappedFileSizeCommitLog"),
        ("maxIndexNum=1", "index sizes"),
    ],
)
def test_invalid_values_name_key_and_value(tmp_path: Path, text: str, key: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(text + "\n")
    with pytest.raises(ConfigError, match=key):
        load_broker_config(conf, environ={})


def test_disk_thresholds_reach_the_store(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "diskMaxUsedSpaceRatio=95\ndiskSpaceCleanForciblyRatio=80\n"
        "diskSpaceWarningLevelRatio=88\ncleanFileForciblyEnable=false\n"
    )
    store = load_broker_config(conf, environ={}).store_config()
    assert store.disk_max_used_space_ratio == 0.95  # no longer capped at 85: independent
    assert store.disk_force_clean_ratio == 0.80
    assert store.disk_space_warning_level_ratio == 0.88
    assert store.clean_file_forcibly_enable is False
    defaults = BrokerConfig().store_config()
    assert (defaults.disk_force_clean_ratio, defaults.disk_space_warning_level_ratio) == (
        0.85,
        0.90,
    )
    assert defaults.clean_file_forcibly_enable is True
    assert (
        BrokerConfig.from_properties({"cleanResourceInterval": "500"}).clean_resource_interval_ms
        == 500
    )


def test_overrides_and_environment(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=10921\n")
    config = load_broker_config(
        conf,
        {"listen_port": 0, "storePathRootDir": str(tmp_path), "namesrv_addr": None},
        environ={"NAMESRV_ADDR": "10.1.1.1:9876"},
    )
    assert config.listen_port == 0
    assert config.store_path_root_dir == tmp_path
    assert config.namesrv_addr == "10.1.1.1:9876"
    with pytest.raises(ConfigError, match="unknown configuration key"):
        with_overrides(config, {"noSuchThing": 1})
    with pytest.raises(ConfigError, match="brokerRole"):
        with_overrides(BrokerConfig(), {"brokerRole": "SLAVE"})


def test_property_names_round_trip_through_files() -> None:
    assert property_name("flush_interval_commit_log_ms") == "flushIntervalCommitLog"
    assert property_name("broker_ip1") == "brokerIP1"
    assert property_name("short_polling_time_ms") == "shortPollingTimeMills"
    config = BrokerConfig.from_properties({"brokerIP1": "10.0.0.1", "transactionTimeOut": "9"})
    assert (config.broker_ip1, config.transaction_timeout_ms) == ("10.0.0.1", 9)


keys = st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=1, max_size=12)
values = st.text(
    st.characters(codec="ascii", categories=["L", "N", "P", "Zs"], exclude_characters="\\"),
    max_size=20,
)


@given(st.dictionaries(keys, values, max_size=8))
def test_key_value_lines_parse_back(props: dict[str, str]) -> None:
    text = "\n".join(f"{k} = {v}" for k, v in props.items())
    assert parse_properties(text) == {k: v.strip() for k, v in props.items()}


def test_defaults_apply_only_where_the_file_is_silent(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={tmp_path / 'from-file'}\n")
    fallback = {"store_path_root_dir": Path("data")}
    named = load_broker_config(conf, defaults=fallback, environ={})
    assert named.store_path_root_dir == tmp_path / "from-file"
    conf.write_text("listenPort=10921\n")
    silent = load_broker_config(conf, defaults=fallback, environ={})
    assert silent.store_path_root_dir == Path("data")
    flag = load_broker_config(
        conf, {"store_path_root_dir": tmp_path / "flag"}, defaults=fallback, environ={}
    )
    assert flag.store_path_root_dir == tmp_path / "flag"


def test_store_path_commit_log_places_the_segments(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"storePathRootDir={tmp_path / 'root'}\nstorePathCommitLog={tmp_path / 'fast'}\n"
    )
    store = load_broker_config(conf, environ={}).store_config()
    assert store.commitlog_dir == tmp_path / "fast"
    assert BrokerConfig(store_path_root_dir=tmp_path).store_config().commitlog_dir == (
        tmp_path / "commitlog"
    )
