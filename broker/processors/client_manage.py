"""Client management: heartbeats, unregistration, consumer lists, client config checks.

Codes: HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38) and
CHECK_CLIENT_CONFIG (46). Follows RocketMQ 4.9's ``ClientManageProcessor`` and
``ConsumerManageProcessor.getConsumerListByGroup`` (docs/protocol.md):

- a heartbeat registers the connection under each producer and consumer group it names;
  for each consumer group the subscription group is looked up (created with defaults
  when ``autoCreateSubscriptionGroup`` is on) and its retry topic ``%RETRY%<group>`` is
  created, which makes the broker re-register so the name server routes it; the answer
  waits until both are on disk (concurrent heartbeats share the writes);
- the first registration of a connection watches it close, so a client that vanishes
  leaves its groups at once (RocketMQ's ``ClientHousekeepingService``) and the remaining
  members are told to rebalance;
- NOTIFY_CONSUMER_IDS_CHANGED goes out from :class:`~rocklet.broker.clients.ClientManager`'s
  callback whenever a group's membership changes, not from here.
"""

from __future__ import annotations

from typing import Final

import structlog

from rocklet.broker.clients import ClientChannel, ClientManager
from rocklet.broker.config_writer import ConfigWriteError
from rocklet.broker.groups import SubscriptionGroupManager
from rocklet.broker.processors.property_filter import PropertyFilters
from rocklet.broker.processors.refusal import Refused
from rocklet.broker.topics import TopicConfigManager
from rocklet.protocol import fastjson
from rocklet.protocol.bodies.consumer import ConsumerListBody
from rocklet.protocol.bodies.heartbeat import HeartbeatData, SubscriptionData
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import BodyError
from rocklet.protocol.headers.consumer import (
    GetConsumerListByGroupRequestHeader,
    UnregisterClientRequestHeader,
)
from rocklet.protocol.names import RETRY_PREFIX, check_group_name, check_topic_name
from rocklet.protocol.sql92 import is_tag_type
from rocklet.transport import ProcessorRegistry, RequestContext
from rocklet.transport.clock import Clock
from rocklet.transport.connection import Connection

__all__ = ["CLIENT_ID_ATTRIBUTE", "ClientManageProcessor", "register"]

log = structlog.get_logger(__name__)

#: Connection attribute holding the client id of the last heartbeat on it. Its presence
#: also means the close callback is installed (installed once per connection).
CLIENT_ID_ATTRIBUTE: Final = "client_id"


