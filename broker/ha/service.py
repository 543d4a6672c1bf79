"""Start whichever side of replication the broker's role asks for."""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from rocklet.broker.config import BrokerConfig, BrokerRole
from rocklet.broker.groups import SubscriptionGroupManager
from rocklet.broker.ha.lag import MasterLag, SlaveView
from rocklet.broker.ha.master import HAMaster
from rocklet.broker.ha.metadata import MetadataSync
from rocklet.broker.ha.slave import HASlave
from rocklet.broker.offsets import ConsumerOffsetManager
from rocklet.broker.topics import TopicConfigManager
from rocklet.store.message_store import MessageStore

__all__ = ["Replication", "start_replication"]

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


def ha_port(config: BrokerConfig, listen_port: int) -> int:
    """``haListenPort``, else listenPort + 1 (RocketMQ forces that), 0 if that is 0."""
    if config.ha_listen_port is not None:
        return config.ha_listen_port
    return config.listen_port + 1 if config.listen_port else 0


async def start_replication(
    config: BrokerConfig,
    store: MessageStore,
    topics: TopicConfigManager,
    groups: SubscriptionGroupManager,
    offsets: ConsumerOffsetManager,
    host: str,
) -> Replication:
    """Listen for slaves (a master) or start following the master (a slave).

    Args:
        config: Broker settings (role and ``ha*`` keys).
        store: The broker's store.
        topics: The broker's topic table (a slave's follows the master's).
        groups: The broker's subscription groups (a slave's follow the master's).
        offsets: The broker's consumer offsets (a slave's follow the master's).
        host: Interface the master's HA port binds.

    Returns:
        The running side.
    """
    port = ha_port(config, config.listen_port)
    if config.broker_role is BrokerRole.SLAVE:
        slave = HASlave(
            store,
            config.ha_master_address,
            heartbeat_s=config.ha_send_heartbeat_interval_ms / 1000,
            housekeeping_s=config.ha_housekeeping_interval_ms / 1000,
        )
        slave.start()
        return Replication(None, slave, port, MetadataSync(store, topics, groups, offsets))
    master = HAMaster(
        store,
        batch_bytes=config.ha_transfer_batch_size,
        heartbeat_s=config.ha_send_heartbeat_interval_ms / 1000,
        fallbehind_max=config.ha_slave_fallbehind_max,
        housekeeping_s=config.ha_housekeeping_interval_ms / 1000,
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
    return Replication(master, None, bound)
