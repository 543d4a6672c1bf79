"""The producer and consumer groups of a client instance, and the heartbeats naming them.

A broker knows a client by its heartbeat (HEART_BEAT, 34): the client id with every
producer group and every consumer group's subscriptions. It must have one before it
can route a reply or a transaction check-back to the client, and it derives a
consumer group's members from heartbeats. So the instance heartbeats every master in
its routes periodically, and a new broker connection's first request is a heartbeat
(:meth:`GroupRegistry.heartbeat_new_connection`). UNREGISTER_CLIENT (35) tells the
brokers that a group left, so rebalancing need not wait for the heartbeat to expire.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

from rocklet.client.errors import ClientStateError, TransportError
from rocklet.client.handles import ConsumerHandle, ProducerHandle
from rocklet.client.pool import Invoke
from rocklet.protocol.bodies.heartbeat import HeartbeatData, ProducerData
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import UnregisterClientRequestHeader
from rocklet.transport.logs import get_logger

__all__ = ["GroupRegistry"]

_log = get_logger(__name__)


class GroupRegistry:
    """Registered groups (one producer and one consumer per group) and their heartbeats.

    Args:
        client_id: This client's id, sent in heartbeats.
        invoke: Sends a request to a broker.
        broker_addrs: Known broker addresses (from the route cache): every master, and
            with ``slaves=True`` every slave too.
    """

    def __init__(
        self, client_id: str, invoke: Invoke, broker_addrs: Callable[..., list[str]]
    ) -> None:
        self._client_id = client_id
        self._invoke = invoke
        self._broker_addrs = broker_addrs
        self._producers: dict[str, ProducerHandle] = {}
        self._consumers: dict[str, ConsumerHandle] = {}

    def __bool__(self) -> bool:
        return bool(self._producers or self._consumers)

    # -- registration -----------------------------------------------------------------

    def register_producer(self, group: str, producer: ProducerHandle) -> None:
        """Register a producer group (one producer per group per instance).

        Raises:
            ClientStateError: The group is already registered on this instance.
        """
        if group in self._producers:
            raise ClientStateError(f"producer group {group!r} is already registered")
        self._producers[group] = producer

    def unregister_producer(self, group: str) -> None:
        """Forget a producer group (call :meth:`unregister_client` to tell brokers)."""
        self._producers.pop(group, None)

    def register_consumer(self, group: str, consumer: ConsumerHandle) -> None:
        """Register a consumer group (one consumer per group per instance).

        Raises:
            ClientStateError: The group is already registered on this instance.
        """
        if group in self._consumers:
            raise ClientStateError(f"consumer group {group!r} is already registered")
        self._consumers[group] = consumer

    def unregister_consumer(self, group: str) -> None:
        """Forget a consumer group (call :meth:`unregister_client` to tell brokers)."""
        self._consumers.pop(group, None)

    def producer(self, group: str) -> ProducerHandle | None:
        """The registered producer of ``group``."""
        return self._producers.get(group)

    def consumer(self, group: str) -> ConsumerHandle | None:
        """The registered consumer of ``group``."""
        return self._consumers.get(group)

    def subscribed_topics(self) -> Iterator[str]:
        """Every topic a registered consumer subscribes to (retry topics included)."""
        for consumer in list(self._consumers.values()):
            for sub in consumer.consumer_data().subscription_data_set:
                yield sub.topic

    # -- heartbeats -------------------------------------------------------------------

    def heartbeat_body(self) -> bytes:
        """The HEART_BEAT body: this client and every registered group."""
        return HeartbeatData(
            self._client_id,
            tuple(ProducerData(g) for g in sorted(self._producers)),
            tuple(c.consumer_data() for _, c in sorted(self._consumers.items())),
        ).to_json()

    async def send_heartbeat(self) -> None:
        """Send HEART_BEAT with every group to every known master (and slave).

        Slaves get it only while a consumer is registered, as Java's
        ``sendHeartbeatToAllBroker`` does: consumers may pull from them and ask them
        for the group's members. Failures are logged per broker and not raised: a
        broker that is down must not fail the others (it gets the next heartbeat).
        """
        if not self:
            return
        body = self.heartbeat_body()
        addrs = self._broker_addrs(slaves=bool(self._consumers))
        await asyncio.gather(*(self._heartbeat(a, body) for a in addrs))

    async def heartbeat_new_connection(self, addr: str) -> None:
        """Heartbeat a broker over its new connection, before anything else uses it.

        The broker then knows our groups before a reply or check-back has to find us.
        """
        if self:
            await self._heartbeat(addr, self.heartbeat_body())

    async def _heartbeat(self, addr: str, body: bytes) -> None:
        try:
            answer = await self._invoke(addr, RemotingCommand(RequestCode.HEART_BEAT, body=body))
        except TransportError as exc:
            _log.warning("heartbeat failed", broker=addr, error=str(exc))
            return
        if answer.code != ResponseCode.SUCCESS:
            _log.warning("heartbeat refused", broker=addr, code=answer.code, remark=answer.remark)

    async def unregister_client(
        self, producer_group: str | None, consumer_group: str | None
    ) -> None:
        """Tell every known master that this client left the given groups.

        Failures are logged, not raised (the broker also expires silent clients).
        """
        header = UnregisterClientRequestHeader(self._client_id, producer_group, consumer_group)
        cmd = RemotingCommand(RequestCode.UNREGISTER_CLIENT, ext_fields=header.to_ext_fields())

        async def one(addr: str) -> None:
            try:
                answer = await self._invoke(addr, cmd)
            except TransportError as exc:
                _log.warning("unregister failed", broker=addr, error=str(exc))
                return
            if answer.code != ResponseCode.SUCCESS:
                _log.warning("unregister refused", broker=addr, code=answer.code)

        await asyncio.gather(*(one(a) for a in self._broker_addrs(slaves=True)))
