"""Send processor: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320).

Follows RocketMQ 4.9's ``SendMessageProcessor`` and ``AbstractSendMessageProcessor``:
validate the topic and queue, auto-create the topic from its template, redirect a retry
message past its max reconsume times to the group's dead-letter queue, turn a
transaction's half message into RMQ_SYS_TRANS_HALF_TOPIC, add the CLUSTER property and
drop WAIT, store, and answer msgId / queueId / queueOffset. The C++ client's batch is
code 10 with ``batch="1"``; it is stored as its individual messages (remoting-protocol.md
§3.1), unlike RocketMQ 4.9.4, which stores the blob as one message.

Under SYNC_FLUSH the answer waits for the group commit without blocking the event loop:
the store's durability future is awaited, and other connections keep being served.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import structlog

from broker.context import BrokerContext
from broker.processors.refusal import Refused
from broker.remoting import ProcessorRegistry, RequestContext
from broker.status_codes import PUT_STATUS_TO_RESPONSE
from broker.topics import (
    AUTO_CREATE_TOPIC,
    DLQ_PREFIX,
    RETRY_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    check_topic_name,
)
from protocol.batch import decode_batch
from protocol.bodies.route import Perm
from protocol.bodies.topic import TopicConfig
from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.errors import MessageFormatError
from protocol.headers.send import (
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    parse_send_header,
)
from protocol.message import pack_host
from protocol.message_id import make_offset_msg_id
from protocol.properties import Prop, decode_properties
from store.config import FlushDiskType
from store.results import ZERO_HOST, MessageToStore, PutMessageStatus, PutResult

__all__ = ["SendProcessor", "peer_host", "register"]

log = structlog.get_logger(__name__)

#: Sends to these are refused (``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET``).
_NOT_ALLOWED_SEND = frozenset({SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC})
#: ``MQVersion.V3_4_9``: from this version on the client's maxReconsumeTimes counts.
_V3_4_9 = 121
_TRANSACTION_TYPE = 0xC


def peer_host(peer: tuple[str, int]) -> bytes:
    """Pack a peer address as a stored record's BORNHOST (IPv4 only, as clients read it)."""
    host, port = peer
    if host in ("::1", "localhost"):
        host = "127.0.0.1"
    try:
        return pack_host(host.removeprefix("::ffff:"), port)
    except ValueError:
        return ZERO_HOST


