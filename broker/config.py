"""Broker and name server configuration, read from RocketMQ ``broker.conf`` files.

Files use Java properties syntax and RocketMQ's property names (``brokerClusterName``,
``listenPort``, ``flushDiskType``, ...), so existing files keep working. Each property
maps to a snake_case field of a frozen dataclass; a unit goes in the field name when
the property has one (``flushIntervalCommitLog`` -> ``flush_interval_commit_log_ms``).
Defaults are RocketMQ 4.9's (``BrokerConfig``, ``MessageStoreConfig``,
``NettyServerConfig``). Keys Rocklet does not read are kept in ``extra``; RocketMQ
ignores them silently, Rocklet warns at start, telling typos (with the closest known
name) from RocketMQ keys it does not implement (:mod:`rocklet.broker.config_keys`). A
value that does not parse is a :class:`ConfigError`
naming the key and the value, where Java would die with a bare
``NumberFormatException``.

This module and the CLI are the only places that read the environment: ``NAMESRV_ADDR``
fills ``namesrvAddr`` when neither the file nor the command line sets it, as in
RocketMQ.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Self, TypeVar

from rocklet.broker.config_keys import log_key_review, review_keys
from rocklet.broker.config_names import (
    property_field_table,
    property_name,
    property_names,
    typed_properties,
)
from rocklet.broker.ha.guard import AllowList, AllowListError
from rocklet.broker.rocketmq_keys import ROCKETMQ_BROKER_KEYS, ROCKETMQ_NAMESRV_KEYS
from rocklet.broker.tls_keys import TLS_KEYS, USE_TLS
from rocklet.protocol.acl import Credentials
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.names import check_topic_name
from rocklet.protocol.properties_text import parse_properties
from rocklet.store.config import (
    DEFAULT_DELAY_LEVELS,
    FlushDiskType,
    StoreConfig,
    parse_delay_levels,
)
from rocklet.transport.flow import (
    DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION,
    DEFAULT_REQUESTS_PER_TURN,
    FlowLimits,
)

__all__ = [
    "BrokerConfig",
    "BrokerRole",
    "ConfigError",
    "NamesrvConfig",
    "load_broker_config",
    "load_namesrv_config",
    "parse_properties",
    "property_name",
    "property_names",
    "typed_properties",
    "with_overrides",
]

_C = TypeVar("_C", "BrokerConfig", "NamesrvConfig")


class ConfigError(ValueError):
    """A configuration file or value is invalid."""


class BrokerRole(enum.StrEnum):
    """``brokerRole``: master (replicating asynchronously or synchronously) or slave."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Everything a broker is configured with; build it with :func:`load_broker_config`."""

    broker_cluster_name: str = "DefaultCluster"
    #: Java defaults to the host name; a fixed name keeps data directories portable.
    broker_name: str = "broker-a"
    broker_id: int = 0  #: 0 = master, >= 1 = slave
    listen_port: int = 10911
    #: Rocklet only: the address the port binds (``--host``); RocketMQ binds every
    #: interface. ``rocklet standalone`` binds 127.0.0.1 unless told otherwise.
    listen_host: str = "0.0.0.0"
    #: ``None``: listenPort + 1, as RocketMQ forces (0 when listenPort is 0).
    ha_listen_port: int | None = None
    #: Rocklet only: the "VIP" port, where RocketMQ slaves sync metadata and clients
    #: with ``vipChannelEnabled`` send. ``None``: listenPort - 2, as RocketMQ forces
    #: (none when listenPort is 0); 0: any free port; -1: no VIP port.
    fast_listen_port: int | None = None
    #: ``;``-separated ``host:port`` list; ``None`` = no name server (standalone tests).
    namesrv_addr: str | None = None
    #: Address advertised to clients and in message ids; ``None`` = detect.
    broker_ip1: str | None = None
    broker_ip2: str | None = None  #: HA address; ``None`` = brokerIP1
    store_path_root_dir: Path = field(default_factory=lambda: Path.home() / "store")
    #: Defaults to ``<storePathRootDir>/commitlog`` (see :attr:`commit_log_dir`).
    store_path_commit_log: Path | None = None
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    broker_permission: int = 6  #: PermName READ | WRITE
    file_reserved_time_hours: int = 72
    delete_when: str = "04"  #: hour(s) of day, ``;``-separated
    disk_max_used_space_ratio: int = 75  #: percent
    #: Percent of disk use above which unexpired segments are deleted too (RocketMQ 5's
    #: key; 4.9.4 reads the JVM property ``rocketmq.broker.diskSpaceCleanForciblyRatio``).
    disk_space_clean_forcibly_ratio: int = 85
    #: Percent of disk use above which the disk is full and sends are refused (RocketMQ
    #: 5's key; 4.9.4: ``rocketmq.broker.diskSpaceWarningLevelRatio``).
    disk_space_warning_level_ratio: int = 90
    clean_file_forcibly_enable: bool = True
    #: How often retention runs (``cleanResourceInterval``).
    clean_resource_interval_ms: int = 10_000
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    #: Drop a topic's or group's statistics when it is deleted (RocketMQ's default: keep).
    auto_delete_unused_stats: bool = False
    default_topic_queue_nums: int = 8
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    message_index_enable: bool = True
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    max_message_size: int = 4 * 1024 * 1024  #: bytes
    flush_interval_commit_log_ms: int = 500
    flush_interval_consume_queue_ms: int = 1000
    flush_consumer_offset_interval_ms: int = 5000
    sync_flush_timeout_ms: int = 5000
    # Replication (docs/replication.md); haMasterAddress: the master's HA host:port.
    ha_master_address: str | None = None
    ha_send_heartbeat_interval_ms: int = 5000
    ha_housekeeping_interval_ms: int = 20_000
    ha_transfer_batch_size: int = 32 * 1024
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    slave_timeout_ms: int = 3000
    #: Rocklet only: who may connect to a master's HA port (docs/replication.md,
    #: "Who may follow"); ``None`` = loopback and private networks.
    ha_allowed_slaves: str | None = None
    #: Rocklet only: master: slaves must authenticate (default: ``aclEnable``);
    #: slave: authenticate with ``accessKey``/``secretKey`` (default: false).
    ha_auth_enable: bool | None = None
    #: Rocklet only, slave: TLS on the connection to the master's HA port (default:
    #: as ``tls.enable``); a master's HA port follows ``tls.server.mode`` instead.
    ha_tls_enable: bool | None = None
    check_crc_on_recover: bool = True
    #: Rocklet only: bytes past the commitlog's write position kept in the page cache
    #: by a background thread (docs/operations.md); 0 turns it off.
    commit_log_page_ahead_bytes: int = 16 * 1024 * 1024
    #: Pulls from a slave are served either way; with this on, a broker suggests the
    #: group's ``brokerId`` (or ``whichBrokerWhenConsumeSlowly`` for a lagging consumer)
    #: in each pull answer instead of always the master (docs/replication.md).
    slave_read_enable: bool = False
    #: Percent of physical memory a consumer may lag (commitlog bytes) before a pull
    #: answer suggests ``whichBrokerWhenConsumeSlowly`` (with ``slaveReadEnable``).
    access_message_in_memory_max_ratio: int = 40
    #: A slave answers PULL_OFFSET_MOVED as is (else PULL_RETRY_IMMEDIATELY, no jump).
    offset_check_in_slave: bool = False
    long_polling_enable: bool = True
    #: SQL92 property filters for consumers (``MessageSelector.bySql``); off by default,
    #: as in RocketMQ (docs/filtering.md).
    enable_property_filter: bool = False
    short_polling_time_ms: int = 1000
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    transfer_msg_by_heap: bool = True
    default_query_max_num: int = 32
    # Flow control (rocklet.transport.flow). RocketMQ's pool queue capacities become
    # the number of requests being handled, server-wide, past which a new request of
    # that pool is answered SYSTEM_BUSY "[OVERLOAD]..." instead of run.
    send_thread_pool_queue_capacity: int = 10_000  #: sends and send-backs
    pull_thread_pool_queue_capacity: int = 100_000  #: pulls (parked pulls not counted)
    reply_thread_pool_queue_capacity: int = 10_000  #: request-reply answers
    end_transaction_pool_queue_capacity: int = 100_000  #: END_TRANSACTION
    #: Rocklet only: requests of one connection handled at once before it stops reading.
    max_requests_in_flight_per_connection: int = DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION
    #: Rocklet only: requests handled per read callback before other sockets' turn.
    max_requests_per_read_turn: int = DEFAULT_REQUESTS_PER_TURN
    #: SO_RCVBUF / SO_SNDBUF of client sockets, bytes; 0 = the kernel's default.
    server_socket_rcv_buf_size: int = 0
    server_socket_snd_buf_size: int = 0
    #: Close a client connection silent both ways this long (rocklet.transport.idle); 0: never.
    server_channel_max_idle_time_seconds: int = 120
    #: Answers queued for a client, bytes, before its socket stops being read; 0 = 64 KiB.
    write_buffer_high_water_mark: int = 0
    transaction_check_interval_ms: int = 60_000
    transaction_timeout_ms: int = 6000
    transaction_check_max: int = 15
    reject_transaction_message: bool = False
    register_name_server_period_ms: int = 30_000
    register_broker_timeout_ms: int = 6000
    compressed_register: bool = False
    force_register: bool = True
    notify_consumer_ids_changed_enable: bool = True
    #: Store replies of request-reply on their topic too (besides pushing them).
    store_reply_message_enable: bool = True
    #: Create the message-trace topic (``msgTraceTopicName``, 1 queue) at start, for
    #: clients that send traces (``enableMsgTrace``).
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    #: Rocklet only: serve Prometheus metrics on this port (0 = any free port);
    #: ``None`` (the default) = no metrics endpoint.
    metrics_port: int | None = None
    #: Check every request against the plain ACL (docs/security.md).
    acl_enable: bool = False
    #: Rocklet only: the default ACL file; ``None`` = ``$ROCKETMQ_HOME/conf/plain_acl.yml``,
    #: or ``<storePathRootDir>/conf/plain_acl.yml`` without ROCKETMQ_HOME (:attr:`acl_path`).
    acl_file: Path | None = None
    #: Rocklet only: the account the broker signs its name-server requests with.
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    #: Properties RocketMQ does not define here (kept, never interpreted).
    extra: Mapping[str, str] = field(default_factory=dict)
    #: Not a property: the file this config was read from (``-c``), where
    #: UPDATE_BROKER_CONFIG saves changes; ``None``: defaults and overrides only.
    config_file: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        _check_port("listenPort", self.listen_port)
        if check_topic_name(self.msg_trace_topic_name) is not None:
            raise ConfigError(
                f"msgTraceTopicName is not a valid topic name: {self.msg_trace_topic_name!r}"
            )
        if self.ha_listen_port is not None:
            _check_port("haListenPort", self.ha_listen_port)
        if self.fast_listen_port is not None and self.fast_listen_port != -1:
            _check_port("fastListenPort", self.fast_listen_port)
        _check_min("haSendHeartbeatInterval", self.ha_send_heartbeat_interval_ms, 1)
        _check_min("haTransferBatchSize", self.ha_transfer_batch_size, 1)
        _check_min("slaveTimeout", self.slave_timeout_ms, 1)
        _check_credentials(self.access_key, self.secret_key)
        _check_ha_guard(self)
        if self.metrics_port is not None:
            _check_port("metricsPort", self.metrics_port)
        _check_min("brokerId", self.broker_id, 0)
        _check_min("accessMessageInMemoryMaxRatio", self.access_message_in_memory_max_ratio, 0)
        _check_min("defaultTopicQueueNums", self.default_topic_queue_nums, 1)
        _check_min("mappedFileSizeCommitLog", self.mapped_file_size_commit_log, 4096)
        _check_min("mappedFileSizeConsumeQueue", self.mapped_file_size_consume_queue, 20)
        _check_min("maxMessageSize", self.max_message_size, 1)
        _check_min("maxHashSlotNum", self.max_hash_slot_num, 1)
        _check_min("maxIndexNum", self.max_index_num, 1)
        _check_min("fileReservedTime", self.file_reserved_time_hours, 0)
        for key in _POOL_CAPACITIES:
            _check_min(key, getattr(self, _field_of(key)), 1)
        _check_network_limits(self)
        _check_min("cleanResourceInterval", self.clean_resource_interval_ms, 1)
        # MessageStoreConfig clamps these silently; a value it would change is an error.
        _check_range("diskMaxUsedSpaceRatio", self.disk_max_used_space_ratio, 10, 95)
        _check_range("diskSpaceCleanForciblyRatio", self.disk_space_clean_forcibly_ratio, 30, 85)
        _check_range("diskSpaceWarningLevelRatio", self.disk_space_warning_level_ratio, 35, 90)
        if self.broker_id == 0 and self.broker_role is BrokerRole.SLAVE:
            raise ConfigError("brokerRole=SLAVE needs a brokerId >= 1")
        if self.broker_id > 0 and self.broker_role is not BrokerRole.SLAVE:
            raise ConfigError(f"brokerId={self.broker_id} is a slave id; set brokerRole=SLAVE")
        # The store's own limits, named by their broker.conf keys where a person is
        # likely to get them wrong; store_config() checks the rest.
        if self.mapped_file_size_commit_log >= 2**31:
            raise ConfigError(
                "mappedFileSizeCommitLog must be below 2 GiB (positions in a segment are "
                f"32-bit, as in RocketMQ): {self.mapped_file_size_commit_log}"
            )
        try:
            parse_delay_levels(self.message_delay_level)
        except ValueError as exc:
            raise ConfigError(
                f"messageDelayLevel must be durations like '1s 5m 2h 1d': {exc}"
            ) from None
        hours = [h.strip() for h in self.delete_when.split(";") if h.strip()]
        if not hours or not all(h.isdigit() and 0 <= int(h) <= 23 for h in hours):
            raise ConfigError(
                f"deleteWhen must be hours of the day (0..23) separated by ';': "
                f"{self.delete_when!r}"
            )
        self.store_config()

    def flow_limits(self) -> FlowLimits:
        """The remoting server's limits, from the pool capacities and Rocklet's own keys."""
        shed: dict[int, int] = {}
        for key, codes in _POOL_CAPACITIES.items():
            for code in codes:
                shed[int(code)] = getattr(self, _field_of(key))
        return FlowLimits(
            max_in_flight_per_connection=self.max_requests_in_flight_per_connection,
            requests_per_turn=self.max_requests_per_read_turn,
            shed_limits=shed,
        )

    @property
    def acl_path(self) -> Path:
        """The default ACL file: ``aclFile``, else under ROCKETMQ_HOME or the store root."""
        return _acl_path(self.acl_file, self.store_path_root_dir)

    @property
    def namesrv_credentials(self) -> Credentials | None:
        """What registrations are signed with (``accessKey``/``secretKey``), if set."""
        if self.access_key is None or self.secret_key is None:
            return None
        return Credentials(self.access_key, self.secret_key)

    @property
    def commit_log_dir(self) -> Path:
        """Where commitlog segments live."""
        return self.store_config().commitlog_dir

    def store_config(self) -> StoreConfig:
        """The store's settings, translated from broker.conf's.

        Raises:
            ConfigError: A store setting is out of range (checked at load, too).
        """
        try:
            return StoreConfig(
                store_path=self.store_path_root_dir,
                commitlog_path=self.store_path_commit_log,
                commitlog_file_size_bytes=self.mapped_file_size_commit_log,
                consume_queue_entries_per_file=self.mapped_file_size_consume_queue // 20,
                index_hash_slots=self.max_hash_slot_num,
                index_max_entries=self.max_index_num,
                max_message_size_bytes=self.max_message_size,
                flush_disk_type=self.flush_disk_type,
                flush_interval_ms=self.flush_interval_commit_log_ms,
                flush_consume_queue_interval_ms=self.flush_interval_consume_queue_ms,
                message_delay_level=self.message_delay_level,
                file_reserved_time_hours=self.file_reserved_time_hours,
                delete_when=self.delete_when,
                disk_max_used_space_ratio=self.disk_max_used_space_ratio / 100,
                disk_force_clean_ratio=self.disk_space_clean_forcibly_ratio / 100,
                disk_space_warning_level_ratio=self.disk_space_warning_level_ratio / 100,
                clean_file_forcibly_enable=self.clean_file_forcibly_enable,
                message_index_enable=self.message_index_enable,
                check_crc_on_recover=self.check_crc_on_recover,
                max_transfer_bytes=self.max_transfer_bytes_on_message_in_memory,
                commitlog_page_ahead_bytes=self.commit_log_page_ahead_bytes,
            )
        except ValueError as exc:
            raise ConfigError(f"invalid store setting: {exc}") from None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> Self:
        """Build from parsed properties; absent keys keep their defaults.

        Args:
            props: Property name to raw string value.

        Returns:
            The config.

        Raises:
            ConfigError: A value does not parse or is out of range.
        """
        return cls(**_kwargs_from_properties(cls, props))


