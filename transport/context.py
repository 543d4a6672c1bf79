"""What a request processor knows about the request besides the command itself."""

from __future__ import annotations

from dataclasses import dataclass

from rocklet.transport.connection import Connection

__all__ = ["RequestContext"]


@dataclass(frozen=True, slots=True)
class RequestContext:
    """The connection a request arrived on.

    Built per request (cheap); the per-connection state lives on the connection, so
    everything a processor stores in :attr:`attributes` is seen by later requests from
    the same peer.

    Attributes:
        connection: The connection; processors may send requests back through it
            (e.g. CHECK_TRANSACTION_STATE) or watch it close.
    """

    connection: Connection

    @property
    def peer(self) -> tuple[str, int]:
        """The client's ``(host, port)``."""
        return self.connection.peer or ("", 0)

    @property
    def peer_address(self) -> str:
        """The client as ``"host:port"``, the form RocketMQ logs and reports."""
        host, port = self.peer
        return f"{host}:{port}"

    @property
    def attributes(self) -> dict[str, object]:
        """Per-connection slot for processor state (the broker keeps client ids here)."""
        return self.connection.attributes
