"""Closing connections that stay silent both ways (``serverChannelMaxIdleTimeSeconds``).

RocketMQ closes a server channel when nothing was read from or written to it for 120 s
(Netty's ``IdleStateHandler``). Live clients never get there: they send a heartbeat or a
route query every 30 s. What does is a peer that vanished without a FIN or a reset (a
machine powered off, a NAT that forgot the flow) or one that connected and never spoke:
each would hold a descriptor and a connection for the life of the server.

The kernel already keeps the time of the last data in and out of each TCP socket
(``TCP_INFO``'s ``tcpi_last_data_recv`` and ``tcpi_last_data_sent``, in ms), so the read
and write paths pay nothing: a sweep asks it for every connection a few times per idle
period. Where ``TCP_INFO`` is missing (not Linux), nothing is closed.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable, Collection
from typing import Final, Protocol

from rocklet.transport.logs import get_logger
from rocklet.transport.tasks import BackgroundTasks

__all__ = ["IdleSweeper", "silent_ms"]

log = get_logger(__name__)

_TCP_INFO: Final = getattr(socket, "TCP_INFO", None)
#: ``tcpi_last_data_sent`` .. ``tcpi_last_ack_recv`` (four __u32) in ``struct tcp_info``:
#: after 8 one-byte fields and 9 __u32 ones; stable kernel ABI since Linux 2.6.
_TIMES: Final = struct.Struct("=IIII")
_TIMES_AT: Final = 44
_INFO_SIZE: Final = _TIMES_AT + _TIMES.size
#: How many sweeps per idle period: a connection closes at most this fraction late.
_SWEEPS_PER_PERIOD: Final = 4


class _Closable(Protocol):
    """What the sweeper needs of a :class:`~rocklet.transport.connection.Connection`."""

    @property
    def transport(self) -> asyncio.Transport | None: ...

    @property
    def peer_address(self) -> str | None: ...

    async def close(self) -> None: ...


def silent_ms(transport: asyncio.BaseTransport) -> int | None:
    """How long a TCP connection has carried no data either way, in ms.

    Returns:
        The smaller of the times since data was last received and last sent, or
        ``None`` when the kernel cannot tell (no ``TCP_INFO``, not a TCP socket).
    """
    sock = transport.get_extra_info("socket")
    if _TCP_INFO is None or sock is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _INFO_SIZE)
    except OSError:
        return None
    if len(info) < _INFO_SIZE:
        return None
    last_sent, _ack_sent, last_received, _ack_received = _TIMES.unpack_from(info, _TIMES_AT)
    return int(min(last_sent, last_received))


class IdleSweeper:
    """Closes the connections of a server that carried no data for ``idle_s``.

    Args:
        connections: Returns the server's open connections.
        idle_s: The idle period; 0 or less: never close (no task runs).
        name: The server's name, for the log.
    """

    def __init__(
        self, connections: Callable[[], Collection[_Closable]], idle_s: float, name: str
    ) -> None:
        self._connections = connections
        self._idle_ms = int(idle_s * 1000)
        self._name = name
        self._tasks = BackgroundTasks(f"{name}-idle")
        self._started = False

    def start(self) -> None:
        """Start sweeping (when an idle period is set). Event loop only."""
        if self._idle_ms > 0 and _TCP_INFO is not None and not self._started:
            self._started = True
            self._tasks.every(self._idle_ms / 1000 / _SWEEPS_PER_PERIOD, self._step, "sweep")

    async def stop(self) -> None:
        """Stop sweeping (and closing)."""
        await self._tasks.cancel_all()

    def sweep(self) -> int:
        """Start closing every connection silent for the idle period. Event loop only.

        Returns:
            How many were closed.
        """
        closed = 0
        for conn in list(self._connections()):
            transport = conn.transport
            if transport is None or transport.is_closing():
                continue
            silent = silent_ms(transport)
            if silent is not None and silent >= self._idle_ms:
                log.info(
                    "closing an idle connection",
                    server=self._name,
                    peer=conn.peer_address,
                    silent_s=silent // 1000,
                )
                self._tasks.spawn(conn.close(), "close")
                closed += 1
        return closed

    async def _step(self) -> None:
        self.sweep()
