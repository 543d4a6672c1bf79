"""The master's HA listening socket: address check, then TLS, then the streams.

Each accepted socket is checked against ``haAllowedSlaves`` before anything is read
from it; an allowed one is handed to ``loop.connect_accepted_socket``, with the
broker's TLS context when the HA port speaks TLS, so the TLS stack reads the
ClientHello from the socket itself (upgrading a stream later with ``start_tls`` loses
bytes already read: a slave sends its ClientHello at once). Only then does the
master's callback get the streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable

import structlog

from rocklet.broker.ha.guard import HAGuard
from rocklet.transport.acceptor import SocketAcceptor, bind_listening

__all__ = ["HAListener"]

log = structlog.get_logger(__name__)

_Callback = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
#: Longest a TLS handshake may take.
_TLS_TIMEOUT_S = 10.0


class HAListener:
    """Accepts slaves for :class:`~rocklet.broker.ha.master.HAMaster`.

    Create with :meth:`open`; it accepts until :meth:`close`.

    Args:
        sock: A bound, listening, non-blocking socket.
        guard: The admission rules (address and TLS are checked here).
        callback: Gets the streams of an admitted connection (the handshake is its job).
    """

    def __init__(self, sock: socket.socket, guard: HAGuard, callback: _Callback) -> None:
        self._guard = guard
        self._callback = callback
        self._loop = asyncio.get_running_loop()
        self._acceptor = SocketAcceptor(sock, self._open, "ha")

    @classmethod
    async def open(cls, host: str, port: int, guard: HAGuard, callback: _Callback) -> HAListener:
        """Bind ``host:port`` (the first address it resolves to) and start accepting.

        Args:
            host: Interface.
            port: Port (0: any free port).
            guard: The admission rules.
            callback: Gets each admitted connection's streams.

        Returns:
            The listener.

        Raises:
            OSError: The address cannot be bound.
        """
        sock = await bind_listening(host, port, backlog=128)
        return cls(sock, guard, callback)

    @property
    def port(self) -> int:
        """The bound port."""
        return self._acceptor.port

    def close(self) -> None:
        """Stop accepting; drop connections not yet handed over. Idempotent."""
        self._acceptor.close()

    async def wait_closed(self) -> None:
        """Return once the accept loop and the connections being opened have ended."""
        await self._acceptor.wait_closed()

    async def _open(self, conn: socket.socket) -> None:
        try:
            host, port = conn.getpeername()[:2]
        except OSError:
            conn.close()
            return
        who = f"{host}:{port}"
        try:
            allowed = await self._guard.allowed.allows(str(host))
        except BaseException:
            conn.close()
            raise
        if not allowed:
            conn.close()
            self._guard.refusals.warn(
                "HA connection refused: address not in haAllowedSlaves",
                peer=who,
                allowed=self._guard.allowed.text,
            )
            return
        tls = self._guard.tls
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        try:
            transport, _ = await self._loop.connect_accepted_socket(
                lambda: protocol,
                conn,
                ssl=None if tls is None else tls.context(),
                ssl_handshake_timeout=None if tls is None else _TLS_TIMEOUT_S,
            )
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            conn.close()
            stage = "connection lost" if tls is None else "TLS handshake failed"
            self._guard.refusals.warn(
                "HA connection refused", peer=who, reason=f"{stage}: {exc or type(exc).__name__}"
            )
            return
        writer = asyncio.StreamWriter(transport, protocol, reader, self._loop)
        # Handed over: from here the master owns (and stops) the connection.
        self._acceptor.handed_over()
        with contextlib.suppress(ConnectionError):
            await self._callback(reader, writer)
