"""Subscription groups, persisted as subscriptionGroup.json (RocketMQ's layout).

A group unknown to the broker is created with defaults on first use when
``autoCreateSubscriptionGroup`` is on, as RocketMQ's ``SubscriptionGroupManager``
does, unless its name breaks RocketMQ's rules (as RocketMQ 5 checks); otherwise pulls
of that group get SUBSCRIPTION_GROUP_NOT_EXIST.

Every change (auto-created groups included) starts a durable write of the file
(:mod:`rocklet.broker.config_writer`, shared by concurrent changes); until it is on disk
the group is listed in :attr:`SubscriptionGroupManager.unsaved`, and requests that rely
on it await :meth:`SubscriptionGroupManager.saved` before answering.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rocklet.broker.config_table import ConfigTable
from rocklet.broker.json_file import persist_json
from rocklet.protocol.bodies.subscription_group import (
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from rocklet.protocol.names import BROKER_SYSTEM_GROUPS, check_group_name
from rocklet.transport.clock import Clock

__all__ = ["SubscriptionGroupManager"]


class SubscriptionGroupManager(ConfigTable[SubscriptionGroupConfig, dict[str, Any]]):
    """Group configs by name. Not thread-safe: use it from the event loop.

    Args:
        path: ``<store>/config/subscriptionGroup.json``.
        clock: Time source for data versions.
        auto_create: ``autoCreateSubscriptionGroup``.
    """

    TABLE_KEY = "subscriptionGroupTable"

    def __init__(self, path: Path, clock: Clock, *, auto_create: bool = True) -> None:
        super().__init__(path, clock, SubscriptionGroupConfig.from_dict)
        self._auto_create = auto_create
        self._table.update((name, SubscriptionGroupConfig(name)) for name in BROKER_SYSTEM_GROUPS)

    def find(self, group: str, *, create: bool = True) -> SubscriptionGroupConfig | None:
        """Return a group's config, creating it with defaults when allowed.

        Args:
            group: Group name.
            create: Create the group if it is unknown, auto-creation is on and the
                name is valid (``check_group_name``).

        Returns:
            The config, or ``None`` when the group is unknown and not created.
        """
        config = self._table.get(group)
        if config is None and create and self._auto_create and check_group_name(group) is None:
            config = self.update(SubscriptionGroupConfig(group))
        return config

    def update(self, config: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        """Create or replace a group's config."""
        self._put(config.group_name, config)
        return config

    def replace_all(self, wrapper: SubscriptionGroupWrapper) -> bool:
        """Take the master's whole table if its data version differs (a slave's sync).

        Returns:
            Whether the table was replaced.
        """
        return self._replace(wrapper.subscription_group_table, wrapper.data_version)

    def all(self) -> list[SubscriptionGroupConfig]:
        """Return every group config."""
        return list(self._table.values())

    def wrapper(self) -> dict[str, Any]:
        """Return the GET_ALL_SUBSCRIPTIONGROUP_CONFIG / file JSON object."""
        return {
            "dataVersion": self.data_version.to_dict(),
            self.TABLE_KEY: {n: c.to_dict() for n, c in self._table.items()},
        }

    def _write_file(self, content: dict[str, Any]) -> None:
        persist_json(self._path, content)
