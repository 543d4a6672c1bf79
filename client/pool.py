"""One connection per address, opened on first use, with reconnect backoff.

Concurrent first uses of an address share one connect. A failed connect puts the
address in exponential backoff (:mod:`rocklet.client.backoff`); until it expires, asking for
that address fails at once with :class:`ConnectError`, so a producer moves on to
another broker instead of paying a connect timeout on every send (RocketMQ's clients
retry the connect on each call, which is what makes a dead broker so costly there).
A closed connection is dropped from the pool and the next use reconnects.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from rocklet.client.backoff import Backoff, BackoffState
from rocklet.client.errors import ClientStateError, ConnectError
from rocklet.transport.connection import Connection, RequestHandler, open_connection

__all__ = ["ConnectionPool"]

#: Runs a coroutine as an owned task.
Spawner = Callable[[Coroutine[Any, Any, Any], str], "asyncio.Task[Any]"]
#: Called with each newly opened connection's address before anyone else uses it.
OpenHook = Callable[[str], Awaitable[None]]


class ConnectionPool:
    """Connections by ``"host:port"``.

    Args:
        handler: Handles requests the peers send us.
        spawn: Runs connects as tasks owned by the caller.
        connect_timeout_s: TCP connect timeout.
        backoff: Reconnect delay policy.
    """

    def __init__(
        self,
        handler: RequestHandler,
        spawn: Spawner,
        *,
        connect_timeout_s: float = 3.0,
        backoff: Backoff | None = None,
    ) -> None:
        self._handler = handler
        self._spawn = spawn
        self._connect_timeout_s = connect_timeout_s
        self._backoff = backoff or Backoff()
        self._conns: dict[str, Connection] = {}
        self._opening: dict[str, asyncio.Task[Connection]] = {}
        self._failures: dict[str, BackoffState] = {}
        self._closed = False
        #: Runs on each new connection before it is handed out (the heartbeat).
        self.on_open: OpenHook | None = None

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
            now = time.monotonic()
            if state is not None and not state.may_attempt(now):
                raise ConnectError(
                    f"not reconnecting to {addr} for another {state.retry_at - now:.2f} s "
                    f"after {state.failures} failed attempt(s)",
                    peer=addr,
                )
            opening = self._spawn(self._open(addr), f"connect-{addr}")
            self._opening[addr] = opening
        # shield: one caller giving up must not cancel the connect the others wait on.
        return await asyncio.shield(opening)

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
                )
            except ConnectError:
                state = self._failures.setdefault(addr, BackoffState(self._backoff))
                state.failed(time.monotonic())
                raise
            self._failures.pop(addr, None)
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
