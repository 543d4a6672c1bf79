"""Limits on the work a remoting server takes in: per connection, per read, and in total.

A client that writes requests faster than they are answered, or never reads the
answers, must neither starve the other clients nor make the server buffer without
bound. Three mechanisms, each cheap on the hot path (a few integer operations per
request, none at all for a request answered inline):

- *Handlers in flight per connection*: a request whose handler suspends (a SYNC_FLUSH
  send waiting for its group commit, a task-based processor) counts as in flight until
  it is answered. At :attr:`FlowLimits.max_in_flight_per_connection` the connection
  stops reading (TCP pushes back on the client) and reads again once half of them are
  done. Requests parked on purpose (a long-polling pull) do not count: a push consumer
  holds one per queue (:meth:`~rocklet.transport.connection.Connection.parked`).
- *Requests per read turn*: one read callback handles at most
  :attr:`FlowLimits.requests_per_turn` requests; the rest of a big pipelined read waits
  for the next event-loop pass, so the loop serves the other sockets in between.
- *Server-wide shedding*: when the handlers in flight across all connections reach a
  code's limit (:attr:`FlowLimits.shed_limits`, RocketMQ's thread-pool queue
  capacities), a new request of that code is answered SYSTEM_BUSY with the remark of
  RocketMQ's rejected execution, and never runs. The producer takes SYSTEM_BUSY as
  "try another broker".

The write-buffer high-water mark (the peer does not read our answers) pauses reading
too; see :class:`~rocklet.transport.connection.Connection`.
"""

from __future__ import annotations

import asyncio
import asyncio.selector_events
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.command import RemotingCommand

__all__ = [
    "OVERLOAD_REMARK",
    "FlowLimits",
    "ServerLoad",
    "writelines_pause_check",
]

#: RocketMQ's answer when a request finds its thread pool's queue full
#: (``NettyRemotingAbstract.processRequestCommand``).
OVERLOAD_REMARK: Final = "[OVERLOAD]system busy, start flow control for a while"
#: Handlers in flight per connection before it stops reading.
DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION: Final = 256
#: Requests one read callback handles before yielding to the event loop.
DEFAULT_REQUESTS_PER_TURN: Final = 64
#: Stands for "no limit" in the hot-path comparisons (an int, so they stay int ones).
NO_LIMIT: Final = sys.maxsize


@dataclass(frozen=True, slots=True)
class FlowLimits:
    """How much work a server takes in before it pushes back.

    Attributes:
        max_in_flight_per_connection: Requests of one connection being handled at
            once (parked pulls excluded) before it stops reading; 0 = no limit.
        requests_per_turn: Requests handled per read callback before the rest waits
            for the next event-loop pass; 0 = no limit.
        shed_limits: Request code to the number of handlers in flight, server-wide, at
            which a new request of that code is answered SYSTEM_BUSY instead of run.
    """

    max_in_flight_per_connection: int = DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION
    requests_per_turn: int = DEFAULT_REQUESTS_PER_TURN
    shed_limits: Mapping[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_in_flight_per_connection < 0 or self.requests_per_turn < 0:
            raise ValueError("flow limits must be >= 0 (0 = no limit)")
        if any(limit < 1 for limit in self.shed_limits.values()):
            raise ValueError("shed limits must be >= 1")


#: No limit at all (the SDK's connections, and servers built without limits).
UNLIMITED: Final = FlowLimits(max_in_flight_per_connection=0, requests_per_turn=0)


class ServerLoad:
    """The work in flight across a server's connections, shared by all of them.

    Connections add and remove their suspended handlers here; :meth:`shed` is asked
    for every request and costs one comparison until the load nears a limit.

    Args:
        limits: The server's limits.
    """

    __slots__ = ("_limits", "in_flight", "shed_at", "shed_count")

    def __init__(self, limits: FlowLimits) -> None:
        self._limits = dict(limits.shed_limits)
        #: Handlers in flight (suspended, not parked) on every connection.
        self.in_flight = 0
        #: The smallest shed limit: below it no request is shed (the hot-path test).
        self.shed_at = min(self._limits.values(), default=NO_LIMIT)
        #: Requests answered SYSTEM_BUSY so far (a metric).
        self.shed_count = 0

    def shed(self, cmd: RemotingCommand) -> RemotingCommand | None:
        """The SYSTEM_BUSY answer for a request over its code's limit, else ``None``.

        Call only when :attr:`in_flight` >= :attr:`shed_at`.

        Args:
            cmd: The request.

        Returns:
            The busy answer, or ``None`` when the request may run.
        """
        limit = self._limits.get(cmd.code)
        if limit is None or self.in_flight < limit:
            return None
        self.shed_count += 1
        return cmd.make_response(ResponseCode.SYSTEM_BUSY, remark=OVERLOAD_REMARK)


def writelines_pause_check(transport: asyncio.BaseTransport) -> Callable[[], None] | None:
    """What to call after ``writelines`` so that flow control still pauses us, or None.

    The stock selector transport of CPython 3.12.0-3.12.8 and 3.13.0-3.13.1 forgets to
    pause its protocol in ``writelines`` (CPython gh-127655), so a peer that stops
    reading would make its buffer grow without bound. Its own (private) check does the
    missing step; uvloop's transports and 3.11's ``writelines`` (a ``write``) need none,
    and so does a TLS transport, whose ``writelines`` goes through the SSL protocol to
    the socket transport's ``write`` (it also has the method, but not the state it reads).
    """
    if sys.version_info < (3, 12) or not isinstance(transport, _SELECTOR_SOCKET_TRANSPORT):
        return None
    check = getattr(transport, "_maybe_pause_protocol", None)
    return check if callable(check) else None


#: The transport with the bug: the selector event loop's TCP transport (private name).
_SELECTOR_SOCKET_TRANSPORT: Final[type] = getattr(
    asyncio.selector_events, "_SelectorSocketTransport", type(None)
)
