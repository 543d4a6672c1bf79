"""The client instance: what every producer and consumer of a process shares.

One :class:`ClientInstance` serves every producer and consumer of one (name server,
instance name) pair in a process, as RocketMQ's ``MQClientInstance`` does. Use
:func:`get_instance` to share one (reference-counted; :meth:`ClientInstance.release`
closes it when the last user lets go), or construct one directly and :meth:`close` it.

It is the composition of focused parts, each in its own module:

- :attr:`~ClientInstance.name_servers` (:mod:`rocklet.client.namesrv`): the name
  server addresses, fail-over between them, route queries.
- :attr:`~ClientInstance.routes` (:mod:`rocklet.client.routes`): cached topic routes,
  brokers and queues; refreshed every ``route_refresh_s`` for the cached topics and the
  consumers' subscriptions, as Java's ``updateTopicRouteInfoFromNameServer`` timer does.
- :attr:`~ClientInstance.groups` (:mod:`rocklet.client.groups`): the registered
  producer and consumer groups, and the heartbeats (every ``heartbeat_interval_s`` to
  every master, and first on each new broker connection).
- :attr:`~ClientInstance.replies` (:mod:`rocklet.client.replies`): requests waiting
  for a reply.
- the connection pool (:mod:`rocklet.client.pool`) behind :meth:`~ClientInstance.invoke`,
  and the dispatcher (:mod:`rocklet.client.dispatch`) that answers requests brokers send.
- background tasks (:class:`~rocklet.transport.tasks.BackgroundTasks`): expected
  transient failures (a broker down, a name server timeout) are logged; anything else
  is logged and passed to the :meth:`~ClientInstance.on_error` callbacks or, when none
  is registered, kept and raised by the next :meth:`~ClientInstance.check_errors`
  (which producers call on each send).
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import os
import socket
import ssl
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, Self

from rocklet.client.backoff import Backoff
from rocklet.client.dispatch import ServerRequestDispatcher
from rocklet.client.errors import ClientStateError, TransportError
from rocklet.client.groups import GroupRegistry
from rocklet.client.handles import ConsumerHandle, ProducerHandle
from rocklet.client.namesrv import NameServers
from rocklet.client.pool import ConnectionPool
from rocklet.client.replies import ReplyWaiters
from rocklet.client.routes import RouteCache
from rocklet.client.tls import TlsOption, resolve_tls
from rocklet.protocol.acl import Credentials, sign
from rocklet.protocol.bodies.route import TopicRouteData
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.clock import SYSTEM_CLOCK, Clock
from rocklet.transport.connection import Connection
from rocklet.transport.tasks import BackgroundTasks, ErrorCallback

__all__ = [
    "ClientInstance",
    "ConsumerHandle",
    "ErrorCallback",
    "InstanceStatus",
    "ProducerHandle",
    "get_instance",
]

_instance_seq = itertools.count(1)


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
        clock: The time source of the instance and of the producers and consumers
            using it (route ages, reconnect backoff, timestamps, ProcessQueue ages).
            Default: the system clocks.
        tls: Connect to name servers and brokers over TLS: ``True`` verifies them
            against the system's CAs, an :class:`ssl.SSLContext` (see
            :func:`rocklet.client.tls_context`) as it says. Default: plain TCP.
        credentials: Sign every request to brokers and name servers with this ACL
            account (RocketMQ's ``AclClientRPCHook``). Default: unsigned.

    Raises:
        ValueError: ``namesrv`` holds no address.

    Attributes:
        client_id: ``"ip@pid#instance#n"``, unique per instance in the process (Java
            uses ``ip@pid#nanotime``); brokers key channels and reply routing on it.
        client_ip: The local IPv4 address used towards the name server.
        credentials: The ACL account requests are signed with, or ``None``.
        clock: The time source.
        name_servers: The name servers.
        routes: The route cache.
        groups: The registered producer and consumer groups, and heartbeats.
        replies: Requests waiting for a reply.
        tls: The TLS context of every connection, or ``None`` for plain TCP.
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
        clock: Clock = SYSTEM_CLOCK,
        tls: TlsOption = None,
        credentials: Credentials | None = None,
    ) -> None:
        self.namesrv = namesrv
        self.tls: ssl.SSLContext | None = resolve_tls(tls)
        self.credentials = credentials
        self.instance_name = instance_name
        self.clock = clock
        self._heartbeat_interval_s = heartbeat_interval_s
        self._route_refresh_s = route_refresh_s
        self._status = InstanceStatus.CREATED
        self._refs = 0
        self._registry_key: tuple[object, str, str, object, Credentials | None] | None = None
        self._tasks = BackgroundTasks("rocklet", transient=(TransportError,))
        self.name_servers = NameServers(namesrv, self.invoke)
        self.client_ip = _local_ip(self.name_servers.addrs[0].rpartition(":")[0])
        self.client_id = f"{self.client_ip}@{os.getpid()}#{instance_name}#{next(_instance_seq)}"
        self.routes = RouteCache(self.name_servers.fetch_route, self.spawn, clock)
        self.groups = GroupRegistry(self.client_id, self.invoke, self.routes.broker_addrs)
        self.replies = ReplyWaiters()
        dispatcher = ServerRequestDispatcher(self.groups, self.replies.deliver, self._tasks.report)
        self._pool = ConnectionPool(
            dispatcher.handle,
            self.spawn,
            request_timeout_s=request_timeout_s,
            connect_timeout_s=connect_timeout_s,
            backoff=backoff,
            clock=clock,
            tls=self.tls,
        )
        self._pool.on_open = self._on_open
        if credentials is not None:
            self._pool.request_hook = partial(sign, credentials=credentials)

    # -- lifecycle ----------------------------------------------------------------

    @property
    def status(self) -> InstanceStatus:
        """Where the instance is in its lifecycle."""
        return self._status

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._status is InstanceStatus.CLOSED

    @property
    def request_timeout_s(self) -> float:
        """Default answer timeout of :meth:`invoke`."""
        return self._pool.request_timeout_s

    async def start(self) -> None:
        """Start the route-refresh and heartbeat timers; idempotent.

        Raises:
            ClientStateError: The instance is closed.
        """
        if self._status is InstanceStatus.RUNNING:
            return
        self._ensure_open()
        self._status = InstanceStatus.RUNNING
        self._tasks.every(self._route_refresh_s, self._refresh_routes, "route-refresh")
        self._tasks.every(self._heartbeat_interval_s, self.groups.send_heartbeat, "heartbeat")

    async def close(self) -> None:
        """Close connections, cancel owned tasks and fail waiting requests; idempotent."""
        if self._status is InstanceStatus.CLOSED:
            return
        self._status = InstanceStatus.CLOSED
        if self._registry_key is not None and _registry.get(self._registry_key) is self:
            del _registry[self._registry_key]
        await self._tasks.cancel_all()
        self.replies.close()
        await self._pool.close()

    async def release(self) -> None:
        """Drop one reference taken by :func:`get_instance`; close at zero."""
        self._refs -= 1
        if self._refs <= 0:
            await self.close()

    async def __aenter__(self) -> Self:
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

    async def _refresh_routes(self) -> None:
        await self.routes.refresh(self.groups.subscribed_topics())

    async def _on_open(self, addr: str) -> None:
        if addr not in self.name_servers:
            await self.groups.heartbeat_new_connection(addr)

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

    # -- requests -----------------------------------------------------------------

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
        return await self._pool.invoke(addr, cmd, timeout_s)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        """Send a request that gets no answer.

        Raises:
            ConnectError: The connection cannot be opened.
            ConnectionClosedError: The connection is closed.
            RequestTimeoutError: The connection stayed congested too long.
        """
        await self._pool.invoke_oneway(addr, cmd)

    async def connection(self, addr: str) -> Connection:
        """The open connection to ``addr``, opening it if needed.

        Raises:
            ConnectError: The connect failed or ``addr`` is in reconnect backoff.
            ClientStateError: The instance is closed.
        """
        return self._pool.peek(addr) or await self._pool.get(addr)

    async def invoke_namesrv(
        self, cmd: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Send a request to a name server (:meth:`NameServers.invoke`, fail-over included).

        Raises:
            TransportError: Every name server failed (the last failure).
        """
        return await self.name_servers.invoke(cmd, timeout_s)

    async def topic_route(self, topic: str, *, refresh: bool = False) -> TopicRouteData | None:
        """A topic's route, cached (:meth:`RouteCache.topic_route`).

        Raises:
            ClientStateError: The instance is closed.
            TransportError: No name server answered.
            NotANameServerError: The name server address is a broker's.
            BrokerError: The name server answered with another error.
        """
        self._ensure_open()
        return await self.routes.topic_route(topic, refresh=refresh)


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


