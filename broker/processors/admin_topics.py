"""Admin requests about topics (RocketMQ 4.9's ``AdminBrokerProcessor``, §3.15).

- UPDATE_AND_CREATE_TOPIC (17): create or replace a topic's config. The answer waits
  until ``topics.json`` has the change on disk (SYSTEM_ERROR naming the file if it
  could not be written). The topic table's change makes the broker re-register with
  its name servers at once, so routes show the topic without waiting for the 30 s timer.
- DELETE_TOPIC_IN_BROKER (215): forget a topic's config and every group's offsets on it,
  on disk before the answer, then delete its consume-queue files, as RocketMQ's
  ``cleanUnusedTopic`` does there (a broker that kept them would hold their descriptors
  until retention: topics made and deleted by the thousand ran it out of them). Its
  messages stay in the commitlog until retention, never dispatched to the topic again;
  made again, the topic starts from offset 0. The name servers keep the route until
  DELETE_TOPIC_IN_NAMESRV, as in RocketMQ.
- GET_ALL_TOPIC_CONFIG (21): the ``TopicConfigSerializeWrapper``.
- GET_TOPIC_STATS_INFO (202): each write queue's min / max offset and last store time.
- QUERY_TOPIC_CONSUME_BY_WHO (300): groups subscribed to the topic or holding offsets.

System topics (``TopicValidator.isSystemTopic`` plus the broker's own cluster, broker
and reply topics) cannot be created, changed or deleted this way, as in 4.9.4.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Final

import structlog

from rocklet.broker.clients import ClientManager
from rocklet.broker.config_writer import ConfigWriteError
from rocklet.broker.identity import BrokerIdentity
from rocklet.broker.offsets import ConsumerOffsetManager
from rocklet.broker.processors.refusal import Refused, refuse_bad_topic
from rocklet.broker.registration import RegistrationTracker
from rocklet.broker.stats_sink import StatsSink
from rocklet.broker.topics import TopicConfigManager
from rocklet.broker.transaction_check import CHECK_MAX_TIME_TOPIC
from rocklet.protocol.bodies.cluster import GroupList
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.stats import TopicOffset, TopicStatsTable
from rocklet.protocol.bodies.topic import TOPIC_FILTER_TYPES, TopicConfig
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.admin import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from rocklet.protocol.message import STORE_TIMESTAMP_POS
from rocklet.protocol.names import (
    AUTO_CREATE_TOPIC,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    check_topic_name,
)
from rocklet.store.maintenance import clean_unused_topics
from rocklet.store.message_store import MessageStore
from rocklet.transport import ProcessorRegistry, RequestContext

__all__ = [
    "SLAVE_REFUSAL",
    "VALIDATOR_SYSTEM_TOPICS",
    "TopicAdmin",
    "own_system_topics",
    "register",
    "store_time_at",
    "subscribed_groups",
]

log = structlog.get_logger(__name__)

#: ``AdminBrokerProcessor.validateSlave``'s remark.
SLAVE_REFUSAL: Final = (
    "Can't modify topic or subscription group from slave broker, "
    "please execute it from master broker."
)
#: ``TopicValidator.SYSTEM_TOPIC_SET`` (4.9.4); the prefix below covers the rest.
VALIDATOR_SYSTEM_TOPICS: Final = frozenset(
    {
        AUTO_CREATE_TOPIC,
        SCHEDULE_TOPIC,
        "BenchmarkTest",
        TRANS_HALF_TOPIC,
        "RMQ_SYS_TRACE_TOPIC",
        TRANS_OP_HALF_TOPIC,
        CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)
_SYSTEM_PREFIX: Final = "rmq_sys_"


def own_system_topics(identity: BrokerIdentity) -> frozenset[str]:
    """The system topics ``TopicConfigManager`` adds to the validator's set at start."""
    cluster = identity.cluster_name
    return frozenset({cluster, identity.broker_name, f"{cluster}_REPLY_TOPIC"})


