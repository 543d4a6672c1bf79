"""What processors may use: the broker's collaborators, built once at start.

Processor modules pick the narrow pieces they need from :class:`BrokerContext` when
they register; nothing holds the broker object itself (style.md §9 A1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from rocklet.broker.clients import ClientManager
from rocklet.broker.config import BrokerConfig, BrokerRole
from rocklet.broker.groups import SubscriptionGroupManager
from rocklet.broker.locks import RebalanceLockManager
from rocklet.broker.long_polling import PullHoldService
from rocklet.broker.metrics import NULL_METRICS, MetricsSink
from rocklet.broker.offsets import ConsumerOffsetManager
from rocklet.broker.registration import RegistrationTracker
from rocklet.broker.topics import TopicConfigManager
from rocklet.store.message_store import MessageStore
from rocklet.transport.clock import Clock
from rocklet.transport.tasks import BackgroundTasks

__all__ = ["BrokerContext"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, eq=False)
class BrokerContext:
    """The broker's collaborators.

    Attributes:
        config: Broker settings.
        store: The message store.
        topics: Topic configs.
        groups: Subscription group configs.
        offsets: Committed consumer offsets.
        clients: Producer and consumer channels.
        locks: Orderly-consumption queue locks.
        holds: Parked long-polling pulls.
        clock: Time source.
        broker_addr: ``ip:port`` clients reach this broker at (advertised).
        store_host: ``broker_addr`` packed as a stored record's 8-byte host field.
        tasks: Owned background tasks (e.g. notifications to clients).
        registration: Which topic-table version the name servers have; processors
            that change topics wait on it before answering.
        metrics: Where hot paths report puts, gets and requests (no-op when off).
    """

    config: BrokerConfig
    store: MessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    clients: ClientManager
    locks: RebalanceLockManager
    holds: PullHoldService
    clock: Clock
    broker_addr: str
    store_host: bytes
    tasks: BackgroundTasks
    registration: RegistrationTracker = field(default_factory=RegistrationTracker)
    metrics: MetricsSink = NULL_METRICS

    @property
    def is_master(self) -> bool:
        """Whether this broker accepts writes (not a slave)."""
        return self.config.broker_role is not BrokerRole.SLAVE
