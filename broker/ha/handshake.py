"""Rocklet's HA handshake: a slave proves it holds an ACL account's secret key.

RocketMQ 4.x's HA port has no handshake: the slave's first 8 bytes are its max
commitlog offset. When the master requires authentication (``haAuthEnable``, default
``aclEnable``), a Rocklet slave opens with bytes no RocketMQ peer can send or mistake:

    ======================  =====  ===============================================
    direction               bytes  content
    ======================  =====  ===============================================
    slave → master  HELLO   8      :data:`MAGIC` (read as an offset: a negative long)
    master → slave  NONCE   8+32   :data:`MAGIC`, then 32 random bytes, new per
                                   connection
    slave → master  AUTH    2+n+32 access key length (1..:data:`MAX_KEY_BYTES`), the
                                   access key (UTF-8), HMAC-SHA256 of
                                   :data:`CONTEXT` + nonce + access key, keyed by
                                   the account's secret key
    master → slave  RESULT  1      :data:`ACCEPTED`, else :data:`REFUSED` and a close
    ======================  =====  ===============================================

Then the RocketMQ wire goes on unchanged (the slave's first offset report). The
secret never crosses the wire and the MAC covers the master's fresh nonce, so a
recorded AUTH is worth nothing on another connection. The master is not
authenticated by this exchange; TLS (the slave verifying the master's certificate)
does that.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ssl
import struct
from typing import Final

from rocklet.protocol.acl import Credentials

__all__ = [
    "ACCEPTED",
    "CONTEXT",
    "MAC_SIZE",
    "MAGIC",
    "MAX_KEY_BYTES",
    "NONCE_SIZE",
    "REFUSED",
    "HandshakeError",
    "auth_message",
    "dial_master",
    "mac",
]

#: The slave's first 8 bytes: 0x80 then "RKLTHA1": negative as a Java long, so no
#: RocketMQ slave ever reports it, and a RocketMQ master would not read it as -1.
MAGIC: Final = b"\x80RKLTHA1"
NONCE_SIZE: Final = 32
MAC_SIZE: Final = 32
#: Longest access key accepted (RocketMQ sets no limit; 255 bytes is plenty).
MAX_KEY_BYTES: Final = 255
#: What the MAC covers first, so it can be nothing else's signature.
CONTEXT: Final = b"rocklet-ha-auth-v1\x00"
ACCEPTED: Final = b"\x00"
REFUSED: Final = b"\x01"
_KEY_LEN: Final = struct.Struct(">H")
#: Longest a slave waits for the master's TLS and handshake answers.
_TIMEOUT_S: Final = 10.0


class HandshakeError(OSError):
    """The master refused the slave, or does not speak the handshake."""


def mac(secret_key: str | bytes, nonce: bytes, access_key: str) -> bytes:
    """The AUTH message's MAC: HMAC-SHA256(secret, CONTEXT + nonce + access key).

    Args:
        secret_key: The account's secret key (text, or its UTF-8 bytes).
        nonce: The master's nonce for this connection.
        access_key: The account name.

    Returns:
        The 32-byte MAC.
    """
    key = secret_key.encode("utf-8") if isinstance(secret_key, str) else secret_key
    return hmac.digest(key, CONTEXT + nonce + access_key.encode("utf-8"), hashlib.sha256)


def auth_message(credentials: Credentials, nonce: bytes) -> bytes:
    """The slave's AUTH message for ``nonce``.

    Args:
        credentials: The slave's account (``accessKey``/``secretKey`` of broker.conf).
        nonce: The nonce the master sent.

    Returns:
        Length, access key and MAC, ready to write.

    Raises:
        HandshakeError: The access key is longer than :data:`MAX_KEY_BYTES`.
    """
    key = credentials.access_key.encode("utf-8")
    if not 0 < len(key) <= MAX_KEY_BYTES:
        raise HandshakeError(f"accessKey is longer than {MAX_KEY_BYTES} bytes")
    return (
        _KEY_LEN.pack(len(key)) + key + mac(credentials.secret_key, nonce, credentials.access_key)
    )


async def dial_master(
    host: str,
    port: int,
    *,
    tls: ssl.SSLContext | None = None,
    credentials: Credentials | None = None,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to a master's HA port: TLS if asked, then the handshake if asked.

    Args:
        host: The master's HA host.
        port: Its HA port.
        tls: Client context (it verifies the master's certificate and host name);
            ``None``: plain TCP, as RocketMQ.
        credentials: Authenticate with this account; ``None``: send nothing (the
            RocketMQ wire, for masters that do not require it).

    Returns:
        The open streams, ready for the first offset report.

    Raises:
        HandshakeError: The master refused the account, or does not answer the
            handshake (a RocketMQ master, or one that refused the address).
        OSError: No connection, or the TLS handshake failed.
        TimeoutError: The master did not answer in time.
    """
    async with asyncio.timeout(_TIMEOUT_S):
        reader, writer = await asyncio.open_connection(
            host, port, ssl=tls, server_hostname=host if tls is not None else None
        )
    if credentials is None:
        return reader, writer
    try:
        async with asyncio.timeout(_TIMEOUT_S):
            writer.write(MAGIC)
            head = await reader.readexactly(len(MAGIC) + NONCE_SIZE)
            if head[: len(MAGIC)] != MAGIC:
                raise HandshakeError(
                    "the master does not speak Rocklet's HA handshake (a RocketMQ master? "
                    "set haAuthEnable=false on this slave)"
                )
            writer.write(auth_message(credentials, head[len(MAGIC) :]))
            result = await reader.readexactly(1)
    except TimeoutError:
        writer.close()
        raise HandshakeError(
            f"the master did not answer the HA handshake within {_TIMEOUT_S:g} s (a "
            "RocketMQ master? set haAuthEnable=false on this slave)"
        ) from None
    except asyncio.IncompleteReadError:
        writer.close()
        raise HandshakeError(
            "the master closed the HA connection during the handshake (is this slave's "
            "address in its haAllowedSlaves?)"
        ) from None
    except BaseException:
        writer.close()
        raise
    if result != ACCEPTED:
        writer.close()
        raise HandshakeError(
            f"the master refused accessKey={credentials.access_key} (unknown there, not "
            "admin: true, or a wrong secretKey)"
        )
    return reader, writer
