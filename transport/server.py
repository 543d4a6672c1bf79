"""The asyncio TCP server that accepts remoting connections and dispatches their requests."""

from __future__ import annotations

import asyncio
import errno
import socket
from functools import partial
from typing import Final

from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.frame import DEFAULT_MAX_FRAME_SIZE
from rocklet.transport.connection import Connection
from rocklet.transport.dispatch import ProcessorRegistry, dispatch, dispatch_now
from rocklet.transport.flow import FlowLimits, ServerLoad
from rocklet.transport.idle import IdleSweeper
from rocklet.transport.logs import get_logger
from rocklet.transport.tls import ServerTls
from rocklet.transport.tls_accept import SniffingListener

__all__ = ["DEFAULT_GRACE_S", "RemotingServer", "probe_port"]

_log = get_logger(__name__)

#: How long stop() lets in-flight requests finish by default.
DEFAULT_GRACE_S: Final = 5.0
_SHUTTING_DOWN: Final = "server is shutting down"


class RemotingServer:
    """Accepts connections and hands each request to the registry's processor.

    Every accepted socket becomes a :class:`~rocklet.transport.connection.Connection`, so the
    server shares the framing, flow control and broker-to-client requests of the SDK.
    Accepted connections coalesce their writes (all the answers to one read leave in
    one send) and start the processors registered as eager inline
    (:meth:`ProcessorRegistry.register`). A flooding client is pushed back and cannot
    starve the others (:mod:`rocklet.transport.flow`).

    Args:
        host: Address to bind (``"0.0.0.0"`` for every interface).
        port: Port to bind; 0 picks a free one (see :attr:`port`).
        registry: Processors by request code.
        max_frame_size: Largest accepted frame. Default: 16 MiB.
        high_water: Per-connection write-buffer high-water mark in bytes; above it the
            server stops reading that connection. Default: the transport's (64 KiB).
        name: Name used in log lines (``"broker"``, ``"namesrv"``).
        limits: How much work the server takes in before pushing back. Default:
            :class:`FlowLimits`'s defaults, shedding nothing.
        socket_rcvbuf: SO_RCVBUF of accepted sockets in bytes (RocketMQ's
            ``serverSocketRcvBufSize``): how much a client can have in flight to us
            beyond what we read; 0 leaves the kernel's default. Default: 0.
        socket_sndbuf: SO_SNDBUF of accepted sockets in bytes
            (``serverSocketSndBufSize``); 0 leaves the kernel's default. Default: 0.
        tls: TLS mode and certificate (:mod:`rocklet.transport.tls`), permissive or
            enforcing; each socket's first byte picks TLS or plain
            (:mod:`rocklet.transport.tls_accept`). ``None`` (TLS disabled) serves plain
            TCP only, through ``loop.create_server``. Default: ``None``.
        idle_s: Close a connection that carried no data either way for this long
            (RocketMQ's ``serverChannelMaxIdleTimeSeconds``; :mod:`rocklet.transport.idle`);
            0: never. Default: 0.
    """

    def __init__(
        self,
        host: str,
        port: int,
        registry: ProcessorRegistry,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        high_water: int | None = None,
        name: str = "remoting",
        limits: FlowLimits | None = None,
        socket_rcvbuf: int = 0,
        socket_sndbuf: int = 0,
        tls: ServerTls | None = None,
        idle_s: float = 0,
    ) -> None:
        self._host = host
        self._requested_port = port
        self._registry = registry
        self._max_frame_size = max_frame_size
        self._high_water = high_water
        self._name = name
        self._server: asyncio.Server | SniffingListener | None = None
        self._tls = tls
        self._port = 0
        self._connections: set[Connection] = set()
        self._stopping = False
        self._limits = FlowLimits() if limits is None else limits
        self._load = ServerLoad(self._limits)
        self._buffer_sizes = {socket.SO_RCVBUF: socket_rcvbuf, socket.SO_SNDBUF: socket_sndbuf}
        self._idle = IdleSweeper(lambda: self._connections, idle_s, name)

    @property
    def host(self) -> str:
        """The bind address."""
        return self._host

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked); 0 before :meth:`start`."""
        return self._port

    @property
    def registry(self) -> ProcessorRegistry:
        """The processors by request code."""
        return self._registry

    @property
    def connections(self) -> frozenset[Connection]:
        """The connections currently open."""
        return frozenset(self._connections)

    @property
    def load(self) -> ServerLoad:
        """The handlers in flight across all connections, and the requests shed."""
        return self._load

    @property
    def tls(self) -> ServerTls | None:
        """The TLS settings and context, or ``None`` when TLS is disabled."""
        return self._tls

    @property
    def tls_mode(self) -> str:
        """``"disabled"``, ``"permissive"`` or ``"enforcing"``."""
        return "disabled" if self._tls is None else str(self._tls.mode)

    @property
    def is_serving(self) -> bool:
        """Whether the server accepts connections."""
        return self._server is not None and not self._stopping

    async def start(self) -> None:
        """Bind and start accepting; returns once the socket is listening.

        Raises:
            RuntimeError: The server was already started.
            OSError: The address cannot be bound.
        """
        if self._server is not None:
            raise RuntimeError(f"{self._name} server already started")
        if self._tls is not None:
            listener = await SniffingListener.open(
                self._host,
                self._requested_port,
                self._new_connection,
                self._tls,
                name=self._name,
                buffer_sizes=self._buffer_sizes,
            )
            self._server, self._port = listener, listener.port
        else:
            self._server = server = await asyncio.get_running_loop().create_server(
                self._new_connection, self._host, self._requested_port, reuse_address=True
            )
            # Accepted sockets inherit the listener's buffer sizes (Linux, BSD), and a
            # receive buffer set before a connection's SYN sizes its window scale too.
            for sock in server.sockets:
                for option, size in self._buffer_sizes.items():
                    if size > 0:
                        sock.setsockopt(socket.SOL_SOCKET, option, size)
            self._port = int(server.sockets[0].getsockname()[1])
        self._idle.start()
        _log.debug(
            "remoting server listening",
            server=self._name,
            host=self._host,
            port=self._port,
            tls=self.tls_mode,
        )

    async def stop(self, grace_s: float = DEFAULT_GRACE_S) -> None:
        """Stop gracefully; safe to call more than once.

        Stops accepting, turns away new requests with SYSTEM_BUSY, lets requests in
        flight finish for up to ``grace_s`` seconds, then closes every connection
        (cancelling what is still running).

        Args:
            grace_s: Longest wait for in-flight requests, in seconds.
        """
        if self._server is None or self._stopping:
            return
        self._stopping = True
        await self._idle.stop()
        self._server.close()
        connections = list(self._connections)
        for conn in connections:
            conn.refuse_requests(ResponseCode.SYSTEM_BUSY, _SHUTTING_DOWN)
        finished = await asyncio.gather(*(c.wait_handlers(grace_s) for c in connections))
        if not all(finished):
            _log.warning("grace period over; cancelling requests in flight", server=self._name)
        await asyncio.gather(*(c.close() for c in connections))
        await self._server.wait_closed()
        _log.debug("remoting server stopped", server=self._name, port=self._port)

    async def __aenter__(self) -> RemotingServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def _new_connection(self) -> Connection:
        # Coalesced writes: a pipelining client gets all the answers to one read in one
        # send syscall. Eager codes: a processor registered as eager that answers
        # without waiting (most sends and pulls) costs no task. Late codes: requests
        # that usually wait (long-polling pulls) go after the rest of their read.
        conn = Connection(
            handler=partial(dispatch, self._registry),
            handle_now=partial(dispatch_now, self._registry),
            max_frame_size=self._max_frame_size,
            high_water=self._high_water,
            coalesce_writes=True,
            eager_codes=self._registry.eager_codes,
            late_codes=self._registry.late_codes,
            limits=self._limits,
            load=self._load,
        )
        self._connections.add(conn)
        conn.add_close_callback(self._connections.discard)
        return conn


def probe_port(host: str, port: int) -> None:
    """Fail now, as the server's bind would later, when ``port`` is taken on ``host``.

    A broker opens (and may recover) its store before it binds: a port another
    process holds would otherwise be found only after minutes of recovery. The probe
    binds as the server does (``SO_REUSEADDR``) and closes at once; port 0 is not
    probed.

    Raises:
        OSError: The bind's error; "address already in use" reads as the server's own.
    """
    if port <= 0:
        return
    for family, kind, proto, _name, addr in socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    ):
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(addr)
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                raise OSError(
                    errno.EADDRINUSE,
                    f"error while attempting to bind on address {addr[:2]!r}: "
                    "address already in use",
                ) from None
