"""Request-reply processor: SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325).

Follows RocketMQ 4.9's ``ReplyMessageProcessor`` (docs/protocol.md). A replier
sends its reply with the send header; the broker finds the requester's connection by the
``REPLY_TO_CLIENT`` property (the requester's client id) and pushes the reply to it as
PUSH_REPLY_MESSAGE_TO_CLIENT (326): the send fields plus ``bornHost``, ``storeHost``
(``ip:port``) and ``storeTimestamp``, the body, and the properties with
``PUSH_REPLY_TIME`` added. The replier gets SUCCESS with ``msgId "0"`` and queue offset
0 when the push succeeded, SYSTEM_ERROR with the reason otherwise. When
``storeReplyMessageEnable`` (default true) the reply is also stored on its topic
(``<cluster>_REPLY_TOPIC``), and the answer then names where; under SYNC_FLUSH it
waits for the stored reply to reach the disk (FLUSH_DISK_TIMEOUT with the reason if the
sync times out or fails), and under SYNC_MASTER for a slave: FLUSH_SLAVE_TIMEOUT or
SLAVE_NOT_AVAILABLE as a send is answered (4.9.4 answers SUCCESS for both; Rocklet says
how far the stored reply got, as it does for FLUSH_DISK_TIMEOUT).

Deviation: the push waits 3 s for the requester's answer, RocketMQ 10 s; a Java
replier gives up on its own send after 3 s anyway.
"""

from __future__ import annotations

import random
from typing import Final

import structlog

from rocklet.broker.clients import ClientManager
from rocklet.broker.config_writer import ConfigWriteError
from rocklet.broker.identity import BrokerIdentity
from rocklet.broker.processors.refusal import Refused
from rocklet.broker.processors.send import peer_host
from rocklet.broker.put_wait import PutWait
from rocklet.broker.topics import TopicConfigManager
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.send import (
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    parse_send_header,
)
from rocklet.protocol.headers.transaction import ReplyMessageRequestHeader
from rocklet.protocol.message_id import make_offset_msg_id
from rocklet.protocol.names import check_topic_name
from rocklet.protocol.properties import Prop, decode_properties, encode_properties
from rocklet.store.message_store import MessageStore
from rocklet.store.results import MessageToStore, PutResult
from rocklet.transport import ProcessorRegistry, RequestContext
from rocklet.transport.clock import Clock
from rocklet.transport.errors import RemotingError

__all__ = ["PUSH_TIMEOUT_S", "ReplyProcessor", "register"]

log = structlog.get_logger(__name__)

#: How long the requester has to acknowledge a pushed reply.
PUSH_TIMEOUT_S: Final = 3.0


