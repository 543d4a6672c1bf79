"""Dialing out: :func:`open_connection` to a name server or broker, over TCP or TLS.

The connection it returns is the same :class:`~rocklet.transport.connection.Connection`
a server makes for an accepted socket; what is particular to dialing is the connect
timeout (which covers the TLS handshake too) and telling a failed TCP connect apart
from a failed handshake, so that the error says which of the two to look at.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Final

from rocklet.protocol.frame import DEFAULT_MAX_FRAME_SIZE
from rocklet.transport.connection import Connection, RequestHandler
from rocklet.transport.errors import ConnectError, TlsHandshakeError

__all__ = ["DEFAULT_CONNECT_TIMEOUT_S", "open_connection"]

#: The C++ client's connect timeout (docs/protocol.md).
DEFAULT_CONNECT_TIMEOUT_S: Final = 3.0


async def open_connection(
    host: str,
    port: int,
    *,
    handler: RequestHandler | None = None,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    high_water: int | None = None,
    coalesce_writes: bool = False,
    tls: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
) -> Connection:
    """Connect to a name server or broker.

    Args:
        host: Host name or IP address.
        port: TCP port.
        handler: Handles requests the peer sends us (broker-initiated requests such as
            NOTIFY_CONSUMER_IDS_CHANGED); ``None`` answers them with
            REQUEST_CODE_NOT_SUPPORTED. Default: ``None``.
        connect_timeout_s: Seconds allowed for the TCP connect. Default: 3.0.
        max_frame_size: Largest accepted frame. Default: 16 MiB.
        high_water: Write-buffer high-water mark in bytes. Default: the transport's.
        coalesce_writes: One ``writelines`` per loop iteration (see
            :class:`Connection`). Default: ``False``.
        tls: Speak TLS with this context (:func:`rocklet.transport.tls.client_context`
            makes one that verifies the server); ``None``: plain TCP. The connect
            timeout covers the handshake too. Default: ``None``.
        server_hostname: The name the server's certificate must carry. Default:
            ``host``.

    Returns:
        The open connection.

    Raises:
        TlsHandshakeError: Connected, but the TLS handshake failed (the certificate
            did not verify, or the server does not speak TLS there).
        ConnectError: The connection could not be made in time.
    """
    loop = asyncio.get_running_loop()
    peer = f"{host}:{port}"
    tcp_up = False  # the protocol is made once the TCP connect worked

    def factory() -> Connection:
        nonlocal tcp_up
        tcp_up = True
        return Connection(
            handler=handler,
            max_frame_size=max_frame_size,
            high_water=high_water,
            coalesce_writes=coalesce_writes,
        )

    try:
        async with asyncio.timeout(connect_timeout_s):
            _transport, conn = await loop.create_connection(
                factory,
                host,
                port,
                ssl=tls,
                server_hostname=None if tls is None else (server_hostname or host),
            )
    except (OSError, TimeoutError) as exc:
        if tls is None or not tcp_up:
            raise ConnectError(f"cannot connect to {peer}: {exc}", peer=peer) from exc
        if isinstance(exc, ssl.SSLError):
            reason = _tls_reason(exc)
        else:  # the server hung up (or said nothing) during the handshake
            reason = (
                f"{str(exc) or type(exc).__name__} during the handshake; does the server "
                "accept TLS on this port?"
            )
        raise TlsHandshakeError(f"TLS handshake with {peer} failed: {reason}", peer=peer) from exc
    return conn


def _tls_reason(exc: ssl.SSLError) -> str:
    """A verification failure's own words (``Hostname mismatch``...), else the error."""
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        return f"certificate verify failed: {exc.verify_message}"
    return exc.reason or str(exc)
