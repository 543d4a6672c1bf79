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
        self._sock = sock
        self._guard = guard
        self._callback = callback
        self._loop = asyncio.get_running_loop()
        self._opening: set[asyncio.Task[None]] = set()
        self._accepting = self._loop.create_task(self._accept_loop(), name="ha-accept")

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
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, kind, proto, _canon, addr = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
            sock.listen(128)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        return cls(sock, guard, callback)

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._sock.getsockname()[1])

    def close(self) -> None:
        """Stop accepting; drop connections not yet handed over. Idempotent."""
        self._accepting.cancel()
        for task in list(self._opening):
            task.cancel()
        self._sock.close()

    async def wait_closed(self) -> None:
        """Return once the accept loop and the connections being opened have ended."""
        await asyncio.gather(self._accepting, *self._opening, return_exceptions=True)

    async def _accept_loop(self) -> None:
        while True:
            try:
                conn, _addr = await self._loop.sock_accept(self._sock)
            except OSError as exc:
                log.warning("HA accept failed; retrying", error=str(exc))
                await asyncio.sleep(1.0)  # out of descriptors: asyncio's own pause
                continue
            task = self._loop.create_task(self._open(conn))
            self._opening.add(task)
            task.add_done_callback(self._opening.discard)

    async def _open(self, conn: socket.socket) -> None:
        conn.setblocking(False)
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
        task = asyncio.current_task()
        if task is not None:
            self._opening.discard(task)
        with contextlib.suppress(ConnectionError):
            await self._callback(reader, writer)
