"""The client instance: connections, routes, heartbeats and broker-initiated requests.

One :class:`ClientInstance` serves every producer and consumer of one (name server,
instance name) pair in a process, as RocketMQ's ``MQClientInstance`` does: they share
one connection per broker address, the route cache and the heartbeat. Use
:func:`get_instance` to share one (reference-counted; :meth:`ClientInstance.release`
closes it when the last user lets go), or construct one directly and :meth:`close` it.

What it does:

- **Connections** (:class:`~rocklet.client.pool.ConnectionPool`): one per address, opened on
  first use, with reconnect backoff. When a broker connection opens, the heartbeat
  goes first, so the broker knows this client before anything else arrives on that
  connection (needed for request-reply and transaction check-back).
- **Routes** (:class:`~rocklet.client.routes.RouteCache`): GET_ROUTEINFO_BY_TOPIC answers,
  cached. Every ``route_refresh_s`` the known topics (and the consumers'
  subscriptions) are refreshed, as Java's ``updateTopicRouteInfoFromNameServer``
  timer does.
- **Heartbeats** every ``heartbeat_interval_s`` to every master in the cached routes.
- **Broker-initiated requests** are dispatched to the registered handles:
  NOTIFY_CONSUMER_IDS_CHANGED (40), GET_CONSUMER_RUNNING_INFO (307),
  RESET_CONSUMER_CLIENT_OFFSET (220), CHECK_TRANSACTION_STATE (39) and
  PUSH_REPLY_MESSAGE_TO_CLIENT (326, to the waiting request future).
- **Background failures** reach the user: expected transient
  ones (a broker down, a name server timeout) are logged; anything else is logged and
  passed to the :meth:`on_error` callbacks or, when none is registered, kept and
  raised by the next :meth:`check_errors` (which producers call on each send).
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import os
import socket
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from rocklet.client.backoff import Backoff
from rocklet.client.dispatch import ServerRequestDispatcher
from rocklet.client.errors import ClientStateError, TransportError, error_for_code
from rocklet.client.message import MessageExt
from rocklet.client.pool import ConnectionPool
from rocklet.client.routes import RouteCache
from rocklet.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, ProducerData
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.route import BrokerData, TopicRouteData
from rocklet.protocol.bodies.running import ConsumerRunningInfo
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import UnregisterClientRequestHeader
from rocklet.protocol.headers.namesrv import GetRouteInfoRequestHeader
from rocklet.protocol.headers.transaction import CheckTransactionStateRequestHeader
from rocklet.transport.connection import Connection
from rocklet.transport.logs import get_logger
from rocklet.transport.tasks import BackgroundTasks

__all__ = [
    "ClientInstance",
    "ConsumerHandle",
    "ErrorCallback",
    "InstanceStatus",
    "ProducerHandle",
    "get_instance",
]

_log = get_logger(__name__)

#: Called with each unexpected background failure.
ErrorCallback = Callable[[BaseException], object]

_instance_seq = itertools.count(1)


class ConsumerHandle(Protocol):
    """What a consumer gives the instance (implemented by the consumers)."""

    def consumer_data(self) -> ConsumerData:
        """The group, model and subscriptions, for heartbeats."""
        ...

    def rebalance_soon(self) -> None:
        """Rebalance now: the broker said the group's members changed (code 40)."""
        ...

    async def running_info(self) -> ConsumerRunningInfo:
        """A snapshot for GET_CONSUMER_RUNNING_INFO (307)."""
        ...

    async def reset_offset(self, offsets: dict[MessageQueue, int]) -> None:
        """Jump to these offsets (RESET_CONSUMER_CLIENT_OFFSET, 220)."""
        ...


class ProducerHandle(Protocol):
    """What a producer gives the instance (transaction producers answer check-backs)."""

    async def check_transaction_state(
        self, msg: MessageExt, header: CheckTransactionStateRequestHeader, broker_addr: str
    ) -> None:
        """Answer a CHECK_TRANSACTION_STATE (39) for ``msg`` with END_TRANSACTION."""
        ...


class InstanceStatus(enum.Enum):
    """Lifecycle of a client instance."""

    CREATED = "created"
    RUNNING = "running"
    CLOSED = "closed"


