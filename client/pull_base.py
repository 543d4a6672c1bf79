"""What both pull consumers share: lifecycle, the client instance, offset look-ups.

A consumer belongs to the event loop it was started on (its connections and tasks
live there): its public coroutines check the running loop first (:meth:`_live`), so a
call from another loop fails before it writes anything.
"""

from __future__ import annotations

import asyncio

from rocklet.client.arguments import closed_while_waiting, wrong_loop
from rocklet.client.consumer_status import ConsumerStatus
from rocklet.client.errors import ClientStateError, NoRouteError
from rocklet.client.handles import ConsumerHandle
from rocklet.client.instance import ClientInstance, get_instance
from rocklet.client.offset_store import RemoteOffsetStore
from rocklet.client.pull_api import max_offset, min_offset, search_offset
from rocklet.client.rebalance import ConsumeFrom
from rocklet.client.tls import TlsOption
from rocklet.protocol.acl import Credentials
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.names import check_group_name
from rocklet.transport.errors import ConnectionClosedError

__all__ = ["PullConsumerBase"]


class PullConsumerBase:
    """Lifecycle and broker look-ups shared by both pull consumers."""

    def __init__(
        self,
        group: str,
        namesrv: str,
        instance_name: str,
        instance: ClientInstance | None,
        consume_from: ConsumeFrom,
        tls: TlsOption = None,
        credentials: Credentials | None = None,
    ) -> None:
        if (reason := check_group_name(group)) is not None:
            raise ValueError(f"consumer group: {reason}")
        self.group = group
        self.namesrv = namesrv
        self._instance_name = instance_name
        self._tls = tls
        self._credentials = credentials
        self._given_instance = instance
        self._instance: ClientInstance | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._offsets: RemoteOffsetStore | None = None
        self._consume_from: ConsumeFrom = consume_from
        self._status = ConsumerStatus.CREATED

    @property
    def status(self) -> ConsumerStatus:
        """Where the consumer is in its lifecycle."""
        return self._status

    @property
    def instance(self) -> ClientInstance:
        """The client instance (once started).

        Raises:
            ClientStateError: Not started, or shut down.
        """
        if self._instance is None or self._status is not ConsumerStatus.RUNNING:
            raise ClientStateError("consumer is not running")
        return self._instance

    def _live(self) -> ClientInstance:
        """The instance, for a call made on the consumer's own event loop.

        Raises:
            ClientStateError: Not running, or the running loop (if any) is not the
                one the consumer was started on.
        """
        instance = self.instance
        if asyncio.events._get_running_loop() is not self._loop:
            raise wrong_loop(f"consumer {self.group!r}")
        return instance

    def _closed_error(self) -> ClientStateError | None:
        """What to raise instead of a ``CancelledError`` the caller did not ask for."""
        return closed_while_waiting("consumer")

    async def _start_instance(self, handle: ConsumerHandle) -> ClientInstance:
        if self._status is not ConsumerStatus.CREATED:
            raise ClientStateError("a consumer can be started once")
        instance = self._given_instance or get_instance(
            self.namesrv,
            self._instance_name,
            tls=self._tls,
            credentials=self._credentials,
        )
        try:
            await instance.start()
            instance.groups.register_consumer(self.group, handle)
        except BaseException:
            if self._given_instance is None:
                await instance.release()
            raise
        self._instance = instance
        self._loop = asyncio.get_running_loop()
        self._offsets = RemoteOffsetStore(self.group, instance)
        self._status = ConsumerStatus.RUNNING
        return instance

    async def _stop_instance(self) -> None:
        assert self._instance is not None
        self._instance.groups.unregister_consumer(self.group)
        await self._instance.groups.unregister_client(None, self.group)
        if self._given_instance is None:
            await self._instance.release()
        self._status = ConsumerStatus.CLOSED

    async def _addr(self, mq: MessageQueue) -> str:
        routes = self._live().routes
        addr = routes.admin_addr(mq.broker_name)
        if addr is None:
            try:
                await routes.topic_route(mq.topic, refresh=True)
            except asyncio.CancelledError as exc:
                # Shutting down cancels the fetch; a caller that did not cancel must
                # not see a cancellation.
                if (closed := self._closed_error()) is None:
                    raise
                raise closed from exc
            addr = routes.admin_addr(mq.broker_name)
        if addr is None:
            raise NoRouteError(mq.topic, f"no address known for broker {mq.broker_name}")
        return addr

    async def _pull_somewhere(
        self, mq: MessageQueue, cmd: RemotingCommand, timeout_s: float
    ) -> tuple[str, RemotingCommand]:
        """Send a pull to ``mq``'s broker; if it is gone, at once to the group's other one.

        A broker whose connection closes or refuses (a master's process died) may have
        a slave: the route is looked up again now, not at the 30 s refresh, and a pull
        (a read, safe to repeat) goes to the address the fresh route gives, if another.

        Returns:
            The address that answered and its answer.
        """
        addr = await self._addr(mq)
        try:
            try:
                return addr, await self.instance.invoke(addr, cmd, timeout_s)
            except ConnectionClosedError:
                routes = self.instance.routes
                await routes.topic_route(mq.topic, refresh=True)
                other = routes.admin_addr(mq.broker_name)
                if other is None or other == addr:
                    raise
            return other, await self.instance.invoke(other, cmd, timeout_s)
        except asyncio.CancelledError as exc:
            # Shutting down cancels the connects and route fetches a pull may wait on.
            if (closed := self._closed_error()) is None:
                raise
            raise closed from exc

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` (``fetchSubscribeMessageQueues``).

        Raises:
            NoRouteError: The topic has no route.
        """
        routes = self._live().routes
        try:
            queues = await routes.subscribe_queues(topic)
            if not queues:
                await routes.topic_route(topic, refresh=True)
                queues = await routes.subscribe_queues(topic)
        except asyncio.CancelledError as exc:
            if (closed := self._closed_error()) is None:
                raise
            raise closed from exc
        if not queues:
            raise NoRouteError(topic)
        return list(queues)

    async def max_offset(self, mq: MessageQueue) -> int:
        """The queue's next offset to be written (GET_MAX_OFFSET)."""
        return await max_offset(self.instance, await self._addr(mq), mq)

    async def min_offset(self, mq: MessageQueue) -> int:
        """The queue's smallest stored offset (GET_MIN_OFFSET)."""
        return await min_offset(self.instance, await self._addr(mq), mq)

    async def offset_for_time(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset stored at or after ``timestamp_ms`` (SEARCH_OFFSET_BY_TIMESTAMP)."""
        return await search_offset(self.instance, await self._addr(mq), mq, timestamp_ms)

    async def committed(self, mq: MessageQueue) -> int | None:
        """The group's offset for ``mq`` stored on the broker, or ``None``."""
        assert self._offsets is not None
        self._live()
        return await self._offsets.read_store(mq)

    async def reset_offset(self, offsets: dict[MessageQueue, int]) -> None:
        """Ignore RESET_CONSUMER_CLIENT_OFFSET by default (subclasses may seek)."""

    def rebalance_soon(self) -> None:
        """Nothing to rebalance by default."""

    def consume_offsets(self, topic: str) -> dict[MessageQueue, int]:
        """The offsets held in memory for ``topic`` (GET_CONSUMER_STATUS_FROM_CLIENT).

        The lite consumer's are those ``poll`` consumed with auto-commit on, or the last
        ``commit``'s; the plain pull consumer's, those ``commit`` was given.
        """
        return {} if self._offsets is None else self._offsets.topic_snapshot(topic)
