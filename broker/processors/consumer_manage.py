"""Consumer management: offsets, queue metadata and orderly-consumption locks.

Codes: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15), SEARCH_OFFSET_BY_TIMESTAMP
(29), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), GET_EARLIEST_MSG_STORETIME (32),
LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) (docs/protocol.md).

RocketMQ 4.9 splits these between ``ConsumerManageProcessor`` (14, 15) and
``AdminBrokerProcessor`` (the rest); they are one family here because consumers are
their only users. Every answer that carries a header carries it as an extFields object
of decimal strings: the C++ client dereferences that object without a check and reads
numbers as 0 (§1.6).

A commit or a lock naming a group RocketMQ's name rules reject is refused with
SUBSCRIPTION_GROUP_NOT_EXIST (RocketMQ 4.9.4 would save it; its clients never send one).
A topic those rules reject cannot exist: a commit naming one is refused with
TOPIC_NOT_EXIST (RocketMQ 5's answer to a commit on a missing topic), the queries and
locks with SYSTEM_ERROR (``TopicValidator``'s code), each with the rule as the remark.
A commit to a queue the topic does not have is refused like a send to one; a commit to
a topic this broker does not know is kept (Spark's sink keeps markers under one).
"""

from __future__ import annotations

from collections.abc import Iterable

