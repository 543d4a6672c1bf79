"""The remoting transport: asyncio connections and servers over the sans-IO protocol.

One home for what the name server, the broker and the SDK share, above
:mod:`rocklet.protocol` (bytes and commands, no I/O) and below everything else:

- :class:`Connection` / :func:`open_connection`: one framed TCP connection that sends
  requests (opaque-to-future correlation, per-request timeouts, oneway) and answers
  the peer's requests through a handler;
- :class:`RemotingServer`, :class:`ProcessorRegistry`, :class:`RequestContext`: the
  accepting side, with request codes routed to processors;
- :mod:`~rocklet.transport.tls` and :mod:`~rocklet.transport.tls_accept`: TLS contexts
  (server, reloading; client, verifying) and one port for TLS and plain TCP;
- :class:`Deferred`: an answer a processor gives later from a callback, without a task
  (a send waiting for the disk or a slave);
- :mod:`~rocklet.transport.errors`: what can go wrong talking to a peer;
- :mod:`~rocklet.transport.clock` and :mod:`~rocklet.transport.tasks`: injected time
  and owned, periodic background tasks;
- :func:`~rocklet.transport.logs.get_logger`: library logging (silent unless the
  application configures :mod:`logging`).
"""

from rocklet.transport.connection import (
    Connection,
    ConnectionStatus,
    HandlerResult,
    Reply,
    RequestHandler,
)
from rocklet.transport.context import RequestContext
from rocklet.transport.deferred import Deferred
from rocklet.transport.dial import open_connection
from rocklet.transport.dispatch import Processor, ProcessorRegistry, dispatch
from rocklet.transport.errors import (
    ConnectError,
    ConnectionClosedError,
    RemotingError,
    RequestTimeoutError,
    TlsHandshakeError,
    TransportError,
)
from rocklet.transport.server import RemotingServer

__all__ = [
    "ConnectError",
    "Connection",
    "ConnectionClosedError",
    "ConnectionStatus",
    "Deferred",
    "HandlerResult",
    "Processor",
    "ProcessorRegistry",
    "RemotingError",
    "RemotingServer",
    "Reply",
    "RequestContext",
    "RequestHandler",
    "RequestTimeoutError",
    "TlsHandshakeError",
    "TransportError",
    "dispatch",
    "open_connection",
]