_registry: dict[tuple[object, str, str, object, Credentials | None], ClientInstance] = {}


def get_instance(
    namesrv: str,
    instance_name: str = "DEFAULT",
    *,
    tls: TlsOption = None,
    credentials: Credentials | None = None,
    **options: Any,
) -> ClientInstance:
    """The shared instance for (loop, name server, instance name, TLS, credentials).

    Producers and consumers of one process share it; each calls
    :meth:`ClientInstance.release` when done and the last one closes it. Users with
    different credentials get different instances (Java shares one and keeps the
    first user's hook), so no request goes out signed as someone else.

    Args:
        namesrv: Name server address(es).
        instance_name: Instance name.
        tls: TLS of the connections (:class:`ClientInstance`); clients with
            different contexts get different instances.
        credentials: The ACL account to sign with, or ``None``.
        **options: Constructor options (``clock``, timeouts...), used only when a new
            instance is made.

    Returns:
        The instance (not started; call :meth:`ClientInstance.start`), one more ref.
    """
    context = resolve_tls(tls)
    key = (asyncio.get_running_loop(), namesrv, instance_name, context, credentials)
    inst = _registry.get(key)
    if inst is None or inst.closed:
        inst = ClientInstance(
            namesrv, instance_name=instance_name, tls=context, credentials=credentials, **options
        )
        inst._registry_key = key
        _registry[key] = inst
    inst._refs += 1
    return inst
