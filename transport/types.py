"""The types a remoting connection is used with: its state, its handlers, their answers.

Apart from :mod:`rocklet.transport.connection` so that code which only names them (a
server's processors, the dispatcher) needs no connection machinery to do so.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple, TypeAlias

from rocklet.protocol.command import RemotingCommand
from rocklet.transport.deferred import Deferred

if TYPE_CHECKING:
    from rocklet.transport.connection import Connection

__all__ = [
    "LATER",
    "Buffer",
    "CloseCallback",
    "ConnectionStatus",
    "HandlerResult",
    "Later",
    "NowHandler",
    "Reply",
    "RequestHandler",
]

Buffer: TypeAlias = bytes | bytearray | memoryview


class ConnectionStatus(enum.Enum):
    """Lifecycle of a connection."""

    CONNECTING = "connecting"  #: created, socket not yet attached
    OPEN = "open"  #: requests may be sent
    CLOSING = "closing"  #: close() was called or the stream broke; nothing new is sent
    CLOSED = "closed"  #: the socket is gone and every pending request has failed


class Reply(NamedTuple):
    """A response whose body continues in extra buffers written without a copy.

    Attributes:
        command: The response; its ``body`` is the first part of the body.
        extra_body: Further body parts, e.g. slices of a mapped commitlog for a pull.
    """

    command: RemotingCommand
    extra_body: Sequence[Buffer]


#: What a request handler returns: an answer, an answer with extra body buffers,
#: ``None`` for no answer, or a :class:`~rocklet.transport.deferred.Deferred` answer
#: given later by a callback.
HandlerResult: TypeAlias = RemotingCommand | Reply | Deferred | None
#: Handles one request from the peer. It runs in its own task; exceptions are logged
#: and answered with SYSTEM_ERROR.
RequestHandler: TypeAlias = Callable[["Connection", RemotingCommand], Awaitable[HandlerResult]]


class Later(enum.Enum):
    """The type of :data:`LATER`."""

    LATER = "later"


#: What a synchronous handler returns when the request needs its asynchronous one (it
#: must then have changed nothing: the asynchronous handler starts over).
LATER: Final = Later.LATER
#: Handles one request without suspending, or returns :data:`LATER`. Exceptions are
#: its own to map (the dispatcher's never raises).
NowHandler: TypeAlias = Callable[["Connection", RemotingCommand], "HandlerResult | Later"]
#: Called once when the connection is closed, with the connection.
CloseCallback: TypeAlias = Callable[["Connection"], object]
