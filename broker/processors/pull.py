"""Pull processor: PULL_MESSAGE (11) with long polling.

Follows RocketMQ 4.9's ``PullMessageProcessor``: check the group, topic, queue and
subscription; read from the store filtering by tag hash; and when the consumer is
caught up and allowed to suspend, park the pull in
:class:`~rocklet.broker.long_polling.PullHoldService` until a matching message arrives
or ``suspendTimeoutMillis`` passes, then read again and answer. The response body is
the stored records themselves, written from the mapped commitlog without decoding
(docs/protocol.md).

An offset committed with the pull (``FLAG_COMMIT_OFFSET``) is written lazily, with
the next offset write or the periodic one (a slave ignores it, as RocketMQ's does); a
group the pull auto-created is on disk before the pull is answered.

Which broker the consumer should pull from next (``suggestWhichBrokerId``) follows
4.9.4: the master (0) unless ``slaveReadEnable``; with it, the group's ``brokerId``, or
its ``whichBrokerWhenConsumeSlowly`` when the last record read lies further behind the
commitlog's end than ``accessMessageInMemoryMaxRatio`` percent of physical memory (the
store's "suggest pulling from slave"). A slave serves pulls whatever
``slaveReadEnable`` says: 4.9.4 sets PULL_RETRY_IMMEDIATELY for it, but the status
switch right after overwrites that code, so the consumer gets the messages and the
suggestion of the master. A slave answers PULL_OFFSET_MOVED as PULL_RETRY_IMMEDIATELY
suggesting the group's ``brokerId`` unless ``offsetCheckInSlave`` (its copy may just be
behind), and, like 4.9.4's store, keeps the requested offset as the next one instead of
correcting it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Set
from dataclasses import dataclass
from typing import Final

from rocklet.broker.clients import ClientManager
from rocklet.broker.config_writer import ConfigWriteError
from rocklet.broker.groups import SubscriptionGroupManager
from rocklet.broker.identity import BrokerIdentity
from rocklet.broker.long_polling import PullHoldService
from rocklet.broker.metrics import NULL_METRICS, MetricsSink
from rocklet.broker.offsets import ConsumerOffsetManager
from rocklet.broker.processors.property_filter import PropertyFilters, RecordFilter
from rocklet.broker.processors.refusal import Refused
from rocklet.broker.status_codes import pull_response_code
from rocklet.broker.topics import TopicConfigManager
from rocklet.protocol.bodies.route import MASTER_ID, Perm
from rocklet.protocol.bodies.subscription_group import SubscriptionGroupConfig
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.filter import parse_tag_expression, tag_codes
from rocklet.protocol.headers.pull import (
    PullMessageRequestHeader,
    PullSysFlag,
    pull_response_fields,
)
from rocklet.protocol.names import check_group_name, check_topic_name
from rocklet.protocol.sql92 import is_tag_type
from rocklet.store.message_store import MessageStore
from rocklet.store.results import GetMessageStatus, GetResult
from rocklet.transport import ProcessorRegistry, RequestContext
from rocklet.transport.connection import Reply

__all__ = ["PullProcessor", "SlaveReads", "register", "total_physical_memory"]

# Plain ints: IntFlag's operators and constructor are Python-level calls, several per
# pull otherwise.
_COMMIT_OFFSET = int(PullSysFlag.COMMIT_OFFSET)
_SUSPEND = int(PullSysFlag.SUSPEND)
_SUBSCRIPTION = int(PullSysFlag.SUBSCRIPTION)
_READ = int(Perm.READ)
_CODES_CACHE_MAX = 1024
#: Longest a pull stays parked, whatever it asks (clients ask 15-30 s): one a client
#: gave up on, over a connection it keeps, must not hold the broker's memory for an hour.
MAX_SUSPEND_S = 300.0
#: A stored record's physical offset: after size, magic, body CRC, queue id, flag and
#: queue offset.
_PHYSICAL_OFFSET = struct.Struct(">q")
_PHYSICAL_OFFSET_AT = 28


#: Statuses whose next offset is a correction, which a slave does not make unless
#: ``offsetCheckInSlave`` (DefaultMessageStore.nextOffsetCorrection).
_CORRECTED: Final = frozenset(
    {
        GetMessageStatus.NO_MESSAGE_IN_QUEUE,
        GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
        GetMessageStatus.OFFSET_TOO_SMALL,
        GetMessageStatus.OFFSET_OVERFLOW_ONE,
        GetMessageStatus.OFFSET_OVERFLOW_BADLY,
        GetMessageStatus.OFFSET_FOUND_NULL,
    }
)


def total_physical_memory() -> int:
    """The machine's physical memory in bytes (RocketMQ's ``StoreUtil``)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@dataclass(slots=True)
