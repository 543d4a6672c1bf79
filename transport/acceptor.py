"""Accepting on a raw listening socket, each new socket handed to a coroutine.

``loop.create_server`` makes a transport for every accepted socket at once. Two
listeners must look at a socket before that: the remoting server with TLS on peeks the
first byte to tell TLS from plain (:mod:`rocklet.transport.tls_accept`), and a master's
HA port checks the peer's address before anything is read (``rocklet.broker.ha``). Both
bind with :func:`bind_listening` and accept with a :class:`SocketAcceptor`, which runs
one task per accepted socket until the coroutine has handed it over (or closed it).
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Final

from rocklet.transport.logs import get_logger

__all__ = ["SocketAcceptor", "bind_listening"]

_log = get_logger(__name__)

#: Pause before accepting again after accept() failed for want of descriptors or
#: memory (asyncio's own accept loop waits 1 s too).
_ACCEPT_RETRY_S: Final = 1.0
_OUT_OF_RESOURCES: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

Serve = Callable[[socket.socket], Coroutine[Any, Any, None]]


async def bind_listening(
    host: str, port: int, *, backlog: int, buffer_sizes: Mapping[int, int] | None = None
) -> socket.socket:
    """Bind ``host:port`` (the first address it resolves to) and listen, non-blocking.

    Args:
        host: Address to bind (empty: every interface).
        port: Port; 0 picks a free one.
        backlog: The listen backlog.
        buffer_sizes: Socket option (``SO_RCVBUF``...) to size; 0 keeps the kernel's
            (accepted sockets inherit them).

    Returns:
        The listening socket.

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
        for option, size in (buffer_sizes or {}).items():
            if size > 0:
                sock.setsockopt(socket.SOL_SOCKET, option, size)
        sock.bind(addr)
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class SocketAcceptor:
    """Accepts on ``sock`` until :meth:`close`, running ``serve(conn)`` for each socket.

    Args:
        sock: A bound, listening, non-blocking socket (owned from here on).
        serve: Takes an accepted, non-blocking socket; it hands it over or closes it.
        name: The listener's name in log lines and its task's name.
    """

    def __init__(self, sock: socket.socket, serve: Serve, name: str) -> None:
        self._sock = sock
        self._serve = serve
        self._name = name
        self._loop = asyncio.get_running_loop()
        self._serving: set[asyncio.Task[None]] = set()
        self._accepting = self._loop.create_task(self._accept_loop(), name=f"{name}-accept")

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._sock.getsockname()[1])

    def close(self) -> None:
        """Stop accepting and drop the sockets not handed over yet; idempotent."""
        self._accepting.cancel()
        for task in list(self._serving):
            task.cancel()
        self._sock.close()

    def handed_over(self) -> None:
        """Called by a ``serve`` coroutine whose socket now belongs to its owner.

        :meth:`close` then no longer cancels it: the rest of that task is the owner's
        connection (its own stop ends it).
        """
        task = asyncio.current_task()
        if task is not None:
            self._serving.discard(task)

    async def wait_closed(self) -> None:
        """Return once the accept loop and every ``serve`` task have ended."""
        await asyncio.gather(self._accepting, *self._serving, return_exceptions=True)

    async def _accept_loop(self) -> None:
        loop = self._loop
        while True:
            try:
                conn, _addr = await loop.sock_accept(self._sock)
            except OSError as exc:
                if exc.errno not in _OUT_OF_RESOURCES:
                    raise
                _log.warning("accept failed; retrying", server=self._name, error=str(exc))
                await asyncio.sleep(_ACCEPT_RETRY_S)
                continue
            conn.setblocking(False)
            task = loop.create_task(self._serve(conn))
            self._serving.add(task)
            task.add_done_callback(self._serving.discard)
