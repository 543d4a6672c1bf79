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

The relays follow ``callConsumer``: SYSTEM_ERROR when the client is not online or too
old (before V3_1_8_SNAPSHOT), CONSUME_MSG_TIMEOUT when it does not answer within 10 s
(``Broker2Client.callClient``), SYSTEM_ERROR for any other failure. A 309 whose
``msgId`` names no stored message is refused with SYSTEM_ERROR and a remark saying so
(RocketMQ fails there with a NullPointerException).
"""

from __future__ import annotations

from typing import Final

from rocklet.broker.clients import ClientChannel, ClientManager
from rocklet.broker.identity import BrokerIdentity
from rocklet.protocol.bodies.maintenance import ProducerInfo, ProducerTableInfo
from rocklet.protocol.bodies.running import ConsumerConnection, ProducerConnection, RemoteConnection
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.headers.admin import (
    GetConsumerConnectionListRequestHeader,
    GetProducerConnectionListRequestHeader,
)
from rocklet.protocol.headers.consumer import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
)
from rocklet.protocol.message_id import parse_offset_msg_id
from rocklet.store.message_store import MessageStore
from rocklet.transport import ProcessorRegistry, RequestContext
from rocklet.transport.errors import RemotingError, RequestTimeoutError

__all__ = ["ClientAdmin", "register"]

#: ``MQVersion.Version.V3_1_8_SNAPSHOT``: older consumers cannot answer relayed requests.
_MIN_RELAY_VERSION: Final = 62
#: ``Broker2Client.callClient``'s timeout.
_RELAY_TIMEOUT_S: Final = 10.0


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
        }
    )
