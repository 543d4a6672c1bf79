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

from rocklet.broker.config_writer import ConfigWriter
from rocklet.broker.json_file import load_json, persist_json
from rocklet.protocol.bodies.route import Perm
from rocklet.protocol.bodies.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from rocklet.protocol.errors import BodyError
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


class TopicConfigManager:
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
        self._path = path
        self._clock = clock
        self._auto_create = auto_create
        self.on_change = on_change
        self._table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        #: Topics whose latest change is not on disk yet -> that change's generation.
        #: Empty almost always: hot paths test it before calling :meth:`saved`.
        self.unsaved: dict[str, int] = {}
        # The snapshot is a shallow copy (configs are immutable); the thread encodes it.
        self.writer: ConfigWriter[TopicConfigSerializeWrapper] = ConfigWriter(
            path.name, self.wrapper, self._write_file
        )
        self.writer.on_saved = self._forget_saved
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

    def load(self) -> None:
        """Load the file or its backup; entries that do not parse are skipped."""
        obj = load_json(self._path)
        if not isinstance(obj, dict):
            return
        for name, raw in (obj.get("topicConfigTable") or {}).items():
            if name == AUTO_CREATE_TOPIC and not self._auto_create:
                continue  # RocketMQ drops the template when auto-creation is turned off
            try:
                self._table[name] = TopicConfig.from_dict(raw)
            except BodyError:
                continue
        try:
            self.data_version = DataVersion.from_dict(obj.get("dataVersion", {}))
        except BodyError:
            self.data_version = DataVersion()

    def find(self, topic: str) -> TopicConfig | None:
        """Return a topic's config, or ``None`` when unknown."""
        return self._table.get(topic)

    def all(self) -> dict[str, TopicConfig]:
        """Return a copy of every topic config."""
        return dict(self._table)

    def wrapper(self) -> TopicConfigSerializeWrapper:
        """Return the table with its data version (GET_ALL_TOPIC_CONFIG, registration)."""
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
        self._table[config.topic_name] = config
        self._changed(config.topic_name)
        return config

    def replace_all(self, wrapper: TopicConfigSerializeWrapper) -> bool:
        """Take the master's whole table if its data version differs (a slave's sync).

        Returns:
            Whether the table was replaced.
        """
        if wrapper.data_version == self.data_version:
            return False
        self._table = dict(wrapper.topic_config_table)
        self.data_version = wrapper.data_version
        generation = self.writer.changed(urgent=True)
        for topic in self._table:
            self.unsaved[topic] = generation
        if self.on_change is not None:
            self.on_change()
        return True

    def delete(self, topic: str) -> bool:
        """Delete a topic's config; returns whether it existed."""
        if self._table.pop(topic, None) is None:
            return False
        self._changed(topic)
        return True

    async def saved(self, *topics: str) -> None:
        """Wait until the latest change of each named topic is on disk.

        Returns at once for topics not in :attr:`unsaved`.

        Raises:
            ConfigWriteError: ``topics.json`` could not be written.
        """
        unsaved = self.unsaved
        pending = [unsaved[t] for t in topics if t in unsaved]
        if pending:
            await self.writer.durable(max(pending))

    def _write_file(self, wrapper: TopicConfigSerializeWrapper) -> None:
        persist_json(self._path, wrapper.to_dict())

    def _forget_saved(self, generation: int) -> None:
        for topic in [t for t, g in self.unsaved.items() if g <= generation]:
            del self.unsaved[topic]

    def _changed(self, topic: str) -> None:
        self.data_version = self.data_version.next_version(self._clock.now_ms())
        self.unsaved[topic] = self.writer.changed(urgent=True)
        if self.on_change is not None:
            self.on_change()