from rocklet.broker.config_writer import ConfigWriteError
from rocklet.broker.locks import RebalanceLockManager
from rocklet.broker.offsets import ConsumerOffsetManager
from rocklet.broker.processors.refusal import refuse_bad_group, refuse_bad_topic
from rocklet.broker.topics import TopicConfigManager
from rocklet.protocol.bodies.consumer import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.admin import MAX_QUEUE_NUMS
from rocklet.protocol.headers.consumer import (
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocklet.store.message_store import MessageStore
from rocklet.transport import ProcessorRegistry, RequestContext

__all__ = ["ConsumerManageProcessor", "register"]


class ConsumerManageProcessor:
    """Serves offsets, queue metadata and queue locks. Event loop only.

    Args:
        store: The message store (queue offsets and times).
        offsets: Committed consumer offsets.
        locks: Queue locks of orderly consumers.
        topics: Topic configs (the queue count a commit is checked against).
    """

    def __init__(
        self,
        store: MessageStore,
        offsets: ConsumerOffsetManager,
        locks: RebalanceLockManager,
        topics: TopicConfigManager,
    ) -> None:
        self._store = store
        self._offsets = offsets
        self._locks = locks
        self._topics = topics

    # -- committed offsets -----------------------------------------------------------
    async def query_consumer_offset(
        self, _rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """Answer a group's committed offset, or RocketMQ's rule when it has none.

        ``queryConsumerOffset``: with nothing committed, a queue whose min offset is
        still 0 answers "0" (so a brand-new group starts from the first message)
        unless message 0 has fallen out of memory ("checkInDiskByConsumeOffset"). This
        broker does not tell memory from disk, so min offset 0 always answers "0";
        otherwise QUERY_NOT_FOUND and the client falls back to its consumeFromWhere.
        """
        h = QueryConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        refusal = refuse_bad_topic(cmd, h.topic)
        if refusal is not None:
            return refusal
        offset = self._offsets.query(h.consumer_group, h.topic, h.queue_id)
        if offset is None or offset < 0:
            if self._store.min_offset(h.topic, h.queue_id) > 0:
                return cmd.make_response(
                    ResponseCode.QUERY_NOT_FOUND,
                    remark="Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
                )
            offset = 0
        answer = QueryConsumerOffsetResponseHeader(offset=offset)
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields=answer.to_ext_fields())

    async def update_consumer_offset(
        self, _rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """Commit a group's offset (``updateConsumerOffset``).

        An answered commit is on disk when it is answered; commits arriving together
        share one write. A oneway commit (Java clients send them so, and get no
        answer) is written with the next write or the periodic one
        (``flushConsumerOffsetInterval``). The C++ client sends this "oneway" without
        the oneway bit (§1.4), so it gets an answer it drops.
        """
        h = UpdateConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        # Either name would be saved in consumerOffset.json.
        refusal = refuse_bad_group(cmd, h.consumer_group) or refuse_bad_topic(
            cmd, h.topic, ResponseCode.TOPIC_NOT_EXIST
        )
        if refusal is not None:
            return refusal
        config = self._topics.find(h.topic)
        if config is not None:
            queues = max(config.read_queue_nums, config.write_queue_nums)
            if h.queue_id >= queues:
                return cmd.make_response(
                    ResponseCode.SYSTEM_ERROR,
                    remark=f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] has {queues} "
                    "queues",
                )
        self._offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        if cmd.is_oneway:
            return cmd.make_response(ResponseCode.SUCCESS)  # not sent; written lazily
        try:
            await self._offsets.durable()
        except ConfigWriteError as exc:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        return cmd.make_response(ResponseCode.SUCCESS)

    # -- queue metadata ------------------------------------------------------------------
    async def get_max_offset(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """Answer the next queue offset to be written (0 for an unknown queue)."""
        h = GetMaxOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        refusal = refuse_bad_topic(cmd, h.topic)
        if refusal is not None:
            return refusal
        answer = GetMaxOffsetResponseHeader(offset=self._store.max_offset(h.topic, h.queue_id))
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields=answer.to_ext_fields())

    async def get_min_offset(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """Answer the smallest queue offset still stored (0 for an unknown queue)."""
        h = GetMinOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        refusal = refuse_bad_topic(cmd, h.topic)
        if refusal is not None:
            return refusal
        answer = GetMinOffsetResponseHeader(offset=self._store.min_offset(h.topic, h.queue_id))
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields=answer.to_ext_fields())

    async def search_offset(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """Answer the first queue offset stored at or after a time (``getOffsetInQueueByTime``)."""
        h = SearchOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        refusal = refuse_bad_topic(cmd, h.topic)
        if refusal is not None:
            return refusal
        offset = self._store.offset_for_time(h.topic, h.queue_id, h.timestamp)
        answer = SearchOffsetResponseHeader(offset=offset)
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields=answer.to_ext_fields())

    async def earliest_store_time(
        self, _rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """Answer the store time of a queue's first message (-1 when it has none, as Java)."""
        h = GetEarliestMsgStoretimeRequestHeader.from_ext_fields(cmd.ext_fields)
        refusal = refuse_bad_topic(cmd, h.topic)
        if refusal is not None:
            return refusal
        timestamp = self._store.earliest_store_time(h.topic, h.queue_id)
        answer = GetEarliestMsgStoretimeResponseHeader(timestamp=timestamp)
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields=answer.to_ext_fields())

    # -- orderly consumption locks -------------------------------------------------------
    async def lock_batch(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """Lock (or renew) queues for a client; answer the subset it now holds."""
        req = LockBatchRequestBody.from_json(cmd.body)
        refusal = refuse_bad_group(cmd, req.consumer_group) or self._refuse_bad_queues(
            cmd, req.mq_set
        )
        if refusal is not None:
            return refusal
        held = self._locks.try_lock(req.consumer_group, req.mq_set, req.client_id)
        body = LockBatchResponseBody(tuple(sorted(held))).to_json()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def unlock_batch(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """Release the queues this client holds among those named."""
        req = UnlockBatchRequestBody.from_json(cmd.body)
        refusal = refuse_bad_group(cmd, req.consumer_group) or self._refuse_bad_queues(
            cmd, req.mq_set
        )
        if refusal is not None:
            return refusal
        self._locks.unlock(req.consumer_group, req.mq_set, req.client_id)
        return cmd.make_response(ResponseCode.SUCCESS)

    @staticmethod
    def _refuse_bad_queues(
        cmd: RemotingCommand, mqs: Iterable[MessageQueue]
    ) -> RemotingCommand | None:
        # Locks live in memory under their queues: no entry for a topic that cannot
        # exist, nor for a queue id no topic has.
        for mq in mqs:
            refusal = refuse_bad_topic(cmd, mq.topic)
            if refusal is not None:
                return refusal
            if not 0 <= mq.queue_id < MAX_QUEUE_NUMS:
                return cmd.make_response(
                    ResponseCode.SYSTEM_ERROR,
                    remark=f"queueId[{mq.queue_id}] is illegal, topic:[{mq.topic}]",
                )
        return None


def register(registry: ProcessorRegistry, p: ConsumerManageProcessor) -> None:
    """Register the offset, queue-metadata and lock codes."""
    registry.register_all(
        {
            RequestCode.QUERY_CONSUMER_OFFSET: p.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: p.update_consumer_offset,
            RequestCode.GET_MAX_OFFSET: p.get_max_offset,
            RequestCode.GET_MIN_OFFSET: p.get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: p.search_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: p.earliest_store_time,
            RequestCode.LOCK_BATCH_MQ: p.lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: p.unlock_batch,
        }
    )