class SlaveReads:
    """How a broker steers consumers between master and slave (docs/replication.md).

    ``slave_read_enable`` is changed in place by UPDATE_BROKER_CONFIG.

    Attributes:
        slave_read_enable: ``slaveReadEnable``.
        memory_lag_bytes: Commitlog bytes behind the end past which a lagging consumer
            is sent to ``whichBrokerWhenConsumeSlowly``
            (``accessMessageInMemoryMaxRatio`` percent of physical memory).
        offset_check_in_slave: ``offsetCheckInSlave``.
    """

    slave_read_enable: bool = False
    memory_lag_bytes: int = 0
    offset_check_in_slave: bool = False


class PullProcessor:
    """Serves PULL_MESSAGE. Event loop only.

    Args:
        store: The message store.
        topics: Topic configs.
        groups: Subscription group configs (created on first pull when allowed).
        offsets: Committed consumer offsets (a pull may commit one).
        clients: Consumer channels (the heartbeat's subscription of Java consumers).
        holds: Where pulls wait for new messages.
        metrics: Where served gets are counted.
        identity: This broker's name and permissions.
        long_polling: ``longPollingEnable``.
        short_polling_time_ms: ``shortPollingTimeMills``: the hold without long polling.
        max_transfer_count: ``maxTransferCountOnMessageInMemory``.
        slave_reads: ``slaveReadEnable`` and friends. Default: off.
        filters: SQL92 property filters (``enablePropertyFilter``). Default: off.
    """

    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        clients: ClientManager,
        holds: PullHoldService,
        metrics: MetricsSink,
        identity: BrokerIdentity,
        long_polling: bool,
        short_polling_time_ms: int,
        max_transfer_count: int,
        slave_reads: SlaveReads | None = None,
        filters: PropertyFilters | None = None,
    ) -> None:
        self._store = store
        self._topics = topics
        self._groups = groups
        self._offsets = offsets
        self._clients = clients
        self._holds = holds
        self._metrics = metrics
        self._broker_name = identity.broker_name
        self._identity = identity  # its permission may change (UPDATE_BROKER_CONFIG)
        self._is_master = identity.is_master
        self._long_polling = long_polling
        self._short_poll_s = short_polling_time_ms / 1000
        self._max_count = max_transfer_count
        self._codes_cache: dict[str | None, frozenset[int] | None] = {}
        self._slave_reads = SlaveReads() if slave_reads is None else slave_reads
        self._filters = PropertyFilters(enabled=False) if filters is None else filters

    async def process(self, rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand | Reply:
        """Answer a pull, holding it while the queue has nothing new."""
        h = PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        try:
            group, codes, wanted = self._check(h)
        except Refused as refused:
            return refused.answer(cmd)
        if self._groups.unsaved:
            # A group this pull auto-created is on disk before it is answered.
            try:
                await self._groups.saved(h.consumer_group)
            except ConfigWriteError as exc:
                return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        flags = h.sys_flag
        if flags & _COMMIT_OFFSET and self._is_master:
            self._offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        clock = self._store.clock
        started = clock.monotonic_ms()
        result = self._read(h, codes, wanted)
        read_ms = clock.monotonic_ms() - started
        code = pull_response_code(result.status, h.queue_offset)
        if code == ResponseCode.PULL_NOT_FOUND and flags & _SUSPEND:
            timeout_s = (
                min(h.suspend_timeout_millis / 1000, MAX_SUSPEND_S)
                if self._long_polling
                else self._short_poll_s
            )
            # Parked, not working: a consumer holds a pull per queue on one connection,
            # and those must not count against its in-flight limit.
            with rctx.connection.parked():
                woken = await self._holds.wait(
                    h.topic, h.queue_id, h.queue_offset, timeout_s, codes
                )
            if woken:
                started = clock.monotonic_ms()
                result = self._read(h, codes, wanted)
                read_ms = clock.monotonic_ms() - started
                code = pull_response_code(result.status, h.queue_offset)
        metrics = self._metrics
        # The null sink ignores the counts: no summing of buffer sizes for it.
        if metrics is not NULL_METRICS:
            if code == ResponseCode.SUCCESS and result.buffers:
                metrics.on_get(
                    h.consumer_group,
                    h.topic,
                    h.queue_id,
                    len(result.buffers),
                    result.total_bytes,
                    read_ms,
                )
            else:
                metrics.on_get_miss()
        return self._answer(cmd, code, result, group, h.queue_offset)

    def _check(
        self, h: PullMessageRequestHeader
    ) -> tuple[SubscriptionGroupConfig, Set[int] | None, RecordFilter | None]:
        if not self._identity.readable:
            raise Refused(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self._broker_name}] pulling message is forbidden",
            )
        group = self._groups.find(h.consumer_group)
        if group is None:
            # An invalid name is never auto-created: say which rule it breaks.
            raise Refused(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                check_group_name(h.consumer_group)
                or f"subscription group [{h.consumer_group}] does not exist",
            )
        if not group.consume_enable:
            raise Refused(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {h.consumer_group}"
            )
        topic = self._topics.find(h.topic)
        if topic is None:
            # An invalid name can never exist: say which rule it breaks.
            raise Refused(
                ResponseCode.TOPIC_NOT_EXIST,
                check_topic_name(h.topic) or f"topic[{h.topic}] not exist, apply first please!",
            )
        if not topic.perm & _READ:
            raise Refused(
                ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden"
            )
        if not 0 <= h.queue_id < topic.read_queue_nums:
            raise Refused(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] "
                f"topicConfig.readQueueNums:[{topic.read_queue_nums}]",
            )
        return (group, *self._subscription(h))

    def _subscription(
        self, h: PullMessageRequestHeader
    ) -> tuple[Set[int] | None, RecordFilter | None]:
        """The tag codes and the property filter a pull reads with."""
        if h.sys_flag & _SUBSCRIPTION:
            if is_tag_type(h.expression_type):
                return self._codes_of(h.subscription), None
            assert h.expression_type is not None  # is_tag_type(None) is True
            return None, self._filters.from_pull(h.expression_type, h.subscription)
        # Java consumers do not send their expression: use the heartbeat's.
        sub = self._clients.subscription(h.consumer_group, h.topic)
        if sub is None:
            raise Refused(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription not exist, group: {h.consumer_group}",
            )
        if sub.sub_version < h.sub_version:
            raise Refused(
                ResponseCode.SUBSCRIPTION_NOT_LATEST,
                f"the consumer's subscription not latest, group: {h.consumer_group}",
            )
        if not is_tag_type(sub.expression_type):
            wanted = self._filters.from_heartbeat(
                h.topic, h.consumer_group, sub.expression_type, sub.sub_string, sub.sub_version
            )
            return None, wanted
        return (frozenset(sub.code_set) if sub.tags_set else None), None

    def _codes_of(self, subscription: str | None) -> frozenset[int] | None:
        # Every pull carries its expression; consumers send the same few again and
        # again, so their tag hashes are remembered (bounded: odd clients vary them).
        cache = self._codes_cache
        if subscription in cache:
            return cache[subscription]
        codes = tag_codes(parse_tag_expression(subscription))
        if len(cache) >= _CODES_CACHE_MAX:
            cache.clear()
        cache[subscription] = codes
        return codes

    def _read(
        self, h: PullMessageRequestHeader, codes: Set[int] | None, wanted: RecordFilter | None
    ) -> GetResult:
        max_count = max(1, min(h.max_msg_nums, self._max_count))
        return self._store.get_messages(
            h.topic, h.queue_id, h.queue_offset, max_count, tag_codes=codes, record_filter=wanted
        )

    def _suggest(self, result: GetResult, group: SubscriptionGroupConfig) -> int:
        if not self._slave_reads.slave_read_enable:
            return MASTER_ID
        if result.buffers:
            last = result.buffers[-1]
            phy: int = _PHYSICAL_OFFSET.unpack_from(last, _PHYSICAL_OFFSET_AT)[0]
            lag = self._store.commitlog.max_offset() - phy
            if lag > self._slave_reads.memory_lag_bytes:
                return group.which_broker_when_consume_slowly
        return group.broker_id

    def _answer(
        self,
        cmd: RemotingCommand,
        code: ResponseCode,
        result: GetResult,
        group: SubscriptionGroupConfig,
        requested: int,
    ) -> RemotingCommand | Reply:
        next_begin = result.next_begin_offset
        if (
            result.status in _CORRECTED
            and not self._is_master
            and not self._slave_reads.offset_check_in_slave
        ):
            # The store's nextOffsetCorrection: a slave never moves a consumer's offset.
            next_begin = requested
        header = pull_response_fields(next_begin, result.min_offset, result.max_offset)
        if self._slave_reads.slave_read_enable:
            header["suggestWhichBrokerId"] = str(self._suggest(result, group))
        if (
            code == ResponseCode.PULL_OFFSET_MOVED
            and not self._is_master
            and not self._slave_reads.offset_check_in_slave
        ):
            # The slave's copy may only be behind: no jump, try again (at the master
            # unless the group says otherwise).
            header["suggestWhichBrokerId"] = str(group.broker_id)
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
        if code == ResponseCode.SUCCESS and result.status is GetMessageStatus.FOUND:
            return Reply(cmd.make_response(code, ext_fields=header), result.buffers)
        # The real broker names the store status in the remark (captures/real-broker).
        return cmd.make_response(code, remark=result.status.value, ext_fields=header)


def register(registry: ProcessorRegistry, processor: PullProcessor) -> None:
    """Register PULL_MESSAGE."""
    # Eager: a pull that finds messages answers without a task; a held one suspends.
    # Late: after the sends of the same read. A consumer's next pull often arrives
    # with the producer's next send; taken first it parks (~50 µs on an idle loop)
    # while the send waits, and then needs waking for a message it could have found.
    registry.register(RequestCode.PULL_MESSAGE, processor.process, eager=True, late=True)