class ReplyProcessor:
    """Serves the reply codes. Event loop only.

    Args:
        store: The message store (replies are stored when ``store_replies``).
        topics: Topic configs (the reply topic may be auto-created).
        clients: Client channels (the requester is found by its client id).
        clock: Time source (``PUSH_REPLY_TIME``, ``storeTimestamp``).
        identity: This broker's name, address, permissions and record host field.
        store_replies: ``storeReplyMessageEnable``.
        put_wait: What the put waits for before the answer (SYNC_FLUSH, SYNC_MASTER).
    """

    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        clients: ClientManager,
        clock: Clock,
        identity: BrokerIdentity,
        store_replies: bool,
        put_wait: PutWait,
    ) -> None:
        self._put_wait = put_wait
        self._store = store
        self._topics = topics
        self._clients = clients
        self._clock = clock
        self._identity = identity
        self._store_replies = store_replies

    async def process(self, rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """Push a reply to its requester and answer the replier."""
        header = parse_send_header(cmd)
        try:
            queue_id = self._check(header)
        except Refused as refused:
            return refused.answer(cmd)
        if self._topics.unsaved:
            try:  # a reply topic created here is on disk before a reply is stored in it
                await self._topics.saved(header.topic)
            except ConfigWriteError as exc:
                return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        props = decode_properties(header.properties or "")
        pushed, remark = await self._push(rctx, header, dict(props), cmd.body)
        ext = SendMessageResponseHeader(msg_id="0", queue_id=queue_id, queue_offset=0)
        code = ResponseCode.SUCCESS
        if self._store_replies:
            stored = self._store_reply(rctx, header, props, cmd.body, queue_id)
            if stored is not None:
                ext, result = stored
                code, problem = await self._put_wait.settle(result)
                remark = remark or problem or ""
        if not pushed:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=remark)
        return cmd.make_response(code, remark=remark or None, ext_fields=ext.to_ext_fields())

    def _check(self, header: SendMessageRequestHeader) -> int:
        """``msgCheck`` for a reply: broker and topic writable, queue in range."""
        if not self._identity.writable:
            raise Refused(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self._identity.broker_name}] sending message is forbidden",
            )
        problem = check_topic_name(header.topic)
        if problem is not None:
            raise Refused(ResponseCode.SYSTEM_ERROR, problem)
        topics = self._topics
        config = topics.find(header.topic) or topics.create_for_send(
            header.topic, header.default_topic, header.default_topic_queue_nums
        )
        if config is None:
            raise Refused(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please!",
            )
        queue_id = header.queue_id
        if queue_id >= max(config.write_queue_nums, config.read_queue_nums):
            raise Refused(ResponseCode.SYSTEM_ERROR, f"request queueId[{queue_id}] is illegal")
        return queue_id if queue_id >= 0 else random.randrange(max(1, config.write_queue_nums))

    async def _push(
        self,
        rctx: RequestContext,
        header: SendMessageRequestHeader,
        props: dict[str, str],
        body: bytes,
    ) -> tuple[bool, str]:
        """Send the reply to the requester; returns (pushed, reason when not)."""
        client_id = props.get(Prop.REPLY_TO_CLIENT)
        if not client_id:
            return False, f"reply message properties[{Prop.REPLY_TO_CLIENT}] is null"
        target = self._clients.find_client(client_id)
        if target is None or not target.connection.is_open:
            return False, f"push reply message fail, channel of <{client_id}> not found."
        now = self._clock.now_ms()
        props[Prop.PUSH_REPLY_TIME] = str(now)
        host, port = rctx.peer
        push_header = ReplyMessageRequestHeader(
            producer_group=header.producer_group,
            topic=header.topic,
            default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums,
            queue_id=header.queue_id,
            sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp,
            flag=header.flag,
            born_host=f"{host}:{port}",
            store_host=self._identity.addr,
            store_timestamp=now,
            properties=encode_properties(props).decode(),
            reconsume_times=header.reconsume_times,
            unit_mode=header.unit_mode,
        )
        request = RemotingCommand(
            RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
            ext_fields=push_header.to_ext_fields(),
            body=body,
        )
        try:
            answer = await target.connection.request(request, PUSH_TIMEOUT_S)
        except RemotingError as exc:
            log.info("push reply failed", client=client_id, error=str(exc))
            return False, f"push reply message to {client_id} fail."
        if answer.code != ResponseCode.SUCCESS:
            log.info("requester refused a reply", client=client_id, remark=answer.remark)
            return False, f"push reply message to {client_id} fail."
        return True, ""

    def _store_reply(
        self,
        rctx: RequestContext,
        header: SendMessageRequestHeader,
        props: dict[str, str],
        body: bytes,
        queue_id: int,
    ) -> tuple[SendMessageResponseHeader, PutResult] | None:
        """Store the reply on its topic; returns where, or None if the store refused."""
        store_host = self._identity.store_host
        result = self._store.put_message(
            MessageToStore(
                topic=header.topic,
                queue_id=queue_id,
                body=body,
                properties=props,
                flag=header.flag,
                sys_flag=header.sys_flag,
                born_timestamp=header.born_timestamp,
                born_host=peer_host(rctx.peer),
                store_host=store_host,
                reconsume_times=header.reconsume_times,
            )
        )
        if not result.ok:
            log.warning("storing a reply failed", topic=header.topic, status=result.status.value)
            return None
        where = SendMessageResponseHeader(
            msg_id=make_offset_msg_id(store_host, result.wrote_offset),
            queue_id=queue_id,
            queue_offset=result.queue_offset,
        )
        return where, result


def register(registry: ProcessorRegistry, processor: ReplyProcessor) -> None:
    """Register the reply codes."""
    for code in (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2):
        registry.register(code, processor.process)