class SendProcessor:
    """Serves the send codes. Event loop only.

    Args:
        ctx: The broker's collaborators.
    """

    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self._cluster = ctx.config.broker_cluster_name
        self._sync_flush = ctx.config.flush_disk_type == FlushDiskType.SYNC_FLUSH.value
        self._sync_timeout_s = ctx.config.sync_flush_timeout_ms / 1000

    async def process(self, rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """Store the message(s) of a send request and answer where they went."""
        header = parse_send_header(cmd)
        try:
            config = self._check(header)
            queue_id = self._queue_id(header, config)
            msgs = self._messages(header, cmd, queue_id, peer_host(rctx.peer), cmd.version)
        except Refused as refused:
            return refused.answer(cmd)
        result = self._ctx.store.put_messages(msgs)
        code, remark = await self._outcome(result)
        if result.status is not PutMessageStatus.PUT_OK:
            return cmd.make_response(code, remark=remark)
        first = msgs[0]
        # A half message is stored in the half topic's queue 0, but the producer is told
        # the queue it asked for, as RocketMQ answers (it ends the transaction there).
        queue_id = (
            int(first.properties[Prop.REAL_QID])
            if first.topic == TRANS_HALF_TOPIC
            else first.queue_id
        )
        response = SendMessageResponseHeader(
            msg_id=",".join(
                make_offset_msg_id(self._ctx.store_host, o) for o in result.record_offsets
            ),
            queue_id=queue_id,
            queue_offset=result.queue_offset,
        )
        return cmd.make_response(code, remark=remark, ext_fields=response.to_ext_fields())

    # -- checks ------------------------------------------------------------------------
    def _check(self, header: SendMessageRequestHeader) -> TopicConfig:
        ctx = self._ctx
        if not ctx.is_master or not ctx.config.broker_permission & Perm.WRITE:
            raise Refused(
                ResponseCode.NO_PERMISSION,
                f"the broker[{ctx.config.broker_name}] sending message is forbidden",
            )
        topic = header.topic
        problem = check_topic_name(topic)
        if problem is not None:
            raise Refused(ResponseCode.SYSTEM_ERROR, problem)
        if topic in _NOT_ALLOWED_SEND or topic == AUTO_CREATE_TOPIC:
            raise Refused(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        config = ctx.topics.find(topic)
        if config is None:
            if topic.startswith(RETRY_PREFIX):
                config = ctx.topics.create_system_topic(topic, 1)
            else:
                config = ctx.topics.create_for_send(
                    topic, header.default_topic, header.default_topic_queue_nums
                )
        if config is None:
            raise Refused(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not config.perm & Perm.WRITE:
            raise Refused(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
            )
        return config

    def _queue_id(self, header: SendMessageRequestHeader, config: TopicConfig) -> int:
        queue_id = header.queue_id
        limit = max(config.write_queue_nums, config.read_queue_nums)
        if queue_id >= limit:
            raise Refused(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, {config.topic_name} Producer: "
                f"queue count {limit}",
            )
        if queue_id < 0:
            queue_id = random.randrange(max(1, config.write_queue_nums))
        return queue_id

    # -- building the messages -----------------------------------------------------
    def _messages(
        self,
        header: SendMessageRequestHeader,
        cmd: RemotingCommand,
        queue_id: int,
        born_host: bytes,
        version: int,
    ) -> list[MessageToStore]:
        topic = header.topic
        if header.batch:
            return self._batch(header, cmd.body, queue_id, born_host)
        props = self._properties(header.properties or "")
        reconsume = header.reconsume_times
        if topic.startswith(RETRY_PREFIX):
            topic, queue_id = self._retry_or_dlq(topic, queue_id, reconsume, header, version)
        sys_flag = header.sys_flag
        if props.get(Prop.TRAN_MSG) == "true":
            if self._ctx.config.reject_transaction_message:
                raise Refused(
                    ResponseCode.NO_PERMISSION,
                    f"the broker[{self._ctx.config.broker_name}] sending transaction message "
                    "is forbidden",
                )
            # A half message waits in the half topic until END_TRANSACTION commits it
            # (TransactionalMessageBridge.parseHalfMessageInner).
            props[Prop.REAL_TOPIC] = topic
            props[Prop.REAL_QID] = str(queue_id)
            topic, queue_id = TRANS_HALF_TOPIC, 0
            sys_flag &= ~_TRANSACTION_TYPE
            self._ctx.topics.create_system_topic(TRANS_HALF_TOPIC, 1)
        return [
            MessageToStore(
                topic=topic,
                queue_id=queue_id,
                body=cmd.body,
                properties=props,
                flag=header.flag,
                sys_flag=sys_flag,
                born_timestamp=header.born_timestamp,
                born_host=born_host,
                store_host=self._ctx.store_host,
                reconsume_times=reconsume,
            )
        ]

    def _batch(
        self, header: SendMessageRequestHeader, body: bytes, queue_id: int, born_host: bytes
    ) -> list[MessageToStore]:
        if header.topic.startswith(RETRY_PREFIX):
            raise Refused(
                ResponseCode.MESSAGE_ILLEGAL, "batch request does not support retry group"
            )
        try:
            items = decode_batch(body)
        except MessageFormatError as exc:
            raise Refused(ResponseCode.MESSAGE_ILLEGAL, f"bad batch body: {exc}") from None
        out = []
        for item in items:
            props = self._properties(item.properties)
            if Prop.DELAY in props:
                raise Refused(ResponseCode.MESSAGE_ILLEGAL, "batch message does not support delay")
            out.append(
                MessageToStore(
                    topic=header.topic,
                    queue_id=queue_id,
                    body=item.body,
                    properties=props,
                    flag=item.flag,
                    sys_flag=header.sys_flag,
                    born_timestamp=header.born_timestamp,
                    born_host=born_host,
                    store_host=self._ctx.store_host,
                    reconsume_times=header.reconsume_times,
                )
            )
        return out

    def _properties(self, raw: str | bytes) -> dict[str, str]:
        props = decode_properties(raw)
        props.pop(Prop.WAIT, None)  # a client-side flag; RocketMQ does not store it
        props[Prop.CLUSTER] = self._cluster  # request-reply needs it (§3.8)
        return props

    def _retry_or_dlq(
        self,
        topic: str,
        queue_id: int,
        reconsume: int,
        header: SendMessageRequestHeader,
        version: int,
    ) -> tuple[str, int]:
        """A retry-topic message past its max reconsume times goes to the DLQ."""
        group = topic.removeprefix(RETRY_PREFIX)
        config = self._ctx.groups.find(group)
        if config is None:
            raise Refused(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        max_times = config.retry_max_times
        if version >= _V3_4_9 and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        if reconsume <= max_times:
            return topic, queue_id
        dlq = f"{DLQ_PREFIX}{group}"
        self._ctx.topics.create_system_topic(dlq, 1)
        return dlq, 0

    async def _outcome(self, result: PutResult) -> tuple[ResponseCode, str | None]:
        code = PUT_STATUS_TO_RESPONSE[result.status]
        if result.status is PutMessageStatus.MESSAGE_ILLEGAL:
            return code, (
                "the message is illegal, maybe the body is over the max message size "
                f"({self._ctx.config.max_message_size} bytes) or the topic too long"
            )
        if result.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED:
            return code, "the message properties are longer than 32767 bytes"
        if result.status is not PutMessageStatus.PUT_OK:
            return code, f"store refused the message: {result.status.value}"
        if self._sync_flush and result.durable is not None:
            try:
                durable = await asyncio.wait_for(
                    asyncio.wrap_future(result.durable), self._sync_timeout_s
                )
            except TimeoutError:
                durable = False
            if not durable:
                return ResponseCode.FLUSH_DISK_TIMEOUT, "flush to disk timed out"
        return code, None


def register(registry: ProcessorRegistry, ctx: BrokerContext) -> None:
    """Register the send codes."""
    processor = SendProcessor(ctx)
    for code in (
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
    ):
        registry.register(code, processor.process)


def queues_of(messages: Sequence[MessageToStore]) -> set[tuple[str, int]]:
    """Return the (topic, queue) pairs of messages (for tests and metrics)."""
    return {(m.topic, m.queue_id) for m in messages}
