"""Admin requests about connected clients, and those relayed to one (``AdminBrokerProcessor``).

- GET_CONSUMER_CONNECTION_LIST (203) / GET_PRODUCER_CONNECTION_LIST (204): a group's
  channels.
- GET_ALL_PRODUCER_INFO (328): every producer channel, by group (``ProducerTableInfo``;
  ``remoteIP`` as Java prints a socket address, ``/host:port``).
- GET_CONSUMER_RUNNING_INFO (307): relayed to the consumer named by ``clientId`` and
  its answer returned.
- CONSUME_MESSAGE_DIRECTLY (309): the message named by the offset ``msgId`` is read
  from the store and sent, whole, to the consumer named by ``clientId``, which runs
  its listener on it and answers a ``ConsumeMessageDirectlyResult``; that answer is
  returned. ``brokerName`` is set to this broker's name on the relayed request.
- INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): GET_CONSUMER_STATUS_FROM_CLIENT (221) is
  sent to every online member of the group (only the one whose client id is
  ``clientAddr`` when that is given), all at once, each given 5 s
  (``Broker2Client.getConsumeStatus``); the offsets each answers go into the
  ``consumerTable`` of the ``GetConsumerStatusBody`` returned. A member that fails,
  times out or answers a malformed body is logged and left out. No member online:
  SYSTEM_ERROR ``No Any Consumer online in the consumer group: [G]``; an asked member
  older than V3_0_7_SNAPSHOT: SYSTEM_ERROR naming its version; a topic name the rules
  reject: SYSTEM_ERROR naming the rule (a blank topic means every topic). (RocketMQ
  asks one member after the other and refuses on any older member it meets before the
  named one.)

The relays follow ``callConsumer``: SYSTEM_ERROR when the client is not online or too
old (before V3_1_8_SNAPSHOT), CONSUME_MSG_TIMEOUT when it does not answer within 10 s
(``Broker2Client.callClient``), SYSTEM_ERROR for any other failure. A 309 whose
``msgId`` names no stored message is refused with SYSTEM_ERROR and a remark saying so
(RocketMQ fails there with a NullPointerException).
"""

from __future__ import annotations

import asyncio
from typing import Final

from rocklet.broker.clients import ClientChannel, ClientManager
from rocklet.broker.identity import BrokerIdentity
from rocklet.broker.processors.refusal import refuse_bad_topic
from rocklet.protocol.bodies.consumer import GetConsumerStatusBody
from rocklet.protocol.bodies.maintenance import ProducerInfo, ProducerTableInfo
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.running import ConsumerConnection, ProducerConnection, RemoteConnection
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import BodyError, MessageFormatError
from rocklet.protocol.headers.admin import (
    GetConsumerConnectionListRequestHeader,
    GetProducerConnectionListRequestHeader,
)
from rocklet.protocol.headers.consumer import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
)
from rocklet.protocol.message_id import parse_offset_msg_id
from rocklet.protocol.version import version_desc
from rocklet.store.message_store import MessageStore
from rocklet.transport import ProcessorRegistry, RequestContext
from rocklet.transport.errors import RemotingError, RequestTimeoutError
from rocklet.transport.logs import get_logger

__all__ = ["ClientAdmin", "register"]

_log = get_logger(__name__)

#: ``MQVersion.Version.V3_1_8_SNAPSHOT``: older consumers cannot answer relayed requests.
_MIN_RELAY_VERSION: Final = 62
#: ``Broker2Client.callClient``'s timeout.
_RELAY_TIMEOUT_S: Final = 10.0
#: ``MQVersion.Version.V3_0_7_SNAPSHOT``: older consumers cannot report their offsets.
_MIN_STATUS_VERSION: Final = 28
#: How long each member has to answer GET_CONSUMER_STATUS_FROM_CLIENT (as RocketMQ).
#: Not Final: tests shorten it to see a silent member left out without waiting 5 s.
STATUS_TIMEOUT_S = 5.0


