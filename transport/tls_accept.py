"""Accepting TLS and plain TCP on one port, told apart by the first byte.

RocketMQ's ``NettyRemotingServer.HandshakeHandler`` reads a new channel's first byte:
``0x16`` (a TLS handshake record) gets an ``SslHandler``, anything else is plain
remoting, and the server's ``tls.server.mode`` refuses one or the other.

asyncio cannot put TLS under a protocol that has already read bytes (``start_tls``
would lose the ClientHello), so the choice is made before a transport exists: each
accepted socket waits until it is readable, its first byte is *peeked* (``MSG_PEEK``
leaves it in the kernel), and the socket is handed to
``loop.connect_accepted_socket`` with or without the server's TLS context. Either way
the protocol is the server's usual one, and the TLS stack reads the ClientHello from
the socket as if nothing had looked. This costs one task and one ``recv`` per
connection, nothing per request; a server with TLS disabled does not use this module
at all (:class:`~rocklet.transport.server.RemotingServer` keeps ``loop.create_server``).

A socket that sends nothing, or starts a handshake and stalls, is closed after the
handshake timeout, so a hostile client holds nothing for long.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable

from rocklet.transport.acceptor import SocketAcceptor, bind_listening
from rocklet.transport.logs import get_logger
from rocklet.transport.tls import TLS_RECORD_HANDSHAKE, ServerTls, TlsMode

__all__ = ["SniffingListener"]

_log = get_logger(__name__)


class SniffingListener:
    """A listening socket whose connections are TLS or plain by their first byte.

    Create with :meth:`open`; it accepts until :meth:`close`.

    Args:
        sock: A bound, listening, non-blocking socket.
        factory: Makes the protocol of each connection (plain or TLS alike).
        tls: The mode and the reloading context.
        name: The server's name in log lines.
    """

    def __init__(
        self,
        sock: socket.socket,
        factory: Callable[[], asyncio.BaseProtocol],
        tls: ServerTls,
        name: str,
    ) -> None:
        self._factory = factory
        self._tls = tls
        self._name = name
        self._loop = asyncio.get_running_loop()
        self._acceptor = SocketAcceptor(sock, self._serve, name)
        #: Connections refused because of their kind (plain in enforcing mode), and
        #: handshakes that failed or timed out (metrics, and what the tests read).
        self.refused = 0
        self.failed_handshakes = 0

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        factory: Callable[[], asyncio.BaseProtocol],
        tls: ServerTls,
        *,
        name: str,
        buffer_sizes: dict[int, int],
        backlog: int = 1024,
    ) -> SniffingListener:
        """Bind ``host:port`` (the first address it resolves to) and start accepting.

        Args:
            host: Address to bind.
            port: Port; 0 picks a free one.
            factory: Makes each connection's protocol.
            tls: The mode and the context.
            name: The server's name in log lines.
            buffer_sizes: Socket option (``SO_RCVBUF``...) to size; 0 keeps the kernel's.
            backlog: The listen backlog.

        Returns:
            The listener.

        Raises:
            OSError: The address cannot be bound.
        """
        sock = await bind_listening(host, port, backlog=backlog, buffer_sizes=buffer_sizes)
        return cls(sock, factory, tls, name)

    @property
    def port(self) -> int:
        """The bound port."""
        return self._acceptor.port

    def close(self) -> None:
        """Stop accepting and drop the sockets still being sniffed; idempotent."""
        self._acceptor.close()

    async def wait_closed(self) -> None:
        """Return once the accept loop and every sniffing task have ended."""
        await self._acceptor.wait_closed()

    async def _serve(self, conn: socket.socket) -> None:
        peer = _peer(conn)
        try:
            first = await self._first_byte(conn)
        except (TimeoutError, OSError) as exc:
            conn.close()
            self.failed_handshakes += 1
            _log.info(
                "closing connection: nothing received",
                server=self._name,
                peer=peer,
                error=str(exc) or type(exc).__name__,
            )
            return
        except BaseException:
            conn.close()
            raise
        if first is None:  # closed before saying anything
            conn.close()
            return
        if first == TLS_RECORD_HANDSHAKE:
            tls = self._tls
            await self._hand_over(conn, peer, tls.context(), tls.handshake_timeout_s)
        elif self._tls.mode is TlsMode.ENFORCING:
            conn.close()
            self.refused += 1
            _log.info(
                "closing plain connection: this server requires TLS (enforcing)",
                server=self._name,
                peer=peer,
            )
        else:
            await self._hand_over(conn, peer, None, None)

    async def _hand_over(
        self,
        conn: socket.socket,
        peer: str,
        context: ssl.SSLContext | None,
        handshake_timeout_s: float | None,
    ) -> None:
        """Make the transport (after the TLS handshake, with a context) and the protocol."""
        made: list[asyncio.BaseProtocol] = []

        def factory() -> asyncio.BaseProtocol:
            made.append(self._factory())
            return made[-1]

        try:
            await self._loop.connect_accepted_socket(
                factory, conn, ssl=context, ssl_handshake_timeout=handshake_timeout_s
            )
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            conn.close()
            # The protocol may have been made and never connected: end it, so whoever
            # tracks it (the server's connection set) lets it go.
            for protocol in made:
                protocol.connection_lost(exc)
            if context is None:
                _log.info(
                    "connection lost while opening", server=self._name, peer=peer, error=str(exc)
                )
                return
            self.failed_handshakes += 1
            _log.info(
                "TLS handshake failed",
                server=self._name,
                peer=peer,
                error=str(exc) or type(exc).__name__,
            )

    async def _first_byte(self, conn: socket.socket) -> int | None:
        """Wait for the socket's first byte and peek it, or ``None`` at EOF."""
        loop = self._loop
        fd = conn.fileno()
        async with asyncio.timeout(self._tls.handshake_timeout_s):
            while True:
                readable: asyncio.Future[None] = loop.create_future()
                loop.add_reader(fd, _set_done, readable)
                try:
                    await readable
                finally:
                    loop.remove_reader(fd)
                try:
                    data = conn.recv(1, socket.MSG_PEEK)
                except (BlockingIOError, InterruptedError):
                    continue  # woken without data (spurious readiness)
                return data[0] if data else None


def _set_done(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _peer(conn: socket.socket) -> str:
    try:
        host, port = conn.getpeername()[:2]
    except OSError:
        return "?"
    return f"{host}:{port}"
