"""Rocklet's HA handshake: slave and master prove to each other they hold a secret key.

RocketMQ 4.x's HA port has no handshake: the slave's first 8 bytes are its max
commitlog offset. When the master requires authentication (``haAuthEnable``, default
``aclEnable``), a Rocklet slave opens with bytes no RocketMQ peer can send or mistake:

    ======================  =========  ===========================================
    direction               bytes      content
    ======================  =========  ===========================================
    slave → master  HELLO   8          :data:`MAGIC` (read as an offset: a negative
                                       long)
    master → slave  NONCE   8+32       :data:`MAGIC`, then the master's nonce: 32
                                       random bytes, new per connection
    slave → master  AUTH    2+n+32+32  access key length (1..:data:`MAX_KEY_BYTES`),
                                       the access key (UTF-8), the slave's nonce (32
                                       random bytes, new per connection), then
                                       :func:`slave_mac`
    master → slave  RESULT  1+32       :data:`ACCEPTED` then :func:`master_mac`;
                                       else :data:`REFUSED` alone and a close
    ======================  =========  ===========================================

Both MACs are HMAC-SHA256 keyed by the account's secret key over a context string,
the master's nonce, the slave's nonce and the access key; the contexts differ
(:data:`SLAVE_CONTEXT`, :data:`MASTER_CONTEXT`), so neither side's MAC can be sent back
as the other's. Then the RocketMQ wire goes on unchanged (the slave's first offset
report). The secret never crosses the wire, and each side's MAC covers the nonce the
other side just picked, so a recorded handshake is worth nothing on another
connection. The slave reads no commitlog byte before the master's MAC checks out.

What this does not give: the bytes that follow are neither encrypted nor protected
against change; TLS does that (and, with a verified certificate, names the master
independently of the ACL files).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import ssl
import struct
from typing import Final

from rocklet.protocol.acl import Credentials

__all__ = [
    "ACCEPTED",
    "MAC_SIZE",
    "MAGIC",
    "MAGIC_V1",
    "MASTER_CONTEXT",
    "MAX_KEY_BYTES",
    "NONCE_SIZE",
    "REFUSED",
    "SLAVE_CONTEXT",
    "HandshakeError",
    "auth_message",
    "dial_master",
    "master_mac",
    "slave_mac",
]

#: The slave's first 8 bytes: 0x80 then "RKLTHA2": negative as a Java long, so no
#: RocketMQ slave ever reports it, and a RocketMQ master would not read it as -1.
MAGIC: Final = b"\x80RKLTHA2"
#: The first version's (slave-only authentication), recognised to say so when refused.
MAGIC_V1: Final = b"\x80RKLTHA1"
NONCE_SIZE: Final = 32
MAC_SIZE: Final = 32
#: Longest access key accepted (RocketMQ sets no limit; 255 bytes is plenty).
MAX_KEY_BYTES: Final = 255
#: What the slave's MAC covers first, so it can be nothing else's signature.
SLAVE_CONTEXT: Final = b"rocklet-ha-slave-v2\x00"
#: What the master's MAC covers first: not the slave's, so a MAC is never valid both ways.
MASTER_CONTEXT: Final = b"rocklet-ha-master-v2\x00"
ACCEPTED: Final = b"\x00"
REFUSED: Final = b"\x01"
_KEY_LEN: Final = struct.Struct(">H")
#: Longest a slave waits for the master's TLS and handshake answers.
_TIMEOUT_S: Final = 10.0


class HandshakeError(OSError):
    """The master refused the slave, failed to prove itself, or does not speak the handshake."""


def _mac(
    context: bytes, secret_key: str | bytes, master_nonce: bytes, slave_nonce: bytes, key: str
) -> bytes:
    secret = secret_key.encode("utf-8") if isinstance(secret_key, str) else secret_key
    # The nonces have a fixed size and the access key comes last, so the concatenation
    # cannot be read two ways.
    data = context + master_nonce + slave_nonce + key.encode("utf-8")
    return hmac.digest(secret, data, hashlib.sha256)


def slave_mac(
    secret_key: str | bytes, master_nonce: bytes, slave_nonce: bytes, access_key: str
) -> bytes:
    """The slave's proof: HMAC-SHA256(secret, SLAVE_CONTEXT + both nonces + access key).

    Args:
        secret_key: The account's secret key (text, or its UTF-8 bytes).
        master_nonce: The master's nonce for this connection.
        slave_nonce: The slave's nonce for this connection.
        access_key: The account name.

    Returns:
        The 32-byte MAC.
    """
    return _mac(SLAVE_CONTEXT, secret_key, master_nonce, slave_nonce, access_key)


def master_mac(
    secret_key: str | bytes, master_nonce: bytes, slave_nonce: bytes, access_key: str
) -> bytes:
    """The master's proof: HMAC-SHA256(secret, MASTER_CONTEXT + both nonces + access key).

    Args:
        secret_key: The account's secret key, as the master's ACL files have it.
        master_nonce: The master's nonce for this connection.
        slave_nonce: The slave's nonce for this connection.
        access_key: The account name.

    Returns:
        The 32-byte MAC.
    """
    return _mac(MASTER_CONTEXT, secret_key, master_nonce, slave_nonce, access_key)


def auth_message(credentials: Credentials, master_nonce: bytes, slave_nonce: bytes) -> bytes:
    """The slave's AUTH message.

    Args:
        credentials: The slave's account (``accessKey``/``secretKey`` of broker.conf).
        master_nonce: The nonce the master sent.
        slave_nonce: The slave's own fresh nonce (:data:`NONCE_SIZE` random bytes).

    Returns:
        Length, access key, the slave's nonce and its MAC, ready to write.

    Raises:
        HandshakeError: The access key is empty or longer than :data:`MAX_KEY_BYTES`.
    """
    key = credentials.access_key.encode("utf-8")
    if not 0 < len(key) <= MAX_KEY_BYTES:
        raise HandshakeError(f"accessKey must be 1..{MAX_KEY_BYTES} bytes")
    proof = slave_mac(credentials.secret_key, master_nonce, slave_nonce, credentials.access_key)
    return _KEY_LEN.pack(len(key)) + key + slave_nonce + proof


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
        credentials: Authenticate with this account, and require the master to prove
            it holds the same secret key; ``None``: send nothing (the RocketMQ wire,
            for masters that do not require it).

    Returns:
        The open streams, ready for the first offset report.

    Raises:
        HandshakeError: The master refused the account, could not prove it holds the
            account's secret key, or does not answer the handshake (a RocketMQ master,
            one that refused the address, or a Rocklet of an older version).
        OSError: No connection, or the TLS handshake failed.
        TimeoutError: The master did not answer in time.
    """
    async with asyncio.timeout(_TIMEOUT_S):
        reader, writer = await asyncio.open_connection(
            host, port, ssl=tls, server_hostname=host if tls is not None else None
        )
    if credentials is None:
        return reader, writer
    slave_nonce = secrets.token_bytes(NONCE_SIZE)
    proof = b""
    try:
        async with asyncio.timeout(_TIMEOUT_S):
            writer.write(MAGIC)
            head = await reader.readexactly(len(MAGIC) + NONCE_SIZE)
            if head[: len(MAGIC)] != MAGIC:
                raise HandshakeError(
                    "the master does not speak Rocklet's HA handshake (a RocketMQ master? "
                    "set haAuthEnable=false on this slave)"
                )
            master_nonce = head[len(MAGIC) :]
            writer.write(auth_message(credentials, master_nonce, slave_nonce))
            result = await reader.readexactly(1)
            if result == ACCEPTED:
                proof = await reader.readexactly(MAC_SIZE)
    except TimeoutError:
        writer.close()
        raise HandshakeError(
            f"the master did not answer the HA handshake within {_TIMEOUT_S:g} s (a "
            "RocketMQ master? set haAuthEnable=false on this slave)"
        ) from None
    except (asyncio.IncompleteReadError, ConnectionResetError):
        writer.close()
        raise HandshakeError(
            "the master closed the HA connection during the handshake (is this slave's "
            "address in its haAllowedSlaves? is the master a Rocklet of an older version?)"
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
    want = master_mac(credentials.secret_key, master_nonce, slave_nonce, credentials.access_key)
    if not hmac.compare_digest(proof, want):
        # Not a byte of commitlog has been read: whoever answered may not be the master.
        writer.close()
        raise HandshakeError(
            f"the peer at {host}:{port} could not prove it holds the secret key of "
            f"accessKey={credentials.access_key}: an impostor, or a master whose ACL file "
            "has another secretKey for that account"
        )
    return reader, writer
