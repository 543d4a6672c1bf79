"""Errors raised by the SDK.

Connection-level failures (the peer went away, an answer did not come in time) are
kept apart from the broker's error answers (style.md §8 item 4): a request that timed
out may still have been executed, while a broker error says for sure what happened.
The broker-response tree is added beside these by the SDK.
"""

from __future__ import annotations

__all__ = [
    "ClientError",
    "ConnectError",
    "ConnectionClosedError",
    "RequestTimeoutError",
    "TransportError",
]


class ClientError(Exception):
    """Base class of every error the SDK raises."""


class TransportError(ClientError):
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