@dataclass(frozen=True, slots=True)
class NamesrvConfig:
    """Name server configuration (``NamesrvConfig`` + ``NettyServerConfig``)."""

    listen_port: int = 9876
    #: Java binds every interface.
    listen_host: str = "0.0.0.0"
    #: ``scanNotActiveBroker`` period: expired brokers are looked for every 10 s.
    scan_not_active_broker_interval_ms: int = 10_000
    #: Put KV ``ORDER_TOPIC_CONFIG`` into routes as ``orderTopicConf`` (off in Java too).
    order_message_enable: bool = False
    #: Answer clients older than V4_9_4 (version < 401) with fastjson's unquoted
    #: ``brokerAddrs`` keys, as a Java name server does. Off: quoted keys for everyone
    #: (the C++ client reads both; old Go clients want quoted ones).
    unquoted_route_keys_for_old_clients: bool = False
    #: Flow control, as the broker's keys of the same names (rocklet.transport.flow).
    max_requests_in_flight_per_connection: int = DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION
    max_requests_per_read_turn: int = DEFAULT_REQUESTS_PER_TURN
    server_socket_rcv_buf_size: int = 0
    server_socket_snd_buf_size: int = 0
    write_buffer_high_water_mark: int = 0
    server_channel_max_idle_time_seconds: int = 120
    #: Rocklet only: refuse unsigned registrations and admin writes (docs/security.md).
    acl_enable: bool = False
    #: Rocklet only: the ACL file; ``None`` = ``$ROCKETMQ_HOME/conf/plain_acl.yml``, or
    #: ``conf/plain_acl.yml`` in the working directory without ROCKETMQ_HOME.
    acl_file: Path | None = None
    #: RocketMQ's ``kvConfig.json``: the KV table is loaded from it at start and every
    #: change is on disk before it is answered. ``None``: the table lives in memory
    #: only. :func:`load_namesrv_config` (``rocklet namesrv``) defaults it to
    #: RocketMQ's ``~/namesrv/kvConfig.json``.
    kv_config_path: Path | None = None
    extra: Mapping[str, str] = field(default_factory=dict)
    #: Not a property: the file this config was read from (``-c``), where
    #: UPDATE_NAMESRV_CONFIG saves changes (RocketMQ's ``configStorePath``); ``None``:
    #: changes stay in memory.
    config_file: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        _check_port("listenPort", self.listen_port)
        _check_min("scanNotActiveBrokerInterval", self.scan_not_active_broker_interval_ms, 1)
        _check_network_limits(self)

    @property
    def acl_path(self) -> Path:
        """The ACL file: ``aclFile``, else under ROCKETMQ_HOME or the working directory."""
        return _acl_path(self.acl_file, Path.cwd())

    def flow_limits(self) -> FlowLimits:
        """The name server's limits (it sheds nothing, as RocketMQ's queues unbounded)."""
        return FlowLimits(
            max_in_flight_per_connection=self.max_requests_in_flight_per_connection,
            requests_per_turn=self.max_requests_per_read_turn,
        )

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> Self:
        """Build from parsed properties; absent keys keep their defaults.

        Args:
            props: Property name to raw string value.

        Returns:
            The config.

        Raises:
            ConfigError: A value does not parse or is out of range.
        """
        return cls(**_kwargs_from_properties(cls, props))


