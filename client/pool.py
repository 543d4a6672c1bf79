"""One connection per address, opened on first use, with reconnect backoff.

Concurrent first uses of an address share one connect. A failed connect puts the
address in exponential backoff (:mod:`rocklet.client.backoff`); until it expires, asking for
that address fails at once with :class:`ConnectError`, so a producer moves on to
another broker instead of paying a connect timeout on every send (RocketMQ's clients
retry the connect on each call, which is what makes a dead broker so costly there).
A closed connection is dropped from the pool and the next use reconnects.

The pool also sends requests (:meth:`ConnectionPool.invoke`): everything else in the
client instance reaches a broker or name server through it.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from rocklet.client.backoff import Backoff, BackoffState
from rocklet.client.errors import ClientStateError, ConnectError
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.clock import SYSTEM_CLOCK, Clock
from rocklet.transport.connection import Connection, RequestHandler
from rocklet.transport.dial import open_connection

__all__ = ["ConnectionPool", "Invoke", "OpenHook", "RequestHook", "Spawner"]

#: Runs a coroutine as an owned task.
Spawner = Callable[[Coroutine[Any, Any, Any], str], "asyncio.Task[Any]"]
#: Called with each newly opened connection's address before anyone else uses it.
OpenHook = Callable[[str], Awaitable[None]]
#: Rewrites each outgoing request just before it is sent (Java's client ``RPCHook``
#: ``doBeforeRequest``; ACL signing).
RequestHook = Callable[[RemotingCommand], RemotingCommand]


class Invoke(Protocol):
    """Sends a request to ``addr`` and returns the answer (:meth:`ConnectionPool.invoke`)."""

    def __call__(
        self, addr: str, cmd: RemotingCommand, timeout_s: float | None = None
    ) -> Awaitable[RemotingCommand]:
        """Send ``cmd`` to ``addr``; ``timeout_s`` defaults to the pool's request timeout."""
        ...


class ConnectionPool:
    """Connections by ``"host:port"``.

    Args:
        handler: Handles requests the peers send us.
        spawn: Runs connects as tasks owned by the caller.
        request_timeout_s: Default answer timeout of :meth:`invoke`.
        connect_timeout_s: TCP connect timeout.
        backoff: Reconnect delay policy.
        clock: Times the reconnect backoff (monotonic).
        tls: Connect over TLS with this context (the server name checked is each
            address's host); ``None``: plain TCP.
    """

    def __init__(
        self,
        handler: RequestHandler,
        spawn: Spawner,
        *,
        request_timeout_s: float = 3.0,
        connect_timeout_s: float = 3.0,
        backoff: Backoff | None = None,
        clock: Clock = SYSTEM_CLOCK,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._handler = handler
        self._tls = tls
        self._spawn = spawn
        self.request_timeout_s = request_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._backoff = backoff or Backoff()
        self._clock = clock
        self._conns: dict[str, Connection] = {}
        self._opening: dict[str, asyncio.Task[Connection]] = {}
        self._failures: dict[str, BackoffState] = {}
        # The last connect error per address in backoff: what a refused attempt reports.
        self._last_error: dict[str, str] = {}
        self._closed = False
        #: Runs on each new connection before it is handed out (the heartbeat).
        self.on_open: OpenHook | None = None
        #: Applied to every request :meth:`invoke` and :meth:`invoke_oneway` send.
        self.request_hook: RequestHook | None = None

    def peek(self, addr: str) -> Connection | None:
        """The open connection to ``addr``, if there is one (no I/O)."""
        conn = self._conns.get(addr)
        return conn if conn is not None and conn.is_open else None

    async def get(self, addr: str) -> Connection:
        """The open connection to ``addr``, connecting if needed.

        Raises:
            ConnectError: The connect failed, or ``addr`` is in reconnect backoff.
            ClientStateError: The pool is closed.
        """
        conn = self._conns.get(addr)
        if conn is not None and conn.is_open:
            return conn
        opening = self._opening.get(addr)
        if opening is None:
            if self._closed:
                raise ClientStateError("client instance is closed")
            state = self._failures.get(addr)
            now = self._clock.monotonic_ms() / 1000
            if state is not None and not state.may_attempt(now):
                last = self._last_error.get(addr, f"cannot connect to {addr}")
                raise ConnectError(
                    f"{last} (not trying {addr} again for another "
                    f"{state.retry_at - now:.2f} s after {state.failures} failed attempt(s))",
                    peer=addr,
                )
            opening = self._spawn(self._open(addr), f"connect-{addr}")
            self._opening[addr] = opening
        # shield: one caller giving up must not cancel the connect the others wait on.
        return await asyncio.shield(opening)

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
            ClientStateError: The pool is closed.
        """
        conn = self.peek(addr) or await self.get(addr)
        if self.request_hook is not None:
            cmd = self.request_hook(cmd)
        return await conn.request(cmd, self.request_timeout_s if timeout_s is None else timeout_s)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        """Send a request that gets no answer.

        Raises:
            ConnectError: The connection cannot be opened.
            ConnectionClosedError: The connection is closed.
            RequestTimeoutError: The connection stayed congested too long.
        """
        conn = self.peek(addr) or await self.get(addr)
        if self.request_hook is not None:
            cmd = self.request_hook(cmd)
        await conn.send_oneway(cmd, self.request_timeout_s)

    async def _open(self, addr: str) -> Connection:
        try:
            host, _, port = addr.rpartition(":")
            try:
                conn = await open_connection(
                    host,
                    int(port),
                    handler=self._handler,
                    connect_timeout_s=self._connect_timeout_s,
                    # Pipelined sends: one syscall per loop iteration, not per request.
                    coalesce_writes=True,
                    tls=self._tls,
                )
            except ConnectError as exc:
                state = self._failures.setdefault(addr, BackoffState(self._backoff))
                state.failed(self._clock.monotonic_ms() / 1000)
                self._last_error[addr] = str(exc)
                raise
            self._failures.pop(addr, None)
            self._last_error.pop(addr, None)
            conn.attributes["addr"] = addr
            conn.add_close_callback(self._dropped)
            if self._closed:
                await conn.close()
                raise ClientStateError("client instance is closed")
            self._conns[addr] = conn
            if self.on_open is not None:
                await self.on_open(addr)
            return conn
        finally:
            self._opening.pop(addr, None)

    def _dropped(self, conn: Connection) -> None:
        addr = conn.attributes.get("addr")
        if isinstance(addr, str) and self._conns.get(addr) is conn:
            del self._conns[addr]

    async def close(self) -> None:
        """Close every connection; later :meth:`get` calls fail."""
        self._closed = True
        conns, self._conns = list(self._conns.values()), {}
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