class ClientManageProcessor:
    """Serves the client-management codes. Event loop only.

    Args:
        clients: Producer and consumer channels.
        groups: Subscription group configs.
        topics: Topic configs (retry topics are created here).
        clock: Time source for the channels' last-heartbeat time.
        filters: SQL92 property filters (CHECK_CLIENT_CONFIG asks them).
    """

    def __init__(
        self,
        clients: ClientManager,
        groups: SubscriptionGroupManager,
        topics: TopicConfigManager,
        clock: Clock,
        filters: PropertyFilters,
    ) -> None:
        self._filters = filters
        self._clients = clients
        self._groups = groups
        self._topics = topics
        self._clock = clock

    async def heart_beat(self, rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """Register the client's producer and consumer groups (``heartBeat``).

        A group name that breaks RocketMQ's rules refuses the whole heartbeat before
        anything is registered: SUBSCRIPTION_GROUP_NOT_EXIST for a consumer group,
        SYSTEM_ERROR for a producer group (RocketMQ 4.9.4 registers any name).
        """
        data = HeartbeatData.from_json(cmd.body)
        refusal = _refuse_bad_groups(cmd, data)
        if refusal is not None:
            log.warning("heartbeat refused", peer=rctx.peer_address, remark=refusal.remark)
            return refusal
        conn = rctx.connection
        self._watch(conn, data.client_id)
        now = self._clock.now_ms()
        for consumer in data.consumer_data_set:
            self._ensure_retry_topic(consumer.group_name)
            channel = ClientChannel(data.client_id, conn, cmd.language, cmd.version, now)
            if self._clients.register_consumer(consumer, channel):
                log.info(
                    "consumer joined",
                    group=consumer.group_name,
                    client_id=data.client_id,
                    peer=rctx.peer_address,
                )
        for producer in data.producer_data_set:
            channel = ClientChannel(data.client_id, conn, cmd.language, cmd.version, now)
            self._clients.register_producer(producer.group_name, channel)
        if self._groups.unsaved or self._topics.unsaved:
            problem = await self._consumer_groups_saved(data)
            if problem is not None:
                return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=problem)
        # Java answers with no extFields at all; clients read nothing from it but the
        # version, which make_response sets to ours (401).
        return cmd.make_response(ResponseCode.SUCCESS)

    async def unregister_client(
        self, rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """Remove the connection from the named groups (``unregisterClient``).

        The C++ client sends one request per group with the other group as ``""``;
        Java leaves it out. Both mean "not this kind".
        """
        header = UnregisterClientRequestHeader.from_ext_fields(cmd.ext_fields)
        conn = rctx.connection
        if header.producer_group:
            self._clients.unregister_producer(header.producer_group, conn)
        if header.consumer_group:
            self._clients.unregister_consumer(header.consumer_group, conn)
        log.info(
            "client unregistered",
            client_id=header.client_id,
            producer_group=header.producer_group or None,
            consumer_group=header.consumer_group or None,
        )
        return cmd.make_response(ResponseCode.SUCCESS)

    async def consumer_list(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """Answer a group's client ids (``getConsumerListByGroup``).

        An empty list is never sent: the C++ client throws on an empty body and would
        then be allocated nothing, so Java's SYSTEM_ERROR answer is kept.
        """
        header = GetConsumerListByGroupRequestHeader.from_ext_fields(cmd.ext_fields)
        info = self._clients.consumer_group(header.consumer_group)
        ids = info.client_ids() if info is not None else []
        if not ids:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"no consumer for this group, {header.consumer_group}",
            )
        return cmd.make_response(ResponseCode.SUCCESS, body=ConsumerListBody(tuple(ids)).to_json())

    async def check_client_config(
        self, _rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """Validate a Java consumer's subscription before it starts (``checkClientConfig``).

        Java clients ask only for non-tag subscriptions. Tag expressions are fine; an
        SQL92 selector is SYSTEM_ERROR while ``enablePropertyFilter`` is off, and
        SUBSCRIPTION_PARSE_FAILED (saying why) when it does not compile. Either stops
        the Java consumer from starting.
        """
        sub = _check_body_subscription(cmd.body)
        if sub is None or is_tag_type(sub.expression_type):
            return cmd.make_response(ResponseCode.SUCCESS)
        try:
            self._filters.check(sub.expression_type, sub.sub_string)
        except Refused as refused:
            return refused.answer(cmd)
        return cmd.make_response(ResponseCode.SUCCESS)

    # -- helpers -------------------------------------------------------------------
    async def _consumer_groups_saved(self, data: HeartbeatData) -> str | None:
        """Wait until the groups and retry topics the heartbeat created are on disk.

        Many heartbeats arriving together share one write of each file.

        Returns:
            ``None``, or why they could not be saved.
        """
        names = [c.group_name for c in data.consumer_data_set]
        try:
            await self._groups.saved(*names)
            await self._topics.saved(*(f"{RETRY_PREFIX}{name}" for name in names))
        except ConfigWriteError as exc:
            return str(exc)
        return None

    def _watch(self, conn: Connection, client_id: str) -> None:
        first = CLIENT_ID_ATTRIBUTE not in conn.attributes
        conn.attributes[CLIENT_ID_ATTRIBUTE] = client_id
        if first:
            conn.add_close_callback(self._clients.connection_closed)

    def _ensure_retry_topic(self, group: str) -> None:
        retry_topic = f"{RETRY_PREFIX}{group}"
        problem = check_topic_name(retry_topic)
        if problem is not None:
            # Java would create it anyway; a topic no message can be stored in (and a
            # group config for it) is only clutter, so the channel is registered alone.
            log.warning("consumer group cannot have a retry topic", group=group, error=problem)
            return
        config = self._groups.find(group)
        if config is None:
            return  # group unknown and not auto-created: Java skips the retry topic too
        # Java creates it with the group's retryQueueNums and perm RW
        # (createTopicInSendMessageBackMethod); an existing topic is left as it is.
        self._topics.create_system_topic(retry_topic, max(1, config.retry_queue_nums))


def _refuse_bad_groups(cmd: RemotingCommand, data: HeartbeatData) -> RemotingCommand | None:
    for consumer in data.consumer_data_set:
        problem = check_group_name(consumer.group_name)
        if problem is not None:
            return cmd.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark=f"consumer group: {problem}"
            )
        retry = f"{RETRY_PREFIX}{consumer.group_name}"
        for sub in consumer.subscription_data_set:
            # A subscription is kept with the channel and reported by admin queries.
            # The group's own retry topic is valid but for its length (a group name
            # past 120 characters); nothing is made of it (_ensure_retry_topic).
            problem = None if sub.topic == retry else check_topic_name(sub.topic)
            if problem is not None:
                return cmd.make_response(
                    ResponseCode.SYSTEM_ERROR,
                    remark=f"consumer group {consumer.group_name} subscribes to a topic that "
                    f"cannot exist: {problem}",
                )
    for producer in data.producer_data_set:
        problem = check_group_name(producer.group_name)
        if problem is not None:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=f"producer group: {problem}")
    return None


def _check_body_subscription(body: bytes) -> SubscriptionData | None:
    """Read ``CheckClientRequestBody`` (``{clientId, group, subscriptionData}``)."""
    if not body:
        return None
    try:
        obj = fastjson.loads(body)
    except ValueError as exc:
        raise BodyError(f"CheckClientRequestBody body is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise BodyError("CheckClientRequestBody body is not a JSON object")
    raw = obj.get("subscriptionData")
    return None if raw is None else SubscriptionData.from_dict(raw)


def register(registry: ProcessorRegistry, processor: ClientManageProcessor) -> None:
    """Register HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, CHECK_CLIENT_CONFIG."""
    registry.register(RequestCode.HEART_BEAT, processor.heart_beat)
    registry.register(RequestCode.UNREGISTER_CLIENT, processor.unregister_client)
    registry.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, processor.consumer_list)
    registry.register(RequestCode.CHECK_CLIENT_CONFIG, processor.check_client_config)
