"""Start whichever side of replication the broker's role asks for."""

from __future__ import annotations

import dataclasses
import ipaddress
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

import structlog

from rocklet.broker.config import BrokerConfig, BrokerRole
from rocklet.broker.groups import SubscriptionGroupManager
from rocklet.broker.ha.guard import AllowList, HAGuard, SlaveAccount
from rocklet.broker.ha.handshake import dial_master
from rocklet.broker.ha.lag import MasterLag, SlaveView
from rocklet.broker.ha.master import HAMaster
from rocklet.broker.ha.metadata import MetadataSync
from rocklet.broker.ha.slave import HASlave
from rocklet.broker.offsets import ConsumerOffsetManager
from rocklet.broker.tls_config import TlsSettings
from rocklet.broker.topics import TopicConfigManager
from rocklet.store.message_store import MessageStore
from rocklet.transport.tls import ServerTls, TlsMode

__all__ = ["Replication", "ha_client_tls", "start_replication"]

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class Replication:
    """A broker's HA side: a master's listener, or a slave's client.

    Attributes:
        master: Set on masters (ASYNC_MASTER and SYNC_MASTER).
        slave: Set on slaves.
        port: The HA port a master listens on (advertised as ``haServerAddr``); a
            slave advertises its would-be port, as RocketMQ's slaves do.
        metadata: A slave's copy of the master's topic table.
    """

    master: HAMaster | None
    slave: HASlave | None
    port: int
    metadata: MetadataSync | None = None

    def status(self) -> dict[str, str]:
        """Replication's brokerStatus keys (docs/replication.md)."""
        if self.master is not None:
            return self.master.status()
        assert self.slave is not None
        return self.slave.status()

    def lag(self) -> MasterLag | SlaveView:
        """How far replication is behind (brokerStatus keys, metrics). Any thread."""
        if self.master is not None:
            return self.master.lag()
        assert self.slave is not None
        return self.slave.view()

    def learn_master(self, ha_server_addr: str | None, master_addr: str | None) -> None:
        """Take the master's addresses from a REGISTER_BROKER answer (slaves)."""
        if self.slave is not None:
            self.slave.set_master(ha_server_addr)
        if self.metadata is not None:
            self.metadata.set_master(master_addr)

    async def stop(self) -> None:
        """Stop replicating. Idempotent."""
        if self.master is not None:
            await self.master.stop()
        if self.slave is not None:
            await self.slave.stop()
        if self.metadata is not None:
            await self.metadata.stop()


def ha_port(config: BrokerConfig, listen_port: int) -> int:
    """``haListenPort``, else listenPort + 1 (RocketMQ forces that), 0 if that is 0."""
    if config.ha_listen_port is not None:
        return config.ha_listen_port
    return config.listen_port + 1 if config.listen_port else 0


def ha_client_tls(
    config: BrokerConfig, tls: TlsSettings, client_tls: ssl.SSLContext | None
) -> ssl.SSLContext | None:
    """The TLS context of a slave's connection to its master's HA port.

    ``haTlsEnable`` when set, else ``tls.enable`` (what the broker's other connections
    use): a slave that must speak TLS to its name servers can still follow a master
    whose HA port is plain TCP (``permissive``, or a RocketMQ master), and the reverse.

    Args:
        config: The broker's settings (``brokerRole``, ``haTlsEnable``).
        tls: Its TLS settings (the ``tls.client.*`` files).
        client_tls: The context of its other connections (``tls.enable``), or ``None``.

    Returns:
        The context, or ``None`` for plain TCP (and on masters, which dial no master).

    Raises:
        ConfigError: ``haTlsEnable=true`` and a ``tls.client.*`` file does not load.
    """
    if config.broker_role is not BrokerRole.SLAVE:
        return None
    if config.ha_tls_enable is None or config.ha_tls_enable == tls.client_enabled:
        return client_tls
    if not config.ha_tls_enable:
        return None
    # tls.enable is off, so the context was never made: make it from the same files.
    return dataclasses.replace(tls, client_enabled=True).client_context()