def _acl_path(acl_file: Path | None, fallback_home: Path) -> Path:
    # RocketMQ reads $ROCKETMQ_HOME/conf/plain_acl.yml; read when asked, so a config
    # object never carries a stale copy of the environment.
    if acl_file is not None:
        return acl_file
    home = os.environ.get("ROCKETMQ_HOME")
    return (Path(home) if home else fallback_home) / "conf" / "plain_acl.yml"


def _check_ha_guard(config: BrokerConfig) -> None:
    try:
        AllowList(config.ha_allowed_slaves)
    except AllowListError as exc:
        raise ConfigError(str(exc)) from None
    if not config.ha_auth_enable:
        return
    if config.broker_role is BrokerRole.SLAVE and config.access_key is None:
        raise ConfigError("haAuthEnable=true on a slave needs accessKey and secretKey")
    if config.broker_role is not BrokerRole.SLAVE and not config.acl_enable:
        raise ConfigError(
            "haAuthEnable=true on a master needs aclEnable=true (slaves authenticate as "
            "admin accounts of the ACL files)"
        )


def _check_credentials(access_key: str | None, secret_key: str | None) -> None:
    if (access_key is None) != (secret_key is None):
        raise ConfigError("accessKey and secretKey must be set together")


def _check_port(key: str, port: int) -> None:
    if not 0 <= port <= 65535:
        raise ConfigError(f"{key} must be a TCP port (0..65535): {port}")


