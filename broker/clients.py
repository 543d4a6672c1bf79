"""Producers and consumers known to the broker, learned from heartbeats.

RocketMQ keeps these in ``ProducerManager`` and ``ConsumerManager``: one entry per
(group, channel) refreshed by HEART_BEAT, removed by UNREGISTER_CLIENT, by the channel
closing, or after ``channelExpiredTimeout`` (120 s) without a heartbeat. When the set of
a consumer group's channels changes, every member is told to rebalance
(NOTIFY_CONSUMER_IDS_CHANGED, docs/protocol.md) through ``on_group_changed``.

Subscriptions are stored with tag hashes recomputed from the expression: the C++
client's heartbeat carries ``atoi(tag)`` codes, useless for filtering.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final

from rocklet.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from rocklet.protocol.filter import parse_tag_expression, tag_codes
from rocklet.transport.connection import Connection

__all__ = ["CHANNEL_EXPIRED_MS", "ClientChannel", "ClientManager", "ConsumerGroupInfo"]

#: RocketMQ's ``channelExpiredTimeout``.
CHANNEL_EXPIRED_MS: Final = 120_000


@dataclass(slots=True, eq=False)
class ClientChannel:
    """One client process's connection as seen by a group."""

    client_id: str
    connection: Connection
    language: str
    version: int
    last_update_ms: int


@dataclass(slots=True, eq=False)
class ConsumerGroupInfo:
    """A consumer group's members and subscriptions."""

    group: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    channels: dict[Connection, ClientChannel] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        """Client ids of the live members, sorted (clients sort them again anyway)."""
        return sorted({c.client_id for c in self.channels.values()})


def with_tag_codes(sub: SubscriptionData) -> SubscriptionData:
    """Return the subscription with tags and hashes rebuilt from its expression."""
    tags = parse_tag_expression(sub.sub_string)
    codes = tag_codes(tags)
    return replace(
        sub,
        tags_set=tuple(sorted(tags)) if tags else (),
        code_set=tuple(sorted(codes)) if codes else (),
    )


GroupChanged = Callable[[str, list[Connection]], None]


class ClientManager:
    """Registry of producer and consumer channels. Not thread-safe: event loop only.

    Args:
        on_group_changed: Called with a consumer group and its member connections
            whenever its membership changes.
    """

    def __init__(self, on_group_changed: GroupChanged | None = None) -> None:
        self._producers: dict[str, dict[Connection, ClientChannel]] = {}
        self._consumers: dict[str, ConsumerGroupInfo] = {}
        self._on_group_changed = on_group_changed

    # -- producers -----------------------------------------------------------------
    def register_producer(self, group: str, channel: ClientChannel) -> None:
        """Add or refresh a producer channel of a group."""
        self._producers.setdefault(group, {})[channel.connection] = channel

    def unregister_producer(self, group: str, connection: Connection) -> None:
        """Remove a producer channel from a group."""
        channels = self._producers.get(group)
        if channels is not None:
            channels.pop(connection, None)
            if not channels:
                del self._producers[group]

    def producer_channels(self, group: str) -> list[ClientChannel]:
        """Return the live channels of a producer group."""
        return list(self._producers.get(group, {}).values())

    def producer_groups(self) -> dict[str, list[ClientChannel]]:
        """Return every producer group with its channels."""
        return {g: list(c.values()) for g, c in self._producers.items()}

    def find_client(self, client_id: str) -> ClientChannel | None:
        """Find a producer or consumer channel by client id (request-reply routing)."""
        for channels in self._producers.values():
            for channel in channels.values():
                if channel.client_id == client_id:
                    return channel
        for info in self._consumers.values():
            for channel in info.channels.values():
                if channel.client_id == client_id:
                    return channel
        return None

    # -- consumers -----------------------------------------------------------------
    def register_consumer(self, data: ConsumerData, channel: ClientChannel) -> bool:
        """Add or refresh a consumer channel and its subscriptions.

        Returns:
            Whether the group's membership changed (a new channel joined).
        """
        info = self._consumers.get(data.group_name)
        if info is None:
            info = ConsumerGroupInfo(
                data.group_name, data.consume_type, data.message_model, data.consume_from_where
            )
            self._consumers[data.group_name] = info
        info.consume_type = data.consume_type
        info.message_model = data.message_model
        info.consume_from_where = data.consume_from_where
        joined = channel.connection not in info.channels
        info.channels[channel.connection] = channel
        for sub in data.subscription_data_set:
            current = info.subscriptions.get(sub.topic)
            if current is None or current.sub_version <= sub.sub_version:
                info.subscriptions[sub.topic] = with_tag_codes(sub)
        if joined:
            self._changed(info)
        return joined

    def unregister_consumer(self, group: str, connection: Connection) -> None:
        """Remove a consumer channel from a group (UNREGISTER_CLIENT)."""
        info = self._consumers.get(group)
        if info is not None and info.channels.pop(connection, None) is not None:
            self._after_leave(info)

    def consumer_group(self, group: str) -> ConsumerGroupInfo | None:
        """Return a consumer group's info, if any member is known."""
        return self._consumers.get(group)

    def consumer_groups(self) -> list[ConsumerGroupInfo]:
        """Return every known consumer group."""
        return list(self._consumers.values())

    def subscription(self, group: str, topic: str) -> SubscriptionData | None:
        """Return a group's registered subscription to a topic."""
        info = self._consumers.get(group)
        return None if info is None else info.subscriptions.get(topic)

    # -- lifecycle -----------------------------------------------------------------
    def connection_closed(self, connection: Connection) -> None:
        """Drop every registration made over a closed connection."""
        for group in list(self._producers):
            self.unregister_producer(group, connection)
        for info in list(self._consumers.values()):
            if info.channels.pop(connection, None) is not None:
                self._after_leave(info)

    def scan_once(self, now_ms: int) -> int:
        """Drop channels silent for longer than :data:`CHANNEL_EXPIRED_MS`.

        Returns:
            How many channels were dropped.
        """
        dropped = 0
        for group, channels in list(self._producers.items()):
            for conn, ch in list(channels.items()):
                if now_ms - ch.last_update_ms > CHANNEL_EXPIRED_MS:
                    self.unregister_producer(group, conn)
                    dropped += 1
        for info in list(self._consumers.values()):
            stale = [
                c
                for c, ch in info.channels.items()
                if now_ms - ch.last_update_ms > CHANNEL_EXPIRED_MS
            ]
            for conn in stale:
                del info.channels[conn]
                dropped += 1
            if stale:
                self._after_leave(info)
        return dropped

    def _after_leave(self, info: ConsumerGroupInfo) -> None:
        if info.channels:
            self._changed(info)
        else:
            # RocketMQ keeps the subscription until the group is empty, then forgets it.
            del self._consumers[info.group]

    def _changed(self, info: ConsumerGroupInfo) -> None:
        if self._on_group_changed is not None:
            self._on_group_changed(info.group, list(info.channels))