async def start_replication(
    config: BrokerConfig,
    store: MessageStore,
    topics: TopicConfigManager,
    groups: SubscriptionGroupManager,
    offsets: ConsumerOffsetManager,
    host: str,
    *,
    server_tls: ServerTls | None = None,
    client_tls: ssl.SSLContext | None = None,
    ha_tls: ssl.SSLContext | None,
    accounts: Callable[[], Mapping[str, SlaveAccount]] | None = None,
) -> Replication:
    """Listen for slaves (a master) or start following the master (a slave).

    Args:
        config: Broker settings (role and ``ha*`` keys).
        store: The broker's store.
        topics: The broker's topic table (a slave's follows the master's).
        groups: The broker's subscription groups (a slave's follow the master's).
        offsets: The broker's consumer offsets (a slave's follow the master's).
        host: Interface the master's HA port binds.
        server_tls: The broker port's TLS; with ``tls.server.mode=enforcing`` the HA
            port speaks TLS too (a master).
        client_tls: The broker's client context (``tls.enable``): a slave connects to
            the master's client port with it (the metadata sync).
        ha_tls: A slave's context for the master's HA port (:func:`ha_client_tls`:
            ``haTlsEnable``, else as ``client_tls``); ``None``: plain TCP. Required, so
            that no caller drops the slave's TLS by leaving it out.
        accounts: The ACL accounts in force (``aclEnable``); slaves authenticate as
            one when ``haAuthEnable`` (default ``aclEnable``) is on (a master).

    Returns:
        The running side.
    """
    port = ha_port(config, config.listen_port)
    if config.broker_role is BrokerRole.SLAVE:
        credentials = config.namesrv_credentials
        slave = HASlave(
            store,
            config.ha_master_address,
            heartbeat_s=config.ha_send_heartbeat_interval_ms / 1000,
            housekeeping_s=config.ha_housekeeping_interval_ms / 1000,
            dial=partial(
                dial_master,
                tls=ha_tls,
                credentials=credentials if config.ha_auth_enable else None,
            ),
        )
        slave.start()
        sync = MetadataSync(
            store,
            topics,
            groups,
            offsets,
            credentials=credentials,
            tls=client_tls,
            out_of_step=slave.out_of_step,
        )
        slave.on_checked = sync.kick
        return Replication(None, slave, port, sync)
    auth = config.acl_enable if config.ha_auth_enable is None else config.ha_auth_enable
    if auth and accounts is None:
        raise ValueError("slaves must authenticate but no ACL accounts were given")
    enforcing = server_tls is not None and server_tls.mode is TlsMode.ENFORCING
    guard = HAGuard(
        AllowList(config.ha_allowed_slaves),
        tls=server_tls if enforcing else None,
        accounts=accounts if auth else None,
    )
    master = HAMaster(
        store,
        batch_bytes=config.ha_transfer_batch_size,
        heartbeat_s=config.ha_send_heartbeat_interval_ms / 1000,
        fallbehind_max=config.ha_slave_fallbehind_max,
        housekeeping_s=config.ha_housekeeping_interval_ms / 1000,
        guard=guard,
    )
    try:
        bound = await master.start(host, port)
    except OSError as exc:
        if config.ha_listen_port is not None or not port:
            raise
        # listenPort + 1 was only a default; slaves learn the real port from the name
        # server, so a port someone else holds (a client's ephemeral port) is no reason
        # to refuse to start.
        log.error(
            "the default HA port is taken; listening on a free port instead",
            port=port,
            error=str(exc),
        )
        bound = await master.start(host, 0)
    _warn_if_open(guard, host, bound)
    return Replication(master, None, bound)


def _warn_if_open(guard: HAGuard, host: str, port: int) -> None:
    """WARN when strangers on a network can take the commitlog without proving anything.

    That is: no handshake, and the allow-list is ``*`` or the default (whole private
    networks); a list the operator wrote is taken as meant.
    """
    allowed = guard.allowed
    if guard.accounts is not None or not (allowed.anyone or allowed.default):
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        if host == "localhost":
            return
    log.warning(
        "the HA port sends the commitlog to anyone who connects from these networks, "
        "unauthenticated: set haAllowedSlaves to the slaves' addresses, or turn on "
        "aclEnable/haAuthEnable (docs/replication.md)",
        host=host,
        port=port,
        allowed=guard.allowed.text,
        tls=guard.tls is not None,
    )
