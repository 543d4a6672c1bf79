"""Admin requests about the broker's statistics (``AdminBrokerProcessor``).

- VIEW_BROKER_STATS_DATA (315): one statistic of one key (``TOPIC_PUT_NUMS`` of a topic,
  ``GROUP_GET_NUMS`` of ``topic@group``...) over its last minute, hour and day, from
  :mod:`rocklet.broker.stats`. A statistic or key nothing was counted under answers
  SYSTEM_ERROR ``The stats <name> <key> not exist``, as RocketMQ does; ``mqadmin
  statsAll`` then shows zeros for that row.
- GET_BROKER_CONSUME_STATS (317): for every subscription group, its progress on each
  topic it has committed offsets on (``write`` queues, as RocketMQ counts them here),
  its pull rate, and the backlog summed over all of them; ``isOrder`` keeps only
  ordered topics. An online group is only shown topics it subscribes to.
"""

from __future__ import annotations

from rocklet.broker.clients import ClientManager
from rocklet.broker.groups import SubscriptionGroupManager
from rocklet.broker.identity import BrokerIdentity
from rocklet.broker.offsets import ConsumerOffsetManager
from rocklet.broker.processors.admin_topics import store_time_at
from rocklet.broker.stats import BrokerStats
from rocklet.broker.topics import TopicConfigManager
from rocklet.protocol.bodies.broker_stats import BrokerStatsData, BrokerStatsItem, ConsumeStatsList
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.stats import ConsumeStats, OffsetWrapper
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.stats import (
    GetConsumeStatsInBrokerHeader,
    ViewBrokerStatsDataRequestHeader,
)
from rocklet.store.message_store import MessageStore
from rocklet.transport import ProcessorRegistry, RequestContext

__all__ = ["StatsAdmin", "register"]


class StatsAdmin:
    """Serves the statistics admin codes. Event loop only.

    Args:
        stats: The broker's per-key statistics.
        store: The message store (queue max offsets and store times).
        topics: Topic configs.
        groups: Subscription group configs.
        offsets: Committed consumer offsets.
        clients: Consumer channels (an online group's subscriptions).
        identity: This broker's name and address.
    """

    def __init__(
        self,
        *,
        stats: BrokerStats,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        clients: ClientManager,
        identity: BrokerIdentity,
    ) -> None:
        self._stats = stats
        self._store = store
        self._topics = topics
        self._groups = groups
        self._offsets = offsets
        self._clients = clients
        self._identity = identity

    async def view_stats(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """VIEW_BROKER_STATS_DATA: one statistic's minute, hour and day."""
        header = ViewBrokerStatsDataRequestHeader.from_ext_fields(cmd.ext_fields)
        item = self._stats.item(header.stats_name, header.stats_key)
        if item is None:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"The stats <{header.stats_name}> <{header.stats_key}> not exist",
            )
        windows = [item.minute(), item.hour(), item.day()]
        minute, hour, day = (BrokerStatsItem(w.sum, w.tps, w.avgpt) for w in windows)
        body = BrokerStatsData(stats_minute=minute, stats_hour=hour, stats_day=day).to_json()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def consume_stats(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS: every group's progress and the total backlog."""
        header = GetConsumeStatsInBrokerHeader.from_ext_fields(cmd.ext_fields)
        entries: list[dict[str, list[ConsumeStats]]] = []
        total_diff = 0
        for config in self._groups.all():
            group = config.group_name
            per_topic = [
                stats
                for topic in self._offsets.topics_of(group)
                if (stats := self._group_on_topic(group, topic, header.is_order)) is not None
            ]
            total_diff += sum(stats.total_diff for stats in per_topic)
            entries.append({group: per_topic})
        body = ConsumeStatsList(
            broker_addr=self._identity.addr, total_diff=total_diff, consume_stats_list=entries
        ).to_json()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    def _group_on_topic(self, group: str, topic: str, order_only: bool) -> ConsumeStats | None:
        config = self._topics.find(topic)
        if config is None or (order_only and not config.order):
            return None
        info = self._clients.consumer_group(group)
        # An online group that does not subscribe to the topic has no stats on it.
        if info is not None and info.subscriptions and topic not in info.subscriptions:
            return None
        committed = self._offsets.offsets_of(group, topic)
        broker_name, store = self._identity.broker_name, self._store
        table: dict[MessageQueue, OffsetWrapper] = {}
        for queue_id in range(config.write_queue_nums):
            consumer_offset = max(0, committed.get(queue_id, 0))
            last = (
                store_time_at(store, topic, queue_id, consumer_offset - 1) if consumer_offset else 0
            )
            table[MessageQueue(topic, broker_name, queue_id)] = OffsetWrapper(
                max(0, store.max_offset(topic, queue_id)), consumer_offset, max(0, last)
            )
        return ConsumeStats(table, self._stats.group_get_tps(group, topic))


def register(registry: ProcessorRegistry, admin: StatsAdmin) -> None:
    """Register the statistics admin codes."""
    registry.register_all(
        {
            RequestCode.VIEW_BROKER_STATS_DATA: admin.view_stats,
            RequestCode.GET_BROKER_CONSUME_STATS: admin.consume_stats,
        }
    )
