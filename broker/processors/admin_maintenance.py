"""Admin requests that look into or tidy the store (``AdminBrokerProcessor``).

- GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305): a ``TopicList`` of the system topic names
  (4.9.4's ``TopicValidator`` set plus the cluster's, the broker's and the reply
  topic). ``mqadmin exportMetadata`` uses it to leave them out.
- CLEAN_EXPIRED_CONSUMEQUEUE (306): drop consume queues that only index deleted
  messages, trim the others (:func:`rocklet.store.maintenance.clean_expired_queues`).
- CLEAN_UNUSED_TOPIC (316): drop the consume queues of topics the broker no longer has
  a config for (:func:`rocklet.store.maintenance.clean_unused_topics`).
- DELETE_EXPIRED_COMMITLOG (329): a retention pass now, whatever ``deleteWhen`` says;
  segments younger than ``fileReservedTime`` stay.
- QUERY_CONSUME_QUEUE (321): a queue's min and max offset and raw entries
  (``QueryConsumeQueueResponseBody``), with the group's subscription when one is named.
  As 4.9.4's ``queryConsumeQueue``: no such queue is SYSTEM_ERROR ``Q@T is not exist!``;
  an index with no entry (below the queue's first, at or past its end) is SUCCESS with
  no body and the remark ``Index I of Q@T is not exist!``, which clients must check for
  (``Admin.query_consume_queue`` raises ``QueueIndexError``).

305, 306, 316 and 329 answer SUCCESS with no remark, as RocketMQ does. Unlike RocketMQ, the work is
done when the answer leaves (RocketMQ's 329 only asks its clean-up timer to run the
next 20 passes without waiting for the hour), and each runs in a worker thread under
the store lock, so puts and pulls wait for it rather than race it. Rocklet has no
consume-queue extension files, so ``queueData`` entries never carry
``extendDataJson``, ``bitMap`` or ``eval``; ``filterData`` is ``"null"`` for an online
subscription (RocketMQ writes its SQL92 filter record there).
"""

from __future__ import annotations

import asyncio
from typing import Final

import structlog

from rocklet.broker.clients import ClientManager
from rocklet.broker.identity import BrokerIdentity
from rocklet.broker.processors.admin_topics import VALIDATOR_SYSTEM_TOPICS, own_system_topics
from rocklet.broker.stats_sink import StatsSink
from rocklet.broker.topics import TopicConfigManager
from rocklet.protocol.bodies.cluster import TopicList
from rocklet.protocol.bodies.maintenance import ConsumeQueueData, QueryConsumeQueueResponseBody
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.admin import QueryConsumeQueueRequestHeader
from rocklet.store.maintenance import clean_expired_queues, clean_unused_topics, queue_entries
from rocklet.store.message_store import MessageStore
from rocklet.store.retention import RetentionService
from rocklet.transport import ProcessorRegistry, RequestContext

__all__ = ["MaintenanceAdmin", "register"]

log = structlog.get_logger(__name__)

#: ``executeDeleteFilesManually`` asks for this many passes (MAX_MANUAL_DELETE_FILE_TIMES).
_MANUAL_PASSES: Final = 20


class MaintenanceAdmin:
    """Serves the store maintenance admin codes. Event loop only.

    Args:
        store: The message store.
        topics: Topic configs (which topics the broker still has).
        clients: Consumer subscriptions (QUERY_CONSUME_QUEUE with a group).
        identity: The broker's cluster and name (their topics are system topics).
        stats: Per-key statistics and Prometheus series (a cleaned topic's series
            are dropped, its statistics when they are set to); ``None``: none kept.
    """

    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        clients: ClientManager,
        identity: BrokerIdentity,
        stats: StatsSink | None = None,
    ) -> None:
        self._store = store
        self._stats = stats
        self._topics = topics
        self._clients = clients
        self._system_topics = tuple(sorted(VALIDATOR_SYSTEM_TOPICS | own_system_topics(identity)))
        self._retention = RetentionService(store)

    async def system_topics(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER: the system topic names."""
        return cmd.make_response(
            ResponseCode.SUCCESS, body=TopicList(self._system_topics).to_json()
        )

    async def clean_expired_queues(
        self, rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """CLEAN_EXPIRED_CONSUMEQUEUE: drop queues whose messages are all deleted."""
        log.warning("cleanExpiredConsumeQueue asked", peer=rctx.peer_address)
        dropped = await asyncio.to_thread(clean_expired_queues, self._store)
        log.warning("cleanExpiredConsumeQueue done", queues_dropped=len(dropped))
        return cmd.make_response(ResponseCode.SUCCESS)

    async def clean_unused_topics(
        self, rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """CLEAN_UNUSED_TOPIC: drop the queues of topics without a config."""
        log.warning("cleanUnusedTopic asked", peer=rctx.peer_address)
        # Asked under the store lock in the worker thread: a dict lookup, safe from
        # there, and sends create a topic's config before its first put.
        has_topic = self._topics.find
        dropped = await asyncio.to_thread(
            clean_unused_topics, self._store, lambda t: has_topic(t) is not None
        )
        log.warning("cleanUnusedTopic done", topics_dropped=dropped)
        if self._stats is not None:
            for topic in dropped:
                self._stats.on_topic_deleted(topic)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def delete_expired_commitlog(
        self, rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """DELETE_EXPIRED_COMMITLOG: retention now, whatever the hour."""
        log.warning("deleteExpiredCommitLog asked", peer=rctx.peer_address)
        deleted = await asyncio.to_thread(self._delete_now)
        log.warning("deleteExpiredCommitLog done", segments_deleted=deleted)
        return cmd.make_response(ResponseCode.SUCCESS)

    def _delete_now(self) -> int:
        total = 0
        for _ in range(_MANUAL_PASSES):
            deleted = self._retention.run_once(manual=True)
            total += deleted
            if not deleted:
                break
        return total

    async def query_consume_queue(
        self, _rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE: raw entries of one queue."""
        h = QueryConsumeQueueRequestHeader.from_ext_fields(cmd.ext_fields)
        found = await asyncio.to_thread(
            queue_entries, self._store, h.topic, h.queue_id, h.index, h.count
        )
        if found is None:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR, remark=f"{h.queue_id}@{h.topic} is not exist!"
            )
        subscription = filter_data = None
        if h.consumer_group is not None:
            subscription = self._clients.subscription(h.consumer_group, h.topic)
            filter_data = (
                f"{h.consumer_group}@{h.topic} is not online!" if subscription is None else "null"
            )
        if found.entries is None:
            return cmd.make_response(
                ResponseCode.SUCCESS,
                remark=f"Index {h.index} of {h.queue_id}@{h.topic} is not exist!",
            )
        body = QueryConsumeQueueResponseBody(
            max_queue_index=found.max_offset,
            min_queue_index=found.min_offset,
            queue_data=tuple(ConsumeQueueData(*entry) for entry in found.entries),
            subscription_data=subscription,
            filter_data=filter_data,
        )
        return cmd.make_response(ResponseCode.SUCCESS, body=body.to_json())


def register(registry: ProcessorRegistry, admin: MaintenanceAdmin) -> None:
    """Register the store maintenance admin codes."""
    registry.register_all(
        {
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: admin.system_topics,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: admin.clean_expired_queues,
            RequestCode.CLEAN_UNUSED_TOPIC: admin.clean_unused_topics,
            RequestCode.DELETE_EXPIRED_COMMITLOG: admin.delete_expired_commitlog,
            RequestCode.QUERY_CONSUME_QUEUE: admin.query_consume_queue,
        }
    )
