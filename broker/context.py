"""The broker's collaborators, built once at start: the app's wiring object.

Only the app and :mod:`rocklet.broker.wiring` read it. Each processor is built from the
narrow pieces it uses and never holds this object (a service locator hides what a
processor depends on); ``tests/broker/test_narrow_processors.py``
keeps it so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rocklet.broker.clients import ClientManager
from rocklet.broker.config import BrokerConfig
from rocklet.broker.groups import SubscriptionGroupManager
from rocklet.broker.ha.master import HAMaster
from rocklet.broker.identity import BrokerIdentity
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
        identity: Name, advertised address, record host field and permissions.
        tasks: Owned background tasks (e.g. notifications to clients).
        registration: Which topic-table version the name servers have; processors
            that change topics wait on it before answering.
        metrics: Where hot paths report puts, gets and requests (no-op when off).
        replicas: A master's HA service (slaves and tests without one: ``None``).
        ha_status: Replication's brokerStatus keys, or ``None``.
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
    identity: BrokerIdentity
    tasks: BackgroundTasks
    registration: RegistrationTracker = field(default_factory=RegistrationTracker)
    metrics: MetricsSink = NULL_METRICS
    replicas: HAMaster | None = None
    ha_status: Callable[[], dict[str, str]] | None = None
