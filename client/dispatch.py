"""Requests a broker sends to the client, and who answers them.

A broker talks to a client over the connection the client opened (RocketMQ's
``ClientRemotingProcessor``). Each request is handled in its own task by the
connection; this module maps the code to the producer or consumer registered for the
group (:class:`~rocklet.client.groups.GroupRegistry`) or to the waiting request
(:class:`~rocklet.client.replies.ReplyWaiters`):

====  ===============================  ===================================================
code  request                          handled by
====  ===============================  ===================================================
40    NOTIFY_CONSUMER_IDS_CHANGED      ``ConsumerHandle.rebalance_soon`` (oneway)
307   GET_CONSUMER_RUNNING_INFO        ``ConsumerHandle.running_info`` (a body); with
                                       ``jstackEnable``, :func:`stack_dump`'s text in it
221   GET_CONSUMER_STATUS_FROM_CLIENT  ``ConsumerHandle.consume_offsets`` (a body; a group
                                       not here answers an empty table, as Java does)
309   CONSUME_MESSAGE_DIRECTLY         a push consumer's listener, on one message (a body)
220   RESET_CONSUMER_CLIENT_OFFSET     ``ConsumerHandle.reset_offset`` (oneway from Java)
39    CHECK_TRANSACTION_STATE          ``ProducerHandle.check_transaction_state`` (oneway)
326   PUSH_REPLY_MESSAGE_TO_CLIENT     the waiting request future (answered SUCCESS)
====  ===============================  ===================================================

Unexpected failures are reported through the instance's error channel, then answered
with SYSTEM_ERROR by the connection. The dispatcher gets those collaborators, not the
instance, so it depends on nothing that depends on it.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Awaitable, Callable
from typing import Protocol

from rocklet.client.consume_directly import DirectConsumer
from rocklet.client.handles import ConsumerHandle, ProducerHandle
from rocklet.client.message import MessageExt
from rocklet.client.stack_dump import stack_dump
from rocklet.protocol.bodies.consumer import GetConsumerStatusBody, ResetOffsetBody
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
)
from rocklet.protocol.headers.transaction import (
    CheckTransactionStateRequestHeader,
    ReplyMessageRequestHeader,
)
from rocklet.protocol.message import SysFlag, decode_message
from rocklet.protocol.properties import Prop, decode_properties
from rocklet.transport.connection import Connection, HandlerResult
from rocklet.transport.logs import get_logger

__all__ = ["GroupLookup", "ServerRequestDispatcher", "reply_message_from_push"]

_log = get_logger(__name__)

_Handler = Callable[[Connection, RemotingCommand], Awaitable[HandlerResult]]


class GroupLookup(Protocol):
    """Finds the producer or consumer registered for a group."""

    def producer(self, group: str) -> ProducerHandle | None:
        """The registered producer of ``group``."""
        ...

    def consumer(self, group: str) -> ConsumerHandle | None:
        """The registered consumer of ``group``."""
        ...


class ServerRequestDispatcher:
    """Routes broker-initiated requests to the instance's producers and consumers.

    Args:
        groups: Finds the producer or consumer of a group.
        deliver_reply: Completes the request waiting for a reply:
            ``(correlation_id, reply) -> whether someone waited``.
        report_error: Receives unexpected failures: ``(exception, where)``.
    """

    def __init__(
        self,
        groups: GroupLookup,
        deliver_reply: Callable[[str, MessageExt], bool],
        report_error: Callable[[BaseException, str], None],
    ) -> None:
        self._groups = groups
        self._deliver_reply = deliver_reply
        self._report_error = report_error
        self._handlers: dict[int, _Handler] = {
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: self._notify_ids_changed,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self._running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self._consume_directly,
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET: self._reset_offset,
            RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT: self._consumer_status,
            RequestCode.CHECK_TRANSACTION_STATE: self._check_transaction,
            RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT: self._push_reply,
        }

    async def handle(self, conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        """The connection's request handler.

        Args:
            conn: The connection the request came on.
            cmd: The request.

        Returns:
            The answer, or ``None`` for requests that get none.
        """
        handler = self._handlers.get(cmd.code)
        if handler is None:
            return cmd.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                remark=f" request type {cmd.code} not supported",
            )
        try:
            return await handler(conn, cmd)
        except Exception as exc:
            self._report_error(exc, f"handling request code {cmd.code}")
            raise

    async def _notify_ids_changed(self, _conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        header = NotifyConsumerIdsChangedRequestHeader.from_ext_fields(cmd.ext_fields)
        consumer = self._groups.consumer(header.consumer_group)
        if consumer is not None:
            consumer.rebalance_soon()
        return None

    async def _running_info(self, _conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        header = GetConsumerRunningInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        consumer = self._groups.consumer(header.consumer_group)
        if consumer is None:
            # ClientRemotingProcessor.getConsumerRunningInfo's wording.
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"The Consumer Group <{header.consumer_group}> not exist in this consumer",
            )
        info = await consumer.running_info()
        if header.jstack_enable:
            info = dataclasses.replace(info, jstack=await stack_dump())
        return cmd.make_response(ResponseCode.SUCCESS, body=info.to_json())

    async def _consume_directly(self, _conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        header = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(cmd.ext_fields)
        consumer = self._groups.consumer(header.consumer_group)
        if not isinstance(consumer, DirectConsumer):  # no such group, or not a push consumer
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"The Consumer Group <{header.consumer_group}> not exist in this consumer",
            )
        msg = MessageExt.from_stored(decode_message(cmd.body), broker_name=header.broker_name or "")
        result = await consumer.consume_message_directly(msg, header.broker_name)
        return cmd.make_response(ResponseCode.SUCCESS, body=result.to_json())

    async def _reset_offset(self, _conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        header = ResetOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        consumer = self._groups.consumer(header.group)
        if consumer is not None:
            body = ResetOffsetBody.from_json(cmd.body)
            await consumer.reset_offset(dict(body.offset_table))
        return cmd.make_response(ResponseCode.SUCCESS)

    async def _consumer_status(self, _conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        header = GetConsumerStatusRequestHeader.from_ext_fields(cmd.ext_fields)
        consumer = self._groups.consumer(header.group)
        # MQClientInstance.getConsumerStatus: a group not here answers an empty table.
        table = {} if consumer is None else consumer.consume_offsets(header.topic)
        body = GetConsumerStatusBody(message_queue_table=table).to_json()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def _check_transaction(self, conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        header = CheckTransactionStateRequestHeader.from_ext_fields(cmd.ext_fields)
        msg = MessageExt.from_stored(decode_message(cmd.body))
        group = msg.properties.get(Prop.PGROUP)
        producer = None if group is None else self._groups.producer(group)
        if producer is None:
            # Java logs and ignores it too; the broker asks again later.
            _log.warning("check-back for an unknown producer group", group=group)
            return None
        addr = conn.attributes.get("addr")
        broker_addr = addr if isinstance(addr, str) else (conn.peer_address or "")
        await producer.check_transaction_state(msg, header, broker_addr)
        return None

    async def _push_reply(self, _conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        msg = reply_message_from_push(cmd)
        correlation_id = msg.properties.get(Prop.CORRELATION_ID, "")
        if not self._deliver_reply(correlation_id, msg):
            # ClientRemotingProcessor.processReplyMessage: a late reply is only logged.
            _log.warning("reply for an unknown or expired request", correlation_id=correlation_id)
        return cmd.make_response(ResponseCode.SUCCESS)


def reply_message_from_push(cmd: RemotingCommand) -> MessageExt:
    """Build the reply message from a PUSH_REPLY_MESSAGE_TO_CLIENT request.

    The body is the payload (inflated when the sys flag says compressed, as Java's
    ``ClientRemotingProcessor.receiveReplyMessage`` does); the header carries the rest.

    Args:
        cmd: The request.

    Returns:
        The reply.

    Raises:
        HeaderError: The header is incomplete.
    """
    header = ReplyMessageRequestHeader.from_ext_fields(cmd.ext_fields)
    body = cmd.body
    if header.sys_flag & SysFlag.COMPRESSED:
        body = zlib.decompress(body)
    return MessageExt(
        topic=header.topic,
        body=body,
        properties=decode_properties(header.properties or ""),
        flag=header.flag,
        queue_id=header.queue_id,
        sys_flag=header.sys_flag,
        born_timestamp=header.born_timestamp,
        born_host=_host(header.born_host),
        store_timestamp=header.store_timestamp,
        store_host=_host(header.store_host),
        reconsume_times=header.reconsume_times,
    )


def _host(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    try:
        return host.lstrip("/"), int(port)
    except ValueError:
        return addr, 0