_PERM_MASK: Final = 0b111  # PermName INHERIT | WRITE | READ
_I64: Final = struct.Struct(">q")


def store_time_at(store: MessageStore, topic: str, queue_id: int, offset: int) -> int:
    """Store time of the message at a queue offset (``getMessageStoreTimeStamp``).

    Args:
        store: The store.
        topic: Topic.
        queue_id: Queue id.
        offset: Queue offset.

    Returns:
        The store time in ms, or 0 when no message is stored there.
    """
    got = store.get_messages(topic, queue_id, offset, 1)
    if not got.buffers:
        return 0
    (stamp,) = _I64.unpack_from(got.buffers[0], STORE_TIMESTAMP_POS)
    return int(stamp)


def subscribed_groups(clients: ClientManager, topic: str) -> set[str]:
    """Consumer groups with an online member subscribed to ``topic``."""
    return {info.group for info in clients.consumer_groups() if topic in info.subscriptions}


class TopicAdmin:
    """Serves the topic admin codes. Event loop only.

    Args:
        store: The message store (queue offsets and store times).
        topics: Topic configs.
        offsets: Committed consumer offsets (dropped with a deleted topic).
        clients: Consumer channels (who subscribes to a topic).
        registration: Which topic table the name servers have.
        identity: This broker's names (its own topics) and whether it is a master.
        register_timeout_ms: ``registerBrokerTimeoutMills``: the longest an admin
            change waits for the name servers.
        stats: Per-key statistics and Prometheus series (a deleted topic's series
            are dropped, its statistics when they are set to); ``None``: none kept.
    """

    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        offsets: ConsumerOffsetManager,
        clients: ClientManager,
        registration: RegistrationTracker,
        identity: BrokerIdentity,
        register_timeout_ms: int,
        stats: StatsSink | None = None,
    ) -> None:
        self._store = store
        self._topics = topics
        self._offsets = offsets
        self._stats = stats
        self._clients = clients
        self._registration = registration
        self._identity = identity
        self._register_timeout_s = register_timeout_ms / 1000
        self._own_topics = own_system_topics(identity)

    def _is_system(self, topic: str) -> bool:
        return (
            topic in VALIDATOR_SYSTEM_TOPICS
            or topic in self._own_topics
            or topic.startswith(_SYSTEM_PREFIX)
        )

    def _check_name(self, topic: str) -> None:
        problem = check_topic_name(topic)
        if problem is not None:
            raise Refused(ResponseCode.SYSTEM_ERROR, problem)
        if self._is_system(topic):
            raise Refused(
                ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic."
            )
        if not self._identity.is_master:
            raise Refused(ResponseCode.SYSTEM_ERROR, SLAVE_REFUSAL)

    async def create(self, rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC: create or replace a topic's config."""
        header = CreateTopicRequestHeader.from_ext_fields(cmd.ext_fields)
        try:
            self._check_name(header.topic)
            config = _topic_config(header)
        except Refused as refused:
            return refused.answer(cmd)
        self._topics.update(config)
        log.info("topic updated by admin", topic=header.topic, peer=rctx.peer_address)
        try:
            await self._topics.saved(header.topic)
        except ConfigWriteError as exc:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        await self._registered()
        return cmd.make_response(ResponseCode.SUCCESS)

    async def delete(self, rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """DELETE_TOPIC_IN_BROKER: forget a topic's config and the offsets on it."""
        header = DeleteTopicRequestHeader.from_ext_fields(cmd.ext_fields)
        try:
            self._check_name(header.topic)
        except Refused as refused:
            return refused.answer(cmd)
        self._topics.delete(header.topic)
        self._offsets.remove_topic(header.topic)
        if self._stats is not None:
            self._stats.on_topic_deleted(header.topic)
        log.info("topic deleted by admin", topic=header.topic, peer=rctx.peer_address)
        try:
            await self._topics.saved(header.topic)
            await self._offsets.durable()
        except ConfigWriteError as exc:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        has_topic = self._topics.find  # asked under the store lock: a send may make it again
        try:
            await asyncio.to_thread(
                clean_unused_topics, self._store, lambda t: has_topic(t) is not None, header.topic
            )
        except OSError as exc:
            # The topic is deleted; its files stay until a cleanUnusedTopic or retention.
            log.error("deleted topic's queue files not removed", topic=header.topic, error=str(exc))
        await self._registered()
        return cmd.make_response(ResponseCode.SUCCESS)

    async def _registered(self) -> None:
        # Answer once the name servers have the new table, as RocketMQ does, so a
        # client that asks for the route next finds it. A name server that does not
        # answer in time delays the admin call, never fails it.
        await self._registration.wait_for(
            self._topics.data_version.counter, self._register_timeout_s
        )

    async def all_configs(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ALL_TOPIC_CONFIG: every topic config with the table's data version."""
        return cmd.make_response(ResponseCode.SUCCESS, body=self._topics.wrapper().to_json())

    async def stats(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_TOPIC_STATS_INFO: offset range and last store time per write queue."""
        header = GetTopicStatsInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        store = self._store
        config = self._topics.find(header.topic)
        if config is None:
            return cmd.make_response(
                ResponseCode.TOPIC_NOT_EXIST,
                remark=check_topic_name(header.topic) or f"topic[{header.topic}] not exist",
            )
        table: dict[MessageQueue, TopicOffset] = {}
        for queue_id in range(config.write_queue_nums):
            low = max(0, store.min_offset(header.topic, queue_id))
            high = max(0, store.max_offset(header.topic, queue_id))
            last = store_time_at(store, header.topic, queue_id, high - 1) if high > 0 else 0
            mq = MessageQueue(header.topic, self._identity.broker_name, queue_id)
            table[mq] = TopicOffset(low, high, last)
        return cmd.make_response(ResponseCode.SUCCESS, body=TopicStatsTable(table).to_json())

    async def consumed_by(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """QUERY_TOPIC_CONSUME_BY_WHO: online subscribers and groups with offsets."""
        header = QueryTopicConsumeByWhoRequestHeader.from_ext_fields(cmd.ext_fields)
        refusal = refuse_bad_topic(cmd, header.topic)
        if refusal is not None:
            return refusal
        groups = subscribed_groups(self._clients, header.topic)
        groups.update(self._offsets.groups_of(header.topic))
        return cmd.make_response(
            ResponseCode.SUCCESS, body=GroupList(tuple(sorted(groups))).to_json()
        )


def _topic_config(header: CreateTopicRequestHeader) -> TopicConfig:
    if header.read_queue_nums < 0 or header.write_queue_nums < 0:
        raise Refused(ResponseCode.SYSTEM_ERROR, "queue numbers must not be negative")
    if header.perm & ~_PERM_MASK:
        raise Refused(ResponseCode.SYSTEM_ERROR, f"illegal perm {header.perm}")
    if header.topic_filter_type not in TOPIC_FILTER_TYPES:
        raise Refused(
            ResponseCode.SYSTEM_ERROR, f"illegal topicFilterType {header.topic_filter_type}"
        )
    return TopicConfig(
        header.topic,
        header.read_queue_nums,
        header.write_queue_nums,
        perm=header.perm,
        topic_filter_type=header.topic_filter_type,
        topic_sys_flag=header.topic_sys_flag,
        order=header.order,
    )


def register(registry: ProcessorRegistry, admin: TopicAdmin) -> None:
    """Register the topic admin codes."""
    registry.register_all(
        {
            RequestCode.UPDATE_AND_CREATE_TOPIC: admin.create,
            RequestCode.DELETE_TOPIC_IN_BROKER: admin.delete,
            RequestCode.GET_ALL_TOPIC_CONFIG: admin.all_configs,
            RequestCode.GET_TOPIC_STATS_INFO: admin.stats,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: admin.consumed_by,
        }
    )
