"""Topic configs of this broker, persisted as topics.json (RocketMQ's layout).

Mirrors RocketMQ 4.9's ``TopicConfigManager``: the system topics a broker always has,
auto-creation of a topic on its first send from the template topic ``TBW102`` (only
when the template carries the INHERIT permission, i.e. ``autoCreateTopicEnable``), and
the retry / dead-letter topics created on demand for consumer groups. Any change bumps
the data version and calls ``on_change`` so the broker re-registers with the name
servers at once instead of waiting for the 30 s timer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

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
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self._path = path
        self._clock = clock
        self._auto_create = auto_create
        self.on_change = on_change
        self._table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self._dirty = False
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
        self._changed()
        return config

    def delete(self, topic: str) -> bool:
        """Delete a topic's config; returns whether it existed."""
        if self._table.pop(topic, None) is None:
            return False
        self._changed()
        return True

    def snapshot(self) -> dict[str, Any] | None:
        """Return the file content if anything changed since the last snapshot."""
        if not self._dirty:
            return None
        self._dirty = False
        return self.wrapper().to_dict()

    def persist_snapshot(self, snapshot: dict[str, Any]) -> None:
        """Write a snapshot to disk (blocking; call from a worker thread)."""
        persist_json(self._path, snapshot)

    def _changed(self) -> None:
        self.data_version = self.data_version.next_version(self._clock.now_ms())
        self._dirty = True
        if self.on_change is not None:
            self.on_change()
