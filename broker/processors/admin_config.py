"""Admin requests about the broker's configuration (``AdminBrokerProcessor``).

- GET_BROKER_CONFIG (26): ``key=value`` lines with a data version header. Every key a
  RocketMQ 4.9.4 broker reports (177; tools read some without a check): Rocklet's value
  where Rocklet has the setting, else what 4.9.4 reports by default
  (:mod:`rocklet.broker.rocketmq_defaults`; no effect in Rocklet), and Rocklet's own
  keys. Secrets (``secretKey``, TLS key passwords) are never in it.
- UPDATE_BROKER_CONFIG (25): checked whole first (a value that does not parse is
  refused, naming the key; nothing is applied then), applied, then saved to the file
  the broker was started with (``-c``; without one,
  ``<storePathRootDir>/config/broker.properties``, as RocketMQ saves to its store's
  ``config/broker.properties``). Kinds of keys: :mod:`rocklet.broker.config_update`.
  ``brokerPermission``, ``slaveReadEnable``, ``enablePropertyFilter`` and
  ``haAllowedSlaves`` take effect at once; a new ``brokerPermission`` is registered
  with the name servers before the answer (RocketMQ's ``registerBrokerAll``), so
  routes show it; a new ``haAllowedSlaves`` disconnects the slaves it no longer
  admits. Other Rocklet settings take effect at the next start: the log and the
  answer's remark say which.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Final

import structlog

from rocklet.broker.config import BrokerConfig, ConfigError, typed_properties
from rocklet.broker.config_update import (
    PATH_KEYS,
    PATH_REFUSED,
    ConfigUpdate,
    plan_update,
    shown_value,
)
from rocklet.broker.ha.guard import AllowList
from rocklet.broker.ha.master import HAMaster
from rocklet.broker.identity import BrokerIdentity
from rocklet.broker.processors.property_filter import PropertyFilters
from rocklet.broker.processors.pull import SlaveReads
from rocklet.broker.properties_file import save_properties
from rocklet.broker.registration import RegistrationTracker
from rocklet.broker.rocketmq_defaults import rocketmq_defaults
from rocklet.broker.stats import BrokerStats
from rocklet.broker.tls_keys import TLS_ENABLE, USE_TLS, without_secrets
from rocklet.broker.topics import TopicConfigManager
from rocklet.protocol.bodies.topic import DataVersion
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.admin import GetBrokerConfigResponseHeader
from rocklet.protocol.properties_text import format_properties, parse_properties
from rocklet.transport import ProcessorRegistry, RequestContext
from rocklet.transport.clock import Clock

__all__ = ["ConfigAdmin", "config_file_of", "config_properties", "register", "reported_properties"]

log = structlog.get_logger(__name__)

#: Permission bits of a configuration file Rocklet creates: it may hold ``secretKey``.
_NEW_FILE_MODE: Final = 0o600


def config_properties(config: BrokerConfig) -> dict[str, str]:
    """The configuration as RocketMQ property names and text values.

    Args:
        config: The broker's configuration.

    Returns:
        Property name to value; unset optional values are left out, unknown keys kept.
        Secrets (fields hidden from ``repr``, such as ``secretKey``) are never shown.
    """
    out = typed_properties(config)
    out.update(without_secrets(config.extra))  # a key password never leaves the broker
    return dict(sorted(out.items()))


def reported_properties(config: BrokerConfig, addr: str) -> dict[str, str]:
    """What GET_BROKER_CONFIG prints: RocketMQ's keys, Rocklet's values where it has them.

    Args:
        config: The configuration in force.
        addr: The broker's advertised ``ip:port`` (the bound port, when ``listenPort``
            is 0).

    Returns:
        Property name to value text, sorted by name.
    """
    ip, _, port = addr.rpartition(":")
    listen = int(port) if port.isdigit() else config.listen_port
    if config.ha_listen_port is not None:
        ha_port = config.ha_listen_port
    else:
        ha_port = listen + 1 if listen else 0
    extra = config.extra
    effective = {
        "brokerIP1": config.broker_ip1 or ip,
        "brokerIP2": config.broker_ip2 or config.broker_ip1 or ip,
        "listenPort": str(listen),
        "haListenPort": str(ha_port),
        "namesrvAddr": config.namesrv_addr or "",
        "rocketmqHome": os.environ.get("ROCKETMQ_HOME", ""),
        "storePathCommitLog": str(config.commit_log_dir),
        "useTLS": extra.get(USE_TLS) or extra.get(TLS_ENABLE) or "false",
    }
    # The bound port and derived paths win over the configured 0 / unset values.
    return dict(sorted({**rocketmq_defaults(), **config_properties(config), **effective}.items()))


def config_file_of(config: BrokerConfig) -> Path:
    """Where UPDATE_BROKER_CONFIG saves: the ``-c`` file, else the store's config dir."""
    if config.config_file is not None:
        return config.config_file
    return config.store_path_root_dir / "config" / "broker.properties"


