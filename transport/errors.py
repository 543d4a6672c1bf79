"""Errors of the remoting transport: the exchange with a peer failed.

:class:`RemotingError` is the root of every error raised while talking to a peer,
here and in the layers above: the SDK names it ``ClientError`` and builds its broker
answer errors on it, so an application catches one class for everything.

The transport's own failures (:class:`TransportError` and below) share one meaning:
the request's outcome is unknown, because it may have run on the peer before the
connection broke or the timeout fired.
"""

from __future__ import annotations

__all__ = [
    "ConnectError",
    "ConnectionClosedError",
    "RemotingError",
    "RequestTimeoutError",
    "TlsHandshakeError",
    "TransportError",
]


class RemotingError(Exception):
    """Base class of every error raised while talking to a remoting peer."""


class TransportError(RemotingError):
    """The connection to a peer failed; the request's outcome is unknown."""


class ConnectionClosedError(TransportError):
    """The connection is closed, or closed while the request waited for its answer.

    ``__cause__`` holds the reason when there was one (a socket error, a broken frame).

    Attributes:
        peer: ``"host:port"`` of the other side, or ``None`` if it never connected.
    """

    def __init__(self, message: str, *, peer: str | None = None) -> None:
        super().__init__(message)
        self.peer = peer


class ConnectError(ConnectionClosedError):
    """The connection could not be established (refused, unreachable, timed out)."""


class TlsHandshakeError(ConnectError):
    """The TCP connection was made but the TLS handshake failed.

    The server's certificate did not verify (unknown CA, wrong host name, expired),
    the server wanted a client certificate, or the server does not speak TLS on that
    port (RocketMQ's ``tls.server.mode=disabled`` closes the connection).
    ``__cause__`` holds the :class:`ssl.SSLError` when there was one.
    """


class RequestTimeoutError(TransportError, TimeoutError):
    """No answer arrived within the request's timeout.

    Attributes:
        code: The request code.
        opaque: The request's opaque (its id on this connection).
        timeout_s: The timeout that elapsed, in seconds.
        peer: ``"host:port"`` of the other side.
    """

    def __init__(self, *, code: int, opaque: int, timeout_s: float, peer: str | None) -> None:
        super().__init__(
            f"request code {code} (opaque {opaque}) to {peer} got no answer in {timeout_s:g} s"
        )
        self.code = code
        self.opaque = opaque
        self.timeout_s = timeout_s
        self.peer = peer