class ClientInstance:
    """One per (name server, instance name) per process: connections, routes, heartbeats.

    Args:
        namesrv: Name server address(es), ``"host:port"``; several separated by ``;``.
        instance_name: Distinguishes instances in one process. Default: ``"DEFAULT"``.
        request_timeout_s: Default timeout of :meth:`invoke`. Default: 3.0.
        heartbeat_interval_s: Heartbeat period. Default: 30.0 (RocketMQ's).
        route_refresh_s: Route refresh period. Default: 30.0 (RocketMQ's).
        connect_timeout_s: TCP connect timeout. Default: 3.0.
        backoff: Reconnect backoff policy. Default: 0.1 s doubling up to 5 s.

    Attributes:
        client_id: ``"ip@pid#instance#n"``, unique per instance in the process (Java
            uses ``ip@pid#nanotime``); brokers key channels and reply routing on it.
        client_ip: The local IPv4 address used towards the name server.
    """

    def __init__(
        self,
        namesrv: str,
        *,
        instance_name: str = "DEFAULT",
        request_timeout_s: float = 3.0,
        heartbeat_interval_s: float = 30.0,
        route_refresh_s: float = 30.0,
        connect_timeout_s: float = 3.0,
        backoff: Backoff | None = None,
    ) -> None:
        self._namesrv_addrs = [a.strip() for a in namesrv.replace(",", ";").split(";") if a.strip()]
        if not self._namesrv_addrs:
            raise ValueError(f"no name server address in {namesrv!r}")
        self.namesrv = namesrv
        self.instance_name = instance_name
        self.request_timeout_s = request_timeout_s
        self._heartbeat_interval_s = heartbeat_interval_s
        self._route_refresh_s = route_refresh_s
        self.client_ip = _local_ip(self._namesrv_addrs[0].rpartition(":")[0])
        self.client_id = f"{self.client_ip}@{os.getpid()}#{instance_name}#{next(_instance_seq)}"
        self._status = InstanceStatus.CREATED
        self._namesrv_index = 0
        self._routes = RouteCache(self._fetch_route, self.spawn)
        self._producers: dict[str, ProducerHandle] = {}
        self._consumers: dict[str, ConsumerHandle] = {}
        self._reply_waiters: dict[str, asyncio.Future[MessageExt]] = {}
        self._tasks = BackgroundTasks("rocklet", transient=(TransportError,))
        self._refs = 0
        self._registry_key: tuple[object, str, str] | None = None
        self._dispatcher = ServerRequestDispatcher(self)
        self._pool = ConnectionPool(
            self._dispatcher.handle,
            self.spawn,
            connect_timeout_s=connect_timeout_s,
            backoff=backoff,
        )
        self._pool.on_open = self._on_open

    # -- lifecycle ----------------------------------------------------------------

    @property
    def status(self) -> InstanceStatus:
        """Where the instance is in its lifecycle."""
        return self._status

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._status is InstanceStatus.CLOSED

    async def start(self) -> None:
        """Start the route-refresh and heartbeat timers; idempotent.

        Raises:
            ClientStateError: The instance is closed.
        """
        if self._status is InstanceStatus.RUNNING:
            return
        self._ensure_open()
        self._status = InstanceStatus.RUNNING
        self._tasks.every(self._route_refresh_s, self.refresh_routes_once, "route-refresh")
        self._tasks.every(self._heartbeat_interval_s, self.send_heartbeat, "heartbeat")

    async def close(self) -> None:
        """Close connections, cancel owned tasks and fail waiting requests; idempotent."""
        if self._status is InstanceStatus.CLOSED:
            return
        self._status = InstanceStatus.CLOSED
        if self._registry_key is not None and _registry.get(self._registry_key) is self:
            del _registry[self._registry_key]
        await self._tasks.cancel_all()
        waiters, self._reply_waiters = self._reply_waiters, {}
        for fut in waiters.values():
            if not fut.done():
                fut.set_exception(ClientStateError("client instance closed"))
        await self._pool.close()

    async def release(self) -> None:
        """Drop one reference taken by :func:`get_instance`; close at zero."""
        self._refs -= 1
        if self._refs <= 0:
            await self.close()

    async def __aenter__(self) -> ClientInstance:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coro`` as a task owned by the instance (cancelled by :meth:`close`).

        Its exception, if any, is retrieved (whoever awaits the task still gets it),
        so an abandoned task never produces "exception was never retrieved".

        Args:
            coro: The coroutine.
            name: Task name, for debugging.

        Returns:
            The task.
        """
        return self._tasks.spawn(coro, name, awaited=True)

    def _ensure_open(self) -> None:
        if self._status is InstanceStatus.CLOSED:
            raise ClientStateError("client instance is closed")

    # -- errors -------------------------------------------------------------------

    def on_error(self, callback: ErrorCallback) -> Callable[[], None]:
        """Register a callback for unexpected background failures.

        While at least one callback is registered, failures go to the callbacks
        instead of being kept for :meth:`check_errors`.

        Args:
            callback: Called with the exception, on the event loop; its own
                exceptions are logged.

        Returns:
            A function that unregisters the callback.
        """
        return self._tasks.add_error_callback(callback)

    def report_error(self, exc: BaseException, *, where: str) -> None:
        """Report an unexpected background failure (also usable by producers/consumers).

        Args:
            exc: The failure.
            where: What was running, for the log.
        """
        self._tasks.report(exc, where)

    def check_errors(self) -> None:
        """Raise, once, the first background failure no callback received.

        Raises:
            BaseException: That failure.
        """
        self._tasks.check_errors()

    # -- transport ----------------------------------------------------------------

    async def invoke(
        self, addr: str, cmd: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Send a request over the connection to ``addr`` and wait for the answer.

        Args:
            addr: ``"host:port"``.
            cmd: The request (opaque and flag are set by the connection).
            timeout_s: Answer timeout. Default: ``request_timeout_s``.

        Returns:
            The answer, whatever its code.

        Raises:
            ConnectError: The connection cannot be opened (or the address is in
                reconnect backoff).
            ConnectionClosedError: The connection closed before the answer.
            RequestTimeoutError: No answer in time.
            ClientStateError: The instance is closed.
        """
        conn = self._pool.peek(addr) or await self._pool.get(addr)
        return await conn.request(cmd, self.request_timeout_s if timeout_s is None else timeout_s)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        """Send a request that gets no answer.

        Args:
            addr: ``"host:port"``.
            cmd: The request.

        Raises:
            ConnectError: The connection cannot be opened.
            ConnectionClosedError: The connection is closed.
            RequestTimeoutError: The connection stayed congested too long.
        """
        conn = self._pool.peek(addr) or await self._pool.get(addr)
        await conn.send_oneway(cmd, self.request_timeout_s)

    async def invoke_namesrv(
        self, cmd: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Send a request to a name server, trying the next one on transport failure.

        Args:
            cmd: The request.
            timeout_s: Answer timeout per name server. Default: ``request_timeout_s``.

        Returns:
            The answer.

        Raises:
            TransportError: Every name server failed (the last failure).
        """
        addrs = self._namesrv_addrs
        last: TransportError | None = None
        for i in range(len(addrs)):
            index = (self._namesrv_index + i) % len(addrs)
            try:
                answer = await self.invoke(addrs[index], cmd, timeout_s)
            except TransportError as exc:
                last = exc
                continue
            self._namesrv_index = index  # stay with the one that works
            return answer
        assert last is not None
        raise last

    async def connection(self, addr: str) -> Connection:
        """The open connection to ``addr``, opening it if needed.

        Raises:
            ConnectError: The connect failed or ``addr`` is in reconnect backoff.
            ClientStateError: The instance is closed.
        """
        return self._pool.peek(addr) or await self._pool.get(addr)

    async def _on_open(self, addr: str) -> None:
        # The heartbeat goes first on a new broker connection, so the broker knows our
        # producer and consumer groups before a reply or check-back has to find us.
        if addr not in self._namesrv_addrs and (self._producers or self._consumers):
            await self._heartbeat_one(addr, self._heartbeat_body())

    # -- routes -------------------------------------------------------------------

    async def topic_route(self, topic: str, *, refresh: bool = False) -> TopicRouteData | None:
        """A topic's route from the name server (GET_ROUTEINFO_BY_TOPIC), cached.

        Args:
            topic: The topic.
            refresh: Ask the name server even if a cached route exists.

        Returns:
            The route, or ``None`` when the name server does not know the topic.

        Raises:
            TransportError: No name server answered.
            BrokerError: The name server answered with an error other than
                TOPIC_NOT_EXIST.
            ClientStateError: The instance is closed.
        """
        self._ensure_open()
        return await self._routes.get(topic, refresh=refresh)

    async def _fetch_route(self, topic: str) -> TopicRouteData | None:
        header = GetRouteInfoRequestHeader(topic, accept_standard_json_only=True)
        cmd = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields=header.to_ext_fields())
        answer = await self.invoke_namesrv(cmd)
        if answer.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if answer.code != ResponseCode.SUCCESS:
            raise error_for_code(answer.code, answer.remark)
        return TopicRouteData.from_json(answer.body)

    async def publish_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's writable queues (a cached list: do not modify it).

        A topic the name server does not know is routed through the TBW102 template
        with at most 4 queues per broker, as Java's producer does, so that the
        broker auto-creates it on the first send.

        Raises:
            TransportError: No name server answered.
            BrokerError: The name server answered with an error.
        """
        return await self._routes.publish_queues(topic)

    async def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues (sorted; a cached list: do not modify it).

        Raises:
            TransportError: No name server answered.
            BrokerError: The name server answered with an error.
        """
        return await self._routes.subscribe_queues(topic)

    def routed_by_template(self, topic: str) -> bool:
        """Whether ``topic`` has no route of its own, so its publish queues are TBW102's.

        Those queue ids are guesses: the broker may already hold the topic with
        fewer queues (just created, not yet registered with the name server).
        """
        return self._routes.routed_by_template(topic)

    def master_addr(self, broker_name: str) -> str | None:
        """The master address of a broker group, from the cached routes."""
        bd = self._routes.broker_data(broker_name)
        return None if bd is None else bd.master_addr

    def broker_addrs(self) -> list[str]:
        """Every known master address, sorted."""
        return self._routes.master_addrs()

    def broker_data(self, broker_name: str) -> BrokerData | None:
        """A broker group's cluster and addresses, from the cached routes."""
        return self._routes.broker_data(broker_name)

    async def refresh_routes_once(self) -> None:
        """Refresh every cached topic and every consumer subscription (one timer step)."""
        topics = set(self._routes.topics())
        for consumer in list(self._consumers.values()):
            topics.update(s.topic for s in consumer.consumer_data().subscription_data_set)
        for topic in sorted(topics):
            try:
                await self._routes.get(topic, refresh=True)
            except TransportError as exc:
                _log.warning("route refresh failed", topic=topic, error=str(exc))

    # -- groups and heartbeats ----------------------------------------------------

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

    def _heartbeat_body(self) -> bytes:
        return HeartbeatData(
            self.client_id,
            tuple(ProducerData(g) for g in sorted(self._producers)),
            tuple(c.consumer_data() for _, c in sorted(self._consumers.items())),
        ).to_json()

    async def send_heartbeat(self) -> None:
        """Send HEART_BEAT with every producer and consumer group to every known master.

        Failures are logged per broker and not raised: a broker that is down must
        not fail the others (it gets the next heartbeat).
        """
        if not self._producers and not self._consumers:
            return
        body = self._heartbeat_body()
        await asyncio.gather(*(self._heartbeat_one(a, body) for a in self.broker_addrs()))

    async def _heartbeat_one(self, addr: str, body: bytes) -> None:
        try:
            answer = await self.invoke(addr, RemotingCommand(RequestCode.HEART_BEAT, body=body))
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
        header = UnregisterClientRequestHeader(self.client_id, producer_group, consumer_group)
        cmd = RemotingCommand(RequestCode.UNREGISTER_CLIENT, ext_fields=header.to_ext_fields())

        async def one(addr: str) -> None:
            try:
                answer = await self.invoke(addr, cmd)
            except TransportError as exc:
                _log.warning("unregister failed", broker=addr, error=str(exc))
                return
            if answer.code != ResponseCode.SUCCESS:
                _log.warning("unregister refused", broker=addr, code=answer.code)

        await asyncio.gather(*(one(a) for a in self.broker_addrs()))

    # -- request-reply ------------------------------------------------------------

    def expect_reply(self, correlation_id: str) -> asyncio.Future[MessageExt]:
        """A future completed by the PUSH_REPLY_MESSAGE_TO_CLIENT for ``correlation_id``.

        The caller must :meth:`discard_reply` it when it stops waiting.

        Raises:
            ClientStateError: The instance is closed.
        """
        self._ensure_open()
        fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self._reply_waiters[correlation_id] = fut
        return fut

    def discard_reply(self, correlation_id: str) -> None:
        """Stop waiting for a reply (after it came, or on timeout)."""
        self._reply_waiters.pop(correlation_id, None)

    def deliver_reply(self, correlation_id: str, msg: MessageExt) -> bool:
        """Complete the waiter of ``correlation_id``.

        Returns:
            Whether a waiter took it (``False``: unknown or expired request).
        """
        fut = self._reply_waiters.pop(correlation_id, None)
        if fut is None or fut.done():
            return False
        fut.set_result(msg)
        return True


def _local_ip(namesrv_host: str) -> str:
    """The local IPv4 address used to reach the name server (no packet is sent)."""
    try:
        socket.inet_aton(namesrv_host)
        target = namesrv_host
    except OSError:
        target = "192.0.2.1"  # TEST-NET-1: only asks the routing table
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect((target, 9))
            return str(sock.getsockname()[0])
    except OSError:
        return "127.0.0.1"


_registry: dict[tuple[object, str, str], ClientInstance] = {}


def get_instance(namesrv: str, instance_name: str = "DEFAULT", **options: Any) -> ClientInstance:
    """The shared instance for (running loop, name server, instance name), one more ref.

    Producers and consumers of one process share it; each calls
    :meth:`ClientInstance.release` when done and the last one closes it.

    Args:
        namesrv: Name server address(es).
        instance_name: Instance name.
        **options: Constructor options, used only when a new instance is made.

    Returns:
        The instance (not started; call :meth:`ClientInstance.start`).
    """
    key = (asyncio.get_running_loop(), namesrv, instance_name)
    inst = _registry.get(key)
    if inst is None or inst.closed:
        inst = ClientInstance(namesrv, instance_name=instance_name, **options)
        inst._registry_key = key
        _registry[key] = inst
    inst._refs += 1
    return inst