class ConfigAdmin:
    """Serves GET_BROKER_CONFIG and UPDATE_BROKER_CONFIG. Event loop only.

    Args:
        config: The configuration the broker started with.
        identity: The broker's identity (its permission changes with
            ``brokerPermission``; its address is reported).
        topics: Topic configs (a new permission starts a new data version).
        registration: Which topic table the name servers have.
        register_timeout_ms: ``registerBrokerTimeoutMills``: the longest an update of
            ``brokerPermission`` waits for the name servers before answering.
        slave_reads: The pull processor's ``slaveReadEnable`` (changed in place).
        filters: The property filters (``enablePropertyFilter``, changed in place).
        clock: Time source (the configuration's data version).
        replicas: A master's HA service (``haAllowedSlaves`` applied to it); ``None``
            on a slave.
        stats: The per-key statistics (``autoDeleteUnusedStats``, changed in place);
            ``None``: the key takes effect at the next start.
    """

    def __init__(
        self,
        *,
        config: BrokerConfig,
        identity: BrokerIdentity,
        topics: TopicConfigManager,
        registration: RegistrationTracker,
        register_timeout_ms: int,
        slave_reads: SlaveReads,
        filters: PropertyFilters,
        clock: Clock,
        replicas: HAMaster | None = None,
        stats: BrokerStats | None = None,
    ) -> None:
        self._config = config
        self._stats = stats
        self._identity = identity
        self._topics = topics
        self._registration = registration
        self._register_timeout_s = register_timeout_ms / 1000
        self._slave_reads = slave_reads
        self._filters = filters
        self._clock = clock
        self._replicas = replicas
        self._version = DataVersion(0, clock.now_ms())
        # RocketMQ's handler is synchronized: one update at a time, file included.
        self._lock = asyncio.Lock()

    @property
    def config(self) -> BrokerConfig:
        """The configuration in force, updates included."""
        return self._config

    async def broker_config(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONFIG: ``key=value`` lines of the configuration."""
        props = reported_properties(self._config, self._identity.addr)
        text = format_properties(props)
        header = GetBrokerConfigResponseHeader(version=self._version.to_json().decode())
        return cmd.make_response(
            ResponseCode.SUCCESS, ext_fields=header.to_ext_fields(), body=text.encode()
        )

    async def update_config(self, rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """UPDATE_BROKER_CONFIG: check, apply, save."""
        if not cmd.body:
            return cmd.make_response(ResponseCode.SUCCESS)
        props = parse_properties(cmd.body.decode("utf-8", "replace"))
        if not PATH_KEYS.isdisjoint(props):
            log.warning(
                "broker config update refused: it names a path",
                by=rctx.peer_address,
                keys=sorted(PATH_KEYS.intersection(props)),
            )
            return cmd.make_response(ResponseCode.NO_PERMISSION, remark=PATH_REFUSED)
        async with self._lock:
            try:
                update = plan_update(self._config, props)
            except ConfigError as exc:
                log.warning("broker config update refused", by=rctx.peer_address, error=str(exc))
                return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
            before = config_properties(self._config)
            self._config = update.config
            self._version = self._version.next_version(self._clock.now_ms())
            await self._apply_live(update)
            pending = [k for k in update.restart if before.get(k) != update.saved[k]]
            log.info(
                "broker config updated",
                by=rctx.peer_address,
                values={k: shown_value(k, v) for k, v in update.saved.items()},
                ignored=list(update.ignored),
            )
            if pending:
                log.warning("broker config keys take effect at the next start", keys=pending)
            path = config_file_of(self._config)
            try:
                if update.saved:
                    await asyncio.to_thread(
                        save_properties, path, update.saved, new_mode=_NEW_FILE_MODE
                    )
            except OSError as exc:
                log.error("broker config not saved", file=str(path), error=str(exc))
                return cmd.make_response(
                    ResponseCode.SYSTEM_ERROR,
                    remark=f"applied but not saved to {path}: {exc}",
                )
        return cmd.make_response(ResponseCode.SUCCESS, remark=_remark(update, pending))

    async def _apply_live(self, update: ConfigUpdate) -> None:
        config = update.config
        if "slaveReadEnable" in update.live:
            self._slave_reads.slave_read_enable = config.slave_read_enable
        if "enablePropertyFilter" in update.live:
            self._filters.enabled = config.enable_property_filter
        if "autoDeleteUnusedStats" in update.live and self._stats is not None:
            self._stats.drop_unused = config.auto_delete_unused_stats
        if "haAllowedSlaves" in update.live and self._replicas is not None:
            # Checked by plan_update (the whole request is refused on a bad entry).
            await self._replicas.allow(AllowList(config.ha_allowed_slaves))
        if "brokerPermission" in update.live:
            self._identity.permission = config.broker_permission
            self._topics.bump_version()
            registered = await self._registration.wait_for(
                self._topics.data_version.counter, self._register_timeout_s
            )
            if not registered:
                log.warning("name servers not told of the new brokerPermission yet")


def _remark(update: ConfigUpdate, pending: list[str]) -> str | None:
    parts = []
    if pending:
        parts.append(f"takes effect after a restart: {', '.join(pending)}")
    if update.reported:
        parts.append(f"saved, no effect in Rocklet: {', '.join(update.reported)}")
    if update.ignored:
        parts.append(f"unknown, ignored: {', '.join(update.ignored)}")
    return "; ".join(parts) or None


def register(registry: ProcessorRegistry, admin: ConfigAdmin) -> None:
    """Register the broker configuration codes."""
    registry.register_all(
        {
            RequestCode.GET_BROKER_CONFIG: admin.broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: admin.update_config,
        }
    )