def _connection(channel: ClientChannel) -> RemoteConnection:
    return RemoteConnection(
        client_id=channel.client_id,
        client_addr=channel.connection.peer_address or "",
        language=channel.language,
        version=channel.version,
    )


def _producer_info(channel: ClientChannel) -> ProducerInfo:
    return ProducerInfo(
        client_id=channel.client_id,
        remote_ip=f"/{channel.connection.peer_address or ''}",
        language=channel.language,
        version=channel.version,
        last_update_timestamp=channel.last_update_ms,
    )


class ClientAdmin:
    """Serves the client admin codes. Event loop only.

    Args:
        clients: Client channels.
        store: The message store (the message a 309 relays).
        identity: This broker's name (set on a relayed 309).
    """

    def __init__(
        self, *, clients: ClientManager, store: MessageStore, identity: BrokerIdentity
    ) -> None:
        self._clients = clients
        self._store = store
        self._identity = identity

    async def consumer_connections(
        self, _rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """GET_CONSUMER_CONNECTION_LIST: a consumer group's channels and subscriptions."""
        header = GetConsumerConnectionListRequestHeader.from_ext_fields(cmd.ext_fields)
        info = self._clients.consumer_group(header.consumer_group)
        if info is None:
            return cmd.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE,
                remark=f"the consumer group[{header.consumer_group}] not online",
            )
        body = ConsumerConnection(
            connection_set=tuple(_connection(c) for c in info.channels.values()),
            subscription_table=dict(info.subscriptions),
            consume_type=info.consume_type,
            message_model=info.message_model,
            consume_from_where=info.consume_from_where,
        ).to_json()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def producer_connections(
        self, _rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """GET_PRODUCER_CONNECTION_LIST: a producer group's channels."""
        header = GetProducerConnectionListRequestHeader.from_ext_fields(cmd.ext_fields)
        channels = self._clients.producer_channels(header.producer_group)
        if not channels:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"the producer group[{header.producer_group}] not exist",
            )
        body = ProducerConnection(tuple(_connection(c) for c in channels)).to_json()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def all_producers(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ALL_PRODUCER_INFO: every producer channel, by group."""
        table = {
            group: tuple(_producer_info(c) for c in channels)
            for group, channels in self._clients.producer_groups().items()
            if channels
        }
        return cmd.make_response(ResponseCode.SUCCESS, body=ProducerTableInfo(table).to_json())

    async def running_info(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO: ask the consumer itself and pass its answer on."""
        header = GetConsumerRunningInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        relayed = RemotingCommand(
            RequestCode.GET_CONSUMER_RUNNING_INFO, ext_fields=cmd.ext_fields, body=cmd.body
        )
        return await self._call_consumer(cmd, relayed, header.consumer_group, header.client_id)

    async def consume_directly(
        self, _rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY: have one consumer run its listener on one message."""
        header = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(cmd.ext_fields)
        ext = {**cmd.ext_fields, "brokerName": self._identity.broker_name}
        body = cmd.body
        if header.msg_id is not None:
            try:
                offset = parse_offset_msg_id(header.msg_id).offset
            except MessageFormatError:
                offset = None  # RocketMQ relays the request's own body then
            if offset is not None:
                view = self._store.read_record(offset)
                if view is None:
                    return cmd.make_response(
                        ResponseCode.SYSTEM_ERROR,
                        remark=f"can not find message by the offset, {offset}",
                    )
                body = bytes(view)  # a copy: the relay may wait, the segment may go
                view.release()
        relayed = RemotingCommand(RequestCode.CONSUME_MESSAGE_DIRECTLY, ext_fields=ext, body=body)
        return await self._call_consumer(cmd, relayed, header.consumer_group, header.client_id)

    async def consumer_status(self, _rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS: every member's in-memory offsets of a topic."""
        header = GetConsumerStatusRequestHeader.from_ext_fields(cmd.ext_fields)
        # A blank topic asks for every topic (the client's cloneOffsetTable reads it so).
        refusal = refuse_bad_topic(cmd, header.topic) if header.topic.strip() else None
        if refusal is not None:
            return refusal  # no client holds offsets of a topic that cannot exist
        group = header.group
        info = self._clients.consumer_group(group)
        channels = [] if info is None else list(info.channels.values())
        if not channels:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"No Any Consumer online in the consumer group: [{group}]",
            )
        wanted = (header.client_addr or "").strip()
        if wanted:
            channels = [c for c in channels if c.client_id == wanted]
        for channel in channels:
            if channel.version < _MIN_STATUS_VERSION:
                return cmd.make_response(
                    ResponseCode.SYSTEM_ERROR,
                    remark=f"consumer {channel.client_id} cannot report its offsets: its "
                    f"version {version_desc(channel.version)} is older than V3_0_7_SNAPSHOT",
                )
        asked = GetConsumerStatusRequestHeader(topic=header.topic, group=group)
        answers = await asyncio.gather(*(self._ask_status(c, asked) for c in channels))
        table = {c.client_id: a for c, a in zip(channels, answers, strict=True) if a is not None}
        body = GetConsumerStatusBody(consumer_table=table).to_json()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def _ask_status(
        self, channel: ClientChannel, header: GetConsumerStatusRequestHeader
    ) -> dict[MessageQueue, int] | None:
        """One member's GET_CONSUMER_STATUS_FROM_CLIENT answer; ``None`` when it has none."""
        request = RemotingCommand(
            RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, ext_fields=header.to_ext_fields()
        )
        where = {"group": header.group, "topic": header.topic, "client": channel.client_id}
        try:
            answer = await channel.connection.request(request, STATUS_TIMEOUT_S)
        except RemotingError as exc:  # timeouts included: that member is left out
            _log.warning("consumer status: no answer", error=str(exc), **where)
            return None
        if answer.code != ResponseCode.SUCCESS or not answer.body:
            _log.warning(
                "consumer status: refused", code=answer.code, remark=answer.remark, **where
            )
            return None
        try:
            return dict(GetConsumerStatusBody.from_json(answer.body).message_queue_table)
        except BodyError as exc:
            _log.warning("consumer status: malformed answer", error=str(exc), **where)
            return None

    async def _call_consumer(
        self, cmd: RemotingCommand, relayed: RemotingCommand, group: str, client_id: str | None
    ) -> RemotingCommand:
        """``callConsumer``: send ``relayed`` to the client and answer with its answer."""
        info = self._clients.consumer_group(group)
        channel = None
        if info is not None:
            channel = next((c for c in info.channels.values() if c.client_id == client_id), None)
        if channel is None:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR, remark=f"The Consumer <{group}> <{client_id}> not online"
            )
        if channel.version < _MIN_RELAY_VERSION:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"The Consumer <{client_id}> Version <{channel.version}> too low to "
                "finish, please upgrade it to V3_1_8_SNAPSHOT",
            )
        try:
            answer = await channel.connection.request(relayed, _RELAY_TIMEOUT_S)
        except RequestTimeoutError as exc:
            return cmd.make_response(
                ResponseCode.CONSUME_MSG_TIMEOUT,
                remark=f"consumer <{group}> <{client_id}> Timeout: {exc}",
            )
        except RemotingError as exc:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"invoke consumer <{group}> <{client_id}> Exception: {exc}",
            )
        return cmd.make_response(
            answer.code, remark=answer.remark, ext_fields=answer.ext_fields, body=answer.body
        )


def register(registry: ProcessorRegistry, admin: ClientAdmin) -> None:
    """Register the client admin codes."""
    registry.register_all(
        {
            RequestCode.GET_CONSUMER_CONNECTION_LIST: admin.consumer_connections,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: admin.producer_connections,
            RequestCode.GET_ALL_PRODUCER_INFO: admin.all_producers,
            RequestCode.GET_CONSUMER_RUNNING_INFO: admin.running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: admin.consume_directly,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: admin.consumer_status,
        }
    )
