"""Topic configs of this broker, persisted as topics.json (RocketMQ's layout).

Mirrors RocketMQ 4.9's ``TopicConfigManager``: the system topics a broker always has,
auto-creation of a topic on its first send from the template topic ``TBW102`` (only
when the template carries the INHERIT permission, i.e. ``autoCreateTopicEnable``), and
the retry / dead-letter topics created on demand for consumer groups. Any change bumps
the data version and calls ``on_change`` so the broker re-registers with the name
servers at once instead of waiting for the 30 s timer.

Any change also starts a durable write of ``topics.json`` (:mod:`rocklet.broker.config_writer`:
concurrent changes share one write). Until it is on disk the topic is listed in
:attr:`TopicConfigManager.unsaved`, and a request that relies on it awaits
:meth:`TopicConfigManager.saved` before it answers: a topic announced to a client is
never lost by a crash. RocketMQ 4.9.4 writes ``topics.json`` on each change too, but
without an fsync and answers even when the write failed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

from rocklet.broker.config_table import ConfigTable
from rocklet.broker.json_file import persist_json
from rocklet.protocol.bodies.route import Perm
from rocklet.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper
from rocklet.protocol.names import (
    AUTO_CREATE_TOPIC,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
)
from rocklet.transport.clock import Clock

__all__ = ["TopicConfigManager"]

_RW: Final = int(Perm.READ | Perm.WRITE)


def _inherit_perm(enabled: bool) -> int:
    return int(Perm.INHERIT) | (_RW if enabled else 0)


class TopicConfigManager(ConfigTable[TopicConfig, TopicConfigSerializeWrapper]):
    """Topic configs by name. Not thread-safe: use it from the event loop.

    Args:
        path: ``<store>/config/topics.json``.
        clock: Time source for data versions.
        cluster_name: ``brokerClusterName`` (the cluster and reply topics).
        broker_name: ``brokerName`` (the broker topic).
        auto_create: ``autoCreateTopicEnable``: serve TBW102 with INHERIT.
        default_queue_nums: ``defaultTopicQueueNums`` (8), TBW102's queue count.
        cluster_topic_enable: ``clusterTopicEnable``: the cluster topic is read-write.
        broker_topic_enable: ``brokerTopicEnable``: the broker topic is read-write.
        trace_topic: ``msgTraceTopicName`` when ``traceTopicEnable`` is on: created with
            one read-write queue, as RocketMQ does; ``None``: no trace topic.
        on_change: Called after any change, e.g. to re-register with name servers.
    """

    TABLE_KEY = "topicConfigTable"

    def __init__(
        self,
        path: Path,
        clock: Clock,
        *,
        cluster_name: str,
        broker_name: str,
        auto_create: bool = True,
        default_queue_nums: int = 8,
        cluster_topic_enable: bool = True,
        broker_topic_enable: bool = True,
        trace_topic: str | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(path, clock, TopicConfig.from_dict)
        self._auto_create = auto_create
        self.on_change = on_change
        system = [
            TopicConfig(SELF_TEST_TOPIC, 1, 1),
            # The cluster's and the broker's own topics always exist; the two switches
            # decide whether they can be written and read (TopicConfigManager's rule).
            TopicConfig(cluster_name, 16, 16, perm=_inherit_perm(cluster_topic_enable)),
            TopicConfig(broker_name, 1, 1, perm=_inherit_perm(broker_topic_enable)),
            TopicConfig(OFFSET_MOVED_EVENT, 1, 1),
            TopicConfig(SCHEDULE_TOPIC, 18, 18),
            TopicConfig(f"{cluster_name}_REPLY_TOPIC", 1, 1),
        ]
        if trace_topic is not None:
            system.append(TopicConfig(trace_topic, 1, 1))
        if auto_create:
            system.append(
                TopicConfig(AUTO_CREATE_TOPIC, default_queue_nums, default_queue_nums, _RW | 1)
            )
        for config in system:
            self._table[config.topic_name] = config

    def _loads(self, name: str) -> bool:
        # RocketMQ drops the template when auto-creation is turned off.
        return name != AUTO_CREATE_TOPIC or self._auto_create

    def find(self, topic: str) -> TopicConfig | None:
        """Return a topic's config, or ``None`` when unknown."""
        return self._table.get(topic)

    def all(self) -> dict[str, TopicConfig]:
        """Return a copy of every topic config."""
        return dict(self._table)

    def wrapper(self) -> TopicConfigSerializeWrapper:
        """Return the table with its data version (GET_ALL_TOPIC_CONFIG, registration)."""
        # A shallow copy is a snapshot (configs are immutable); the writer thread encodes it.
        return TopicConfigSerializeWrapper(dict(self._table), self.data_version)

    def for_registration(self, broker_permission: int) -> TopicConfigSerializeWrapper:
        """The table as the name servers are sent it (``registerBrokerAll``).

        A broker without read or write permission registers every topic with its own
        permission instead of the topic's, so routes show a drained broker at once.

        Args:
            broker_permission: ``brokerPermission`` now.
        """
        wrapper = self.wrapper()
        if broker_permission & _RW == _RW:
            return wrapper
        table = {
            name: TopicConfig(name, c.read_queue_nums, c.write_queue_nums, perm=broker_permission)
            for name, c in wrapper.topic_config_table.items()
        }
        return TopicConfigSerializeWrapper(table, wrapper.data_version)

    def bump_version(self) -> None:
        """Start a new data version without a topic change, and re-register at once.

        UPDATE_BROKER_CONFIG does this when ``brokerPermission`` changes, so name
        servers take the new permissions even if they skip unchanged versions.
        """
        self.data_version = self.data_version.next_version(self._clock.now_ms())
        if self.on_change is not None:
            self.on_change()

    def create_for_send(
        self, topic: str, default_topic: str, queue_nums: int
    ) -> TopicConfig | None:
        """Create a topic on its first send from a template (``createTopicInSendMessageMethod``).

        Args:
            topic: The new topic.
            default_topic: The template the client named (``TBW102``).
            queue_nums: Queue count the client asked for.

        Returns:
            The existing or new config, or ``None`` when the template does not allow it.
        """
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        template = self._table.get(default_topic)
        if template is None or not template.perm & Perm.INHERIT:
            return None
        nums = max(1, min(queue_nums, template.write_queue_nums))
        perm = template.perm & ~Perm.INHERIT
        return self.update(TopicConfig(topic, nums, nums, perm=perm))

    def create_system_topic(self, topic: str, queue_nums: int, perm: int = _RW) -> TopicConfig:
        """Return a retry, DLQ or transaction topic, creating it if needed."""
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        return self.update(TopicConfig(topic, queue_nums, queue_nums, perm=perm))

    def update(self, config: TopicConfig) -> TopicConfig:
        """Create or replace a topic's config (admin UPDATE_AND_CREATE_TOPIC)."""
        self._put(config.topic_name, config)
        return config

    def replace_all(self, wrapper: TopicConfigSerializeWrapper) -> bool:
        """Take the master's whole table if its data version differs (a slave's sync).

        Returns:
            Whether the table was replaced.
        """
        return self._replace(wrapper.topic_config_table, wrapper.data_version)

    def _write_file(self, wrapper: TopicConfigSerializeWrapper) -> None:
        persist_json(self._path, wrapper.to_dict())