def _check_min(key: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise ConfigError(f"{key} must be at least {minimum}: {value}")


#: RocketMQ's pool queue capacities and the request codes of each pool
#: (``BrokerController.registerProcessor``).
_POOL_CAPACITIES: Final = {
    "sendThreadPoolQueueCapacity": (
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.CONSUMER_SEND_MSG_BACK,
    ),
    "pullThreadPoolQueueCapacity": (RequestCode.PULL_MESSAGE,),
    "replyThreadPoolQueueCapacity": (
        RequestCode.SEND_REPLY_MESSAGE,
        RequestCode.SEND_REPLY_MESSAGE_V2,
    ),
    "endTransactionPoolQueueCapacity": (RequestCode.END_TRANSACTION,),
}


def _field_of(key: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m[1].lower(), key)


def _check_network_limits(config: BrokerConfig | NamesrvConfig) -> None:
    """The flow-control and socket keys both configs share: none may be negative."""
    for key in (
        "maxRequestsInFlightPerConnection",
        "maxRequestsPerReadTurn",
        "serverSocketRcvBufSize",
        "serverSocketSndBufSize",
        "writeBufferHighWaterMark",
        "serverChannelMaxIdleTimeSeconds",
    ):
        _check_min(key, getattr(config, _field_of(key)), 0)


def _check_range(key: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ConfigError(f"{key} must be within {low}..{high}: {value}")


# -- typed conversion -------------------------------------------------------------------


def _convert(key: str, raw: str, hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (hint,) = [a for a in typing.get_args(hint) if a is not type(None)]
        if raw == "":
            return None
    try:
        if hint is bool:
            lowered = raw.lower()
            if lowered not in ("true", "false"):
                raise ValueError("expected true or false")
            return lowered == "true"
        if hint is int:
            return int(raw, 10)
        if hint is Path:
            return Path(raw).expanduser()
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return hint(raw.upper())
        return raw
    except ValueError as exc:
        raise ConfigError(f"invalid value for {key}: {raw!r} ({exc})") from None


def _kwargs_from_properties(cls: type, props: Mapping[str, str]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    by_prop = property_field_table(cls)
    kwargs: dict[str, Any] = {}
    extra: dict[str, str] = {}
    for key, raw in props.items():
        spec = by_prop.get(key)
        if spec is None:
            extra[key] = raw  # reported by the loaders (config_keys)
            continue
        kwargs[spec.name] = _convert(key, raw.strip(), hints[spec.name])
    kwargs["extra"] = extra
    return kwargs


def with_overrides(config: _C, overrides: Mapping[str, object]) -> _C:
    """Apply command-line overrides; ``None`` values mean "not given".

    Args:
        config: The config from the file (or defaults).
        overrides: Field name (``listen_port``) or property name (``listenPort``) to
            value, already typed (strings are parsed like file values).

    Returns:
        A new config.

    Raises:
        ConfigError: An unknown key, or a value that does not parse or is out of range.
    """
    fields = {f.name: f for f in dataclasses.fields(config)}
    by_prop = property_field_table(type(config))
    hints = typing.get_type_hints(type(config))
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if value is None:
            continue
        spec = fields.get(key) or by_prop.get(key)
        if spec is None or spec.name == "extra":
            raise ConfigError(f"unknown configuration key: {key}")
        if spec.name == "config_file":
            changes[spec.name] = value
            continue
        if isinstance(value, str):
            value = _convert(key, value.strip(), hints[spec.name])
        changes[spec.name] = value
    return dataclasses.replace(config, **changes)


def load_broker_config(
    path: Path | None = None,
    overrides: Mapping[str, object] | None = None,
    *,
    defaults: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """Read a ``broker.conf``, then apply overrides and the ``NAMESRV_ADDR`` fallback.

    Args:
        path: The file; ``None`` for RocketMQ's defaults.
        overrides: As :func:`with_overrides` (command-line values win over the file).
        defaults: Field name to value for settings the file does not set and no
            override gives (``rocklet standalone`` keeps its data in ``./data`` unless
            the file names a ``storePathRootDir``).
        environ: The environment; ``os.environ`` by default.

    Returns:
        The config.

    Raises:
        ConfigError: The file cannot be read, or a value is invalid.
    """
    props: dict[str, str] = {}
    if path is not None:
        props = _read_properties(path)
        # The TLS keys stay in ``extra``; rocklet.broker.tls_config reads them.
        known = property_names(BrokerConfig) | TLS_KEYS | {USE_TLS}
        review = review_keys(props, known, ROCKETMQ_BROKER_KEYS)
        log_key_review(review, str(path))
    env = os.environ if environ is None else environ
    if "namesrvAddr" not in props and env.get("NAMESRV_ADDR"):
        props["namesrvAddr"] = env["NAMESRV_ADDR"]
    config = dataclasses.replace(BrokerConfig.from_properties(props), config_file=path)
    unset = {k: v for k, v in (defaults or {}).items() if property_name(k) not in props}
    return with_overrides(with_overrides(config, unset), overrides or {})


def load_namesrv_config(
    path: Path | None = None,
    overrides: Mapping[str, object] | None = None,
    *,
    home: Path | None = None,
) -> NamesrvConfig:
    """Read a name server properties file, then apply overrides.

    As RocketMQ's ``NamesrvStartup``, ``kvConfigPath`` defaults to
    ``<home>/namesrv/kvConfig.json``.

    Args:
        path: The file; ``None`` for the defaults.
        overrides: As :func:`with_overrides` (command-line values win over the file).
        home: ``user.home`` for the default ``kvConfigPath``. Default: the user's
            home directory.

    Returns:
        The config.

    Raises:
        ConfigError: The file cannot be read, or a value is invalid.
    """
    props: dict[str, str] = {}
    if path is not None:
        props = _read_properties(path)
        known = property_names(NamesrvConfig) | TLS_KEYS
        review = review_keys(props, known, ROCKETMQ_NAMESRV_KEYS)
        log_key_review(review, str(path))
    config = dataclasses.replace(NamesrvConfig.from_properties(props), config_file=path)
    if config.kv_config_path is None:
        base = Path.home() if home is None else home
        config = dataclasses.replace(config, kv_config_path=base / "namesrv" / "kvConfig.json")
    return with_overrides(config, overrides or {})


def _read_properties(path: Path) -> dict[str, str]:
    try:
        return parse_properties(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
