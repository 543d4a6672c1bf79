"""Admin requests about consumer groups and their offsets (``AdminBrokerProcessor``).

- UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200): body ``SubscriptionGroupConfig``.
- GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): ``{"dataVersion":...,"subscriptionGroupTable":...}``.
- DELETE_SUBSCRIPTIONGROUP (207): forget a group; its offsets too when ``removeOffset``.
- GET_CONSUME_STATS (208): per read queue the broker's max offset, the group's committed
  offset and the store time of the last consumed message; ``consumeTps`` is the group's
  pull rate over the last minute, summed over the topics (``GROUP_GET_NUMS``).
- GET_ALL_CONSUMER_OFFSET (43): the offset table as ``consumerOffset.json`` holds it,
  plus ``rockletResetStamps`` (always, so a Rocklet slave knows its master keeps them;
  RocketMQ's slave ignores the field): see :mod:`rocklet.broker.offsets`.
- INVOKE_BROKER_TO_RESET_OFFSET (222): move a group's offsets on a topic to the first
  message stored at or after a time (-1: the end), only backwards unless ``isForce``;
  tell each online member with RESET_CONSUMER_CLIENT_OFFSET (220), and answer the new
  table (``Broker2Client.resetOffset``). With no member online the answer is
  CONSUMER_NOT_ONLINE and no offset moves, as in RocketMQ: ``mqadmin`` then commits the
  offsets itself (GET_CONSUME_STATS, SEARCH_OFFSET_BY_TIMESTAMP, UPDATE_CONSUMER_OFFSET)
  and prints its six-column table.

Every change is on disk before it is answered (SYSTEM_ERROR naming the file if it could
not be written; the change then lives in memory only until a later write succeeds).

Deviations in 222: with members online the new offsets are also committed on the
broker (RocketMQ leaves that to the members), so they hold even if a member misses the
notice; and each member is told in the body form it reads (the C++ list form for a
C++ client, Java's map form otherwise), where RocketMQ picks one form for all from the
admin tool's language (``mqadmin ... -c``), so that either a Java or a C++ member cannot
read the notice and keeps consuming where it was.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Final

import structlog

from rocklet.broker.clients import ClientChannel, ClientManager
from rocklet.broker.config_writer import ConfigWriteError
from rocklet.broker.groups import SubscriptionGroupManager
from rocklet.broker.identity import BrokerIdentity
from rocklet.broker.offsets import RESET_STAMPS_KEY, ConsumerOffsetManager
from rocklet.broker.processors.admin_topics import SLAVE_REFUSAL, store_time_at
from rocklet.broker.processors.refusal import refuse_bad_group, refuse_bad_topic
from rocklet.broker.stats_sink import StatsSink
from rocklet.broker.topics import TopicConfigManager
from rocklet.protocol import fastjson
from rocklet.protocol.bodies.consumer import ResetOffsetBody
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.stats import ConsumeStats, OffsetWrapper
from rocklet.protocol.bodies.subscription_group import (
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from rocklet.protocol.codes import LanguageCode, RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.admin import MAX_QUEUE_NUMS, DeleteSubscriptionGroupRequestHeader
from rocklet.protocol.headers.base import INT32, NON_NEGATIVE_INT64
from rocklet.protocol.headers.consumer import GetConsumeStatsRequestHeader, ResetOffsetRequestHeader
from rocklet.protocol.names import check_topic_name
from rocklet.store.message_store import MessageStore
from rocklet.transport import ProcessorRegistry, RequestContext
from rocklet.transport.errors import RemotingError

__all__ = ["GroupAdmin", "register"]

log = structlog.get_logger(__name__)

#: How long a reset notice may wait for a congested consumer connection (RocketMQ: 5 s).
_NOTIFY_TIMEOUT_S: Final = 5.0


class GroupAdmin:
    """Serves the group admin codes. Event loop only.

    Args:
        store: The message store (queue offsets and store times).
        topics: Topic configs.
        groups: Subscription group configs.
        offsets: Committed consumer offsets.
        clients: Consumer channels (online members are told of an offset reset).
        identity: This broker's name and whether it is a master.
        stats: Per-key statistics and Prometheus series (``consumeTps``; a deleted
            group's series are dropped, its statistics when they are set to); ``None``:
            ``consumeTps`` always 0.
    """

    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        clients: ClientManager,
        identity: BrokerIdentity,
        stats: StatsSink | None = None,
    ) -> None:
        self._stats = stats
        self._store = store
        self._topics = topics
        self._groups = groups
        self._offsets = offsets
        self._clients = clients
        self._identity = identity

    async def update(self, rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: create or replace a group's config."""
        if not self._identity.is_master:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=SLAVE_REFUSAL)
        config = SubscriptionGroupConfig.from_json(cmd.body)
        # SYSTEM_ERROR: 4.9.4's admin refusal (RocketMQ 5 answers INVALID_PARAMETER, a
        # code 4.x tools do not know).
        refusal = refuse_bad_group(cmd, config.group_name, ResponseCode.SYSTEM_ERROR)
        if refusal is not None:
            return refusal
        problem = _config_problem(config)
        if problem is not None:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=problem)
        self._groups.update(config)
        log.info(
            "subscription group updated by admin", group=config.group_name, peer=rctx.peer_address
        )
        return await self._saved(cmd, self._groups.saved(config.group_name))

    async def all_configs(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: every group config with the table's version."""
        groups = self._groups
        wrapper = SubscriptionGroupWrapper(
            {c.group_name: c for c in groups.all()}, groups.data_version
        )
        return cmd.make_response(ResponseCode.SUCCESS, body=wrapper.to_json())

    async def delete(self, rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """DELETE_SUBSCRIPTIONGROUP: forget a group (and its offsets when asked)."""
        if not self._identity.is_master:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=SLAVE_REFUSAL)
        header = DeleteSubscriptionGroupRequestHeader.from_ext_fields(cmd.ext_fields)
        self._groups.delete(header.group_name)
        if header.remove_offset:
            self._offsets.remove_group(header.group_name)
        if self._stats is not None:
            self._stats.on_group_deleted(header.group_name)
        log.info(
            "subscription group deleted by admin", group=header.group_name, peer=rctx.peer_address
        )
        answer = await self._saved(cmd, self._groups.saved(header.group_name))
        if header.remove_offset and answer.code == ResponseCode.SUCCESS:
            answer = await self._saved(cmd, self._offsets.durable())
        return answer

    @staticmethod
    async def _saved(cmd: RemotingCommand, write: Awaitable[None]) -> RemotingCommand:
        """Answer SUCCESS once ``write`` put the change on disk, SYSTEM_ERROR if it failed."""
        try:
            await write
        except ConfigWriteError as exc:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        return cmd.make_response(ResponseCode.SUCCESS)

    async def consume_stats(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_CONSUME_STATS: a group's progress on one topic, or on every topic it has."""
        header = GetConsumeStatsRequestHeader.from_ext_fields(cmd.ext_fields)
        refusal = refuse_bad_topic(cmd, header.topic) if header.topic else None
        if refusal is not None:
            return refusal
        group, broker_name = header.consumer_group, self._identity.broker_name
        topics = [header.topic] if header.topic else self._offsets.topics_of(group)
        info = self._clients.consumer_group(group)
        table: dict[MessageQueue, OffsetWrapper] = {}
        consume_tps = 0.0
        for topic in topics:
            config = self._topics.find(topic)
            if config is None:
                continue
            # An online group that does not subscribe to the topic has no stats on it.
            if info is not None and info.subscriptions and topic not in info.subscriptions:
                continue
            committed = self._offsets.offsets_of(group, topic)
            for queue_id in range(config.read_queue_nums):
                table[MessageQueue(topic, broker_name, queue_id)] = self._progress(
                    topic, queue_id, committed.get(queue_id, 0)
                )
            if self._stats is not None:
                consume_tps += self._stats.broker.group_get_tps(group, topic)
        body = ConsumeStats(table, consume_tps).to_json()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    def _progress(self, topic: str, queue_id: int, consumer_offset: int) -> OffsetWrapper:
        store = self._store
        consumer_offset = max(0, consumer_offset)
        last = store_time_at(store, topic, queue_id, consumer_offset - 1) if consumer_offset else 0
        return OffsetWrapper(max(0, store.max_offset(topic, queue_id)), consumer_offset, last)

    async def all_offsets(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ALL_CONSUMER_OFFSET: the whole offset table, queue ids unquoted as fastjson."""
        table = {f"{t}@{g}": queues for t, g, queues in self._offsets.entries()}
        obj = {"offsetTable": table, RESET_STAMPS_KEY: self._offsets.reset_stamps()}
        body = fastjson.dumps(obj, unquoted_int_keys=True).encode()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def reset_offset(self, rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """INVOKE_BROKER_TO_RESET_OFFSET: move a group's offsets to a time and tell it."""
        header = ResetOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        refusal = refuse_bad_group(cmd, header.group, ResponseCode.SYSTEM_ERROR)
        if refusal is not None:
            return refusal  # its offsets would be committed
        config = self._topics.find(header.topic)
        if config is None:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=check_topic_name(header.topic)
                or f"[reset-offset] reset offset failed, no topic in this broker. "
                f"topic={header.topic}",
            )
        committed = self._offsets.offsets_of(header.group, header.topic)
        info = self._clients.consumer_group(header.group)
        if not committed and info is None:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"The consumer group <{header.group}> not exist",
            )
        if info is None or not info.channels:
            # Broker2Client.resetOffset: nothing is changed; the tool falls back.
            return cmd.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE,
                remark="Consumer not online, so can not reset offset, "
                f"Group: {header.group} Topic: {header.topic} Timestamp: {header.timestamp}",
            )
        table = self._reset_table(header, config.write_queue_nums, committed)
        for mq, offset in table.items():
            self._offsets.commit(header.group, mq.topic, mq.queue_id, offset)
        log.info(
            "offsets reset by admin", group=header.group, topic=header.topic, peer=rctx.peer_address
        )
        try:
            await self._offsets.durable()
        except ConfigWriteError as exc:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        for channel in list(info.channels.values()):
            await self._notify_reset(channel, header, table)
        return cmd.make_response(ResponseCode.SUCCESS, body=ResetOffsetBody(table).to_json())

    def _reset_table(
        self, header: ResetOffsetRequestHeader, queue_nums: int, committed: dict[int, int]
    ) -> dict[MessageQueue, int]:
        store, broker = self._store, self._identity.broker_name
        table: dict[MessageQueue, int] = {}
        for queue_id in range(queue_nums):
            if header.timestamp == -1:
                target = store.max_offset(header.topic, queue_id)
            else:
                target = store.offset_for_time(header.topic, queue_id, header.timestamp)
            target = max(0, target)
            current = committed.get(queue_id)
            if not header.is_force and current is not None and current <= target:
                target = current  # without force a reset only moves backwards
            table[MessageQueue(header.topic, broker, queue_id)] = target
        return table

    async def _notify_reset(
        self,
        channel: ClientChannel,
        header: ResetOffsetRequestHeader,
        table: dict[MessageQueue, int],
    ) -> None:
        # The member's own language picks the form (RocketMQ: the admin tool's).
        body = ResetOffsetBody(table).to_json(list_form=channel.language == LanguageCode.CPP.name)
        request = RemotingCommand(
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext_fields=header.to_ext_fields(), body=body
        )
        try:
            await channel.connection.send_oneway(request, _NOTIFY_TIMEOUT_S)
        except RemotingError as exc:
            log.info("reset notice not sent", client=channel.client_id, error=str(exc))


#: The numbers of a group config and what each may be. The body is JSON, so nothing
#: else bounds them; a retry topic made with billions of queues would stall every
#: request that visits its queues (consume stats, routes).
_CONFIG_BOUNDS: Final = (
    ("retryQueueNums", "retry_queue_nums", (0, MAX_QUEUE_NUMS)),
    ("retryMaxTimes", "retry_max_times", INT32),
    ("brokerId", "broker_id", NON_NEGATIVE_INT64),
    ("whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly", NON_NEGATIVE_INT64),
)


def _config_problem(config: SubscriptionGroupConfig) -> str | None:
    for key, attr, (low, high) in _CONFIG_BOUNDS:
        value = getattr(config, attr)
        if not low <= value <= high:
            return f"SubscriptionGroupConfig {key} {value} is out of the range [{low}, {high}]"
    return None


def register(registry: ProcessorRegistry, admin: GroupAdmin) -> None:
    """Register the group admin codes."""
    registry.register_all(
        {
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.update,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.all_configs,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: admin.delete,
            RequestCode.GET_CONSUME_STATS: admin.consume_stats,
            RequestCode.GET_ALL_CONSUMER_OFFSET: admin.all_offsets,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: admin.reset_offset,
        }
    )
