"""A running name server: the remoting server, the processors and the expiry timer."""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import TYPE_CHECKING, Final, Self

import structlog

from rocklet.broker.config import NamesrvConfig
from rocklet.broker.config_writer import ConfigWriteError
from rocklet.broker.namesrv.configuration import NamesrvConfiguration
from rocklet.broker.namesrv.kv_config import KVConfigManager
from rocklet.broker.namesrv.processors import NamesrvProcessors
from rocklet.broker.namesrv.route_info import RouteInfoManager
from rocklet.broker.tls_config import TlsSettings, tls_settings
from rocklet.protocol.codes import RequestCode
from rocklet.transport import RemotingServer
from rocklet.transport.clock import Clock, SystemClock
from rocklet.transport.connection import Connection
from rocklet.transport.tasks import BackgroundTasks

if TYPE_CHECKING:
    from rocklet.broker.acl.files import AclFiles

__all__ = ["NamesrvServer"]

_log = structlog.get_logger(__name__)

#: With ``aclEnable``, besides the write requests of ``NAMESRV_CHECKED_CODES``: reading
#: the configuration needs a valid signature (any account, as GET_BROKER_CONFIG on a
#: broker), changing it an admin account.
_CONFIG_READ: Final = frozenset({RequestCode.GET_NAMESRV_CONFIG})
_CONFIG_WRITE: Final = frozenset({RequestCode.UPDATE_NAMESRV_CONFIG})


def _acl() -> ModuleType:
    # Imported only when aclEnable is on: other name servers never load the YAML library.
    from rocklet.broker.acl import service

    return service


class NamesrvServer:
    """A name server bound to a port; create it with :meth:`start`.

    Args:
        config: The configuration (its host and port are what :meth:`start` binds).
        clock: Time source for registrations and expiry. Default: the system clock.
        tls: TLS of the port. Default: from the ``tls.*`` keys of ``config``.

    Raises:
        ConfigError: The TLS settings are invalid or their files do not load, or the
            KV config file (``kvConfigPath``) is damaged.
    """

    def __init__(
        self, config: NamesrvConfig, clock: Clock | None = None, tls: TlsSettings | None = None
    ) -> None:
        self._config = config
        self._clock: Clock = SystemClock() if clock is None else clock
        self.routes = RouteInfoManager()
        self.kv = KVConfigManager(config.kv_config_path)
        loaded = self.kv.load()
        if config.kv_config_path is not None:
            _log.info("kv config loaded", path=str(config.kv_config_path), pairs=loaded)
        tls = tls_settings(config.extra, {}) if tls is None else tls
        #: The configuration GET/UPDATE_NAMESRV_CONFIG serve (and the one in force).
        self.configuration = NamesrvConfiguration(config)
        processors = NamesrvProcessors(
            self.routes, self.kv, config, self._clock, configuration=self.configuration
        )
        self._registry = processors.registry()
        self._server = RemotingServer(
            config.listen_host,
            config.listen_port,
            self._registry,
            name="namesrv",
            high_water=config.write_buffer_high_water_mark or None,
            limits=config.flow_limits(),
            socket_rcvbuf=config.server_socket_rcv_buf_size,
            socket_sndbuf=config.server_socket_snd_buf_size,
            tls=tls.server_tls(),
            idle_s=config.server_channel_max_idle_time_seconds,
        )
        self._tasks = BackgroundTasks("namesrv")
        #: The ACL files in force (``aclEnable``), or ``None``.
        self.acl: AclFiles | None = None

    @classmethod
    async def start(
        cls,
        host: str = "0.0.0.0",
        port: int = 9876,
        *,
        config: NamesrvConfig | None = None,
        clock: Clock | None = None,
        tls: TlsSettings | None = None,
    ) -> Self:
        """Start a name server; returns once it is listening.

        Args:
            host: Bind address. Default: every interface.
            port: Port; 0 picks a free one (read it from :attr:`port`). Default: 9876.
            config: Other settings; its host and port are replaced by the arguments.
            clock: Time source. Default: the system clock.
            tls: TLS of the port. Default: from the ``tls.*`` keys of ``config``.

        Returns:
            The running name server.

        Raises:
            ConfigError: The TLS settings are invalid or their files do not load, or
                the KV config file is damaged.
            OSError: The address cannot be bound.
        """
        base = NamesrvConfig() if config is None else config
        acl = _acl() if base.acl_enable else None
        acl_files = acl.open_acl_files(base.acl_path) if acl is not None else None
        server = cls(dataclasses.replace(base, listen_port=port, listen_host=host), clock, tls)
        await server._server.start()
        server.configuration.bind(server.port)
        server.acl = acl_files
        if acl is not None:
            # Rocklet only: RocketMQ 4.9's name server has no ACL. Writes need an
            # admin account's signature; lookups stay open (docs/security.md).
            acl.enable_acl(
                server._registry,
                acl_files,
                server._tasks,
                name="namesrv",
                addr=f"{host}:{server.port}",
                cluster="",
                checked_codes=acl.NAMESRV_CHECKED_CODES | _CONFIG_READ | _CONFIG_WRITE,
                admin_codes=acl.NAMESRV_CHECKED_CODES | _CONFIG_WRITE,
            )
        # NamesrvController schedules scanNotActiveBroker every 10 s.
        interval_s = server._config.scan_not_active_broker_interval_ms / 1000
        server._tasks.every(interval_s, server._scan, "broker-expiry")
        return server

    @property
    def port(self) -> int:
        """The bound port."""
        return self._server.port

    @property
    def tls_mode(self) -> str:
        """``"disabled"``, ``"permissive"`` or ``"enforcing"``."""
        return self._server.tls_mode

    @property
    def connections(self) -> frozenset[Connection]:
        """The connections currently open (brokers, clients, tools)."""
        return self._server.connections

    @property
    def config(self) -> NamesrvConfig:
        """The configuration in force (with UPDATE_NAMESRV_CONFIG's live changes)."""
        return self.configuration.config

    def scan_once(self) -> int:
        """Drop brokers silent for 120 s and close their connections (one timer step).

        Returns:
            How many brokers were dropped.
        """
        dropped = self.routes.scan_once(self._clock.monotonic_ms())
        for live in dropped:
            if isinstance(live.connection, Connection):
                self._tasks.spawn(live.connection.close(), "close-expired")
        return len(dropped)

    async def _scan(self) -> None:
        self.scan_once()

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop the timer and the server; safe to call more than once.

        Args:
            grace_s: How long in-flight requests may finish.
        """
        await self._tasks.cancel_all()
        await self._server.stop(grace_s)
        try:
            await self.kv.flush()
        except ConfigWriteError as exc:
            # Every change answered SUCCESS is on disk already; what is left was
            # answered SYSTEM_ERROR (its write failed) or cut off by the stop.
            _log.error("kv config not saved at stop", error=str(exc))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
