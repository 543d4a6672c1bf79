"""Message ids.

The *offset msgId* names a record by where it is stored: store host IPv4 (4 bytes),
port (int32) and commitlog offset (int64), as 32 uppercase hex characters
(``MessageDecoder.createMessageId``). Clients parse it to find the broker and the
offset (VIEW_MESSAGE_BY_ID, END_TRANSACTION), so its form is fixed.

The client's UNIQ_KEY is different: its layout varies by client build (the C++ wheel
writes host-endian fields), so Rocklet treats it as an opaque string when it stores and
looks up messages. :func:`parse_client_msg_id` reads the Java client's layout (which
Rocklet's SDK writes too) for people, as ``mqadmin DecodeMessageId`` does: the sender's
IP (IPv4, or IPv6 in a 28-byte id), the low 16 bits of its pid, and the milliseconds
since the start of the month when the id was made.
"""

from __future__ import annotations

import ipaddress
import string
import struct
from typing import Final, NamedTuple

from rocklet.protocol.errors import MessageFormatError

__all__ = [
    "ClientMessageId",
    "OffsetMessageId",
    "make_offset_msg_id",
    "parse_client_msg_id",
    "parse_offset_msg_id",
]

_ID = struct.Struct(">4siq")
_HEX_DIGITS: Final = frozenset(string.hexdigits)


class OffsetMessageId(NamedTuple):
    """A decoded offset msgId."""

    host: str
    port: int
    offset: int


def make_offset_msg_id(store_host: bytes, offset: int) -> str:
    """Build the offset msgId of a record.

    Args:
        store_host: The record's 8-byte STOREHOST field (IPv4 + port).
        offset: The record's commitlog offset.

    Returns:
        32 uppercase hex characters.

    Raises:
        ValueError: ``store_host`` is not an 8-byte IPv4 host field.
    """
    if len(store_host) != 8:
        raise ValueError(f"store_host must be 8 bytes (IPv4 + port), got {len(store_host)}")
    return (store_host + offset.to_bytes(8, "big", signed=True)).hex().upper()


def parse_offset_msg_id(msg_id: str) -> OffsetMessageId:
    """Decode a 32-character offset msgId.

    Args:
        msg_id: The id, any case.

    Returns:
        Host, port and commitlog offset.

    Raises:
        MessageFormatError: The text is not a 32-hex-digit offset msgId.
    """
    if len(msg_id) != 32:
        raise MessageFormatError(f"offset msgId must be 32 hex digits, got {len(msg_id)}")
    # bytes.fromhex alone would skip embedded spaces and return fewer than 16 bytes.
    if not _HEX_DIGITS.issuperset(msg_id):
        raise MessageFormatError(f"offset msgId is not hex: {msg_id!r}")
    ip, port, offset = _ID.unpack(bytes.fromhex(msg_id))
    return OffsetMessageId(".".join(str(octet) for octet in ip), port, offset)


class ClientMessageId(NamedTuple):
    """The parts of a Java-layout client msgId (UNIQ_KEY)."""

    ip: str
    pid: int
    ms_in_month: int
    counter: int


def parse_client_msg_id(msg_id: str) -> ClientMessageId:
    """Decode a client msgId in the Java client's layout.

    The layout is the IP (4 or 16 bytes), the pid's low 16 bits, a 4-byte class loader
    hash, the milliseconds since the start of the month the id was made in (4 bytes,
    the sender's time zone) and a 16-bit counter, all big-endian.

    Args:
        msg_id: 32 hex digits (IPv4) or 56 (IPv6), any case.

    Returns:
        The sender's IP and pid, the time in its month, and the counter.

    Raises:
        MessageFormatError: Not hex, or neither length.
    """
    if len(msg_id) not in (32, 56):
        raise MessageFormatError(
            f"client msgId must be 32 hex digits (IPv4) or 56 (IPv6), got {len(msg_id)}"
        )
    if not _HEX_DIGITS.issuperset(msg_id):
        raise MessageFormatError(f"client msgId is not hex: {msg_id!r}")
    raw = bytes.fromhex(msg_id)
    ip_len = len(raw) - 12
    pid, _loader, span, counter = struct.unpack_from(">HIIH", raw, ip_len)
    return ClientMessageId(str(ipaddress.ip_address(raw[:ip_len])), pid, span, counter)
