"""Stored-message codec: the record layout shared by the commitlog and pull bodies.

Layout of one record (magic v1, IPv4 hosts; docs/protocol.md), big-endian:

    ======  =====  =============================================================
    offset  size   field
    ======  =====  =============================================================
    0       4      TOTALSIZE, the whole record including this field
    4       4      MAGICCODE 0xDAA320A7 (0xCBD43194 marks the commitlog's blank)
    8       4      BODYCRC = crc32(body as stored) & 0x7FFFFFFF
    12      4      QUEUEID
    16      4      FLAG (user flag)
    20      8      QUEUEOFFSET, index in the consume queue
    28      8      PHYSICALOFFSET, commitlog byte offset of this record
    36      4      SYSFLAG (:class:`SysFlag`)
    40      8      BORNTIMESTAMP (ms)
    48      8      BORNHOST: IPv4 (4) + port (int32)
    56      8      STORETIMESTAMP (ms)
    64      8      STOREHOST: IPv4 (4) + port (int32), the broker's reachable address
    72      4      RECONSUMETIMES
    76      8      PREPARED TRANSACTION OFFSET
    84      4+B    BODY length, body
    88+B    1+T    TOPIC length (signed int8), topic
    89+B+T  2+P    PROPERTIES length (signed int16), properties
    ======  =====  =============================================================

So a record is ``91 + B + T + P`` bytes. We write only IPv4 hosts: the C++ 1.2 client
and ali-ons ignore the IPv6 flags and would misparse every later field. Readers accept
IPv6 hosts (Java can store them) so RocketMQ stores still decode.
"""

from __future__ import annotations

import functools
import ipaddress
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import IntFlag
from typing import Final

from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.properties import MAX_PROPERTIES_SIZE, decode_properties, encode_properties

__all__ = [
    "BLANK_MAGIC",
    "MESSAGE_MAGIC",
    "PHYSICAL_OFFSET_POS",
    "QUEUE_OFFSET_POS",
    "RECORD_OVERHEAD",
    "STORE_TIMESTAMP_POS",
    "StoredMessage",
    "SysFlag",
    "body_crc",
    "decode_message",
    "encode_message",
    "iter_messages",
    "java_string_hash",
    "pack_host",
    "record_properties",
    "record_properties_text",
    "record_size",
    "unpack_host",
]

#: Magic of a message record (``MESSAGE_MAGIC_CODE``), as a signed int32.
MESSAGE_MAGIC: Final = -626843481
#: Magic of the blank filler at a commitlog segment's end (``BLANK_MAGIC_CODE``).
BLANK_MAGIC: Final = -875286124
#: Fixed bytes of a record with IPv4 hosts, besides body, topic and properties.
RECORD_OVERHEAD: Final = 91
#: Where the store patches the queue offset, physical offset and store time at append.
QUEUE_OFFSET_POS: Final = 20
PHYSICAL_OFFSET_POS: Final = 28
STORE_TIMESTAMP_POS: Final = 56
MAX_TOPIC_SIZE: Final = 127

_HEAD = struct.Struct(">iiiiiqqiq")  # size..bornTimestamp: 48 bytes
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I8 = struct.Struct(">b")
_Q = struct.Struct(">q")
_TAIL = struct.Struct(">iq")  # reconsumeTimes, preparedTransactionOffset
_HOST4 = struct.Struct(">4si")


class SysFlag(IntFlag):
    """Message ``sysFlag`` bits (``MessageSysFlag.java``)."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_PREPARED = 0x4
    TRANSACTION_COMMIT = 0x8
    TRANSACTION_ROLLBACK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80
    COMPRESSION_TYPE = 0x700  #: bits 8-10; 0 or 0x300 = zlib, 0x100 LZ4, 0x200 ZSTD


TRANSACTION_MASK: Final = 0xC


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: over UTF-16 code units, wrapping as signed int32.

    Tag hashes in consume queues and index key hashes must match what Java computes,
    because clients compare them with their own.

    Args:
        text: Any string (non-BMP characters count as two UTF-16 units, as in Java).

    Returns:
        The signed 32-bit hash.
    """
    h = 0
    # surrogatepass: a lone surrogate is one UTF-16 unit to Java, not an error.
    data = text.encode("utf-16-be", "surrogatepass")
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def body_crc(body: bytes | memoryview) -> int:
    """BODYCRC as Java's ``UtilAll.crc32``: CRC-32/IEEE masked to a positive int.

    Args:
        body: The body as stored (compressed if it was sent compressed).

    Returns:
        The masked checksum.
    """
    return zlib.crc32(body) & 0x7FFFFFFF


def pack_host(ip: str, port: int) -> bytes:
    """Pack an IPv4 address and port as a record's 8-byte host field.

    Args:
        ip: Dotted-quad IPv4 address (strict: no ``inet_aton`` shorthands).
        port: TCP port.

    Returns:
        Eight bytes.

    Raises:
        ValueError: ``ip`` is not a dotted-quad IPv4 address.
    """
    return _HOST4.pack(_ipv4_packed(ip), port)


@functools.lru_cache(maxsize=1024)
def _ipv4_packed(ip: str) -> bytes:
    # A broker sees few distinct hosts and packs one per stored message; ipaddress
    # parses strictly but slowly, so remember the answers.
    return ipaddress.IPv4Address(ip).packed


def unpack_host(data: bytes | bytearray | memoryview) -> tuple[str, int]:
    """Unpack an 8-byte (IPv4) or 20-byte (IPv6) host field.

    Args:
        data: The field's bytes.

    Returns:
        ``(ip, port)``.

    Raises:
        MessageFormatError: ``data`` is neither 8 nor 20 bytes long.
    """
    if len(data) == 8:
        a, b, c, d = data[:4]
        return f"{a}.{b}.{c}.{d}", _I32.unpack_from(data, 4)[0]
    if len(data) == 20:
        return str(ipaddress.IPv6Address(bytes(data[:16]))), _I32.unpack_from(data, 16)[0]
    raise MessageFormatError(f"host field of {len(data)} bytes; expected 8 or 20")


def record_size(body_len: int, topic_len: int, properties_len: int) -> int:
    """Size of a record with IPv4 hosts (Java ``CommitLog.calMsgLength``).

    Args:
        body_len: Body bytes.
        topic_len: Topic bytes (UTF-8).
        properties_len: Properties bytes.

    Returns:
        The record's TOTALSIZE.
    """
    return RECORD_OVERHEAD + body_len + topic_len + properties_len


def encode_message(
    *,
    topic: str,
    body: bytes | memoryview,
    queue_id: int = 0,
    flag: int = 0,
    properties: Mapping[str, str] | bytes = b"",
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: bytes = b"\x00" * 8,
    store_timestamp: int = 0,
    store_host: bytes = b"\x00" * 8,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
) -> bytearray:
    """Encode one stored record.

    The store encodes each record once with zero offsets and patches
    :data:`QUEUE_OFFSET_POS`, :data:`PHYSICAL_OFFSET_POS` and
    :data:`STORE_TIMESTAMP_POS` in place when it appends.

    Args:
        topic: Topic name (at most 127 UTF-8 bytes).
        body: Body as stored; BODYCRC is computed over these bytes.
        queue_id: Queue id.
        flag: User flag.
        properties: A mapping, or an already encoded properties string.
        sys_flag: :class:`SysFlag` bits; the IPv6 bits are cleared (IPv4 hosts only).
        born_timestamp: Producer time, ms.
        born_host: 8-byte host field from :func:`pack_host`.
        store_timestamp: Broker time, ms.
        store_host: 8-byte host field of the broker's reachable address.
        reconsume_times: Delivery attempts so far.
        prepared_transaction_offset: Commitlog offset of the half message, if any.
        queue_offset: Index in the consume queue.
        physical_offset: Commitlog offset.

    Returns:
        The record, mutable so the store can patch offsets.

    Raises:
        MessageFormatError: The topic or properties exceed their length fields.
        ValueError: A host field is not 8 bytes (a slice of the wrong size would
            silently shift every later field).
    """
    if len(born_host) != 8 or len(store_host) != 8:
        raise ValueError("born_host and store_host must be 8-byte fields from pack_host()")
    topic_b = topic.encode()
    props_b = properties if isinstance(properties, bytes) else encode_properties(properties)
    if len(topic_b) > MAX_TOPIC_SIZE:
        raise MessageFormatError(f"topic is {len(topic_b)} bytes; the limit is {MAX_TOPIC_SIZE}")
    if len(props_b) > MAX_PROPERTIES_SIZE:
        raise MessageFormatError(
            f"properties are {len(props_b)} bytes; the limit is {MAX_PROPERTIES_SIZE}"
        )
    size = record_size(len(body), len(topic_b), len(props_b))
    out = bytearray(size)
    _HEAD.pack_into(
        out,
        0,
        size,
        MESSAGE_MAGIC,
        body_crc(body),
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag & ~(SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6),
        born_timestamp,
    )
    out[48:56] = born_host
    _Q.pack_into(out, 56, store_timestamp)
    out[64:72] = store_host
    _TAIL.pack_into(out, 72, reconsume_times, prepared_transaction_offset)
    pos = 84
    _I32.pack_into(out, pos, len(body))
    out[pos + 4 : pos + 4 + len(body)] = body
    pos += 4 + len(body)
    out[pos] = len(topic_b)
    out[pos + 1 : pos + 1 + len(topic_b)] = topic_b
    pos += 1 + len(topic_b)
    _I16.pack_into(out, pos, len(props_b))
    out[pos + 2 :] = props_b
    return out


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A decoded stored record. Hot paths pass record bytes instead of these.

    Attributes mirror the layout in the module docstring; ``body`` is as stored
    (see :meth:`payload` for the decompressed form) and hosts are ``(ip, port)``.
    """

    size: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: dict[str, str]

    @property
    def tags(self) -> str | None:
        """The TAGS property, if any."""
        return self.properties.get("TAGS")

    @property
    def keys(self) -> list[str]:
        """The KEYS property split on spaces."""
        return self.properties.get("KEYS", "").split()

    @property
    def uniq_key(self) -> str | None:
        """The client-generated UNIQ_KEY, if any."""
        return self.properties.get("UNIQ_KEY")

    def payload(self) -> bytes:
        """Return the body, inflated when the COMPRESSED flag is set (zlib, RFC 1950).

        Raises:
            MessageFormatError: The body is flagged compressed but does not inflate,
                or uses LZ4/ZSTD, which Rocklet does not implement.
        """
        if not self.sys_flag & SysFlag.COMPRESSED:
            return self.body
        kind = self.sys_flag & SysFlag.COMPRESSION_TYPE
        if kind not in (0, 0x300):
            raise MessageFormatError(f"unsupported compression type {kind:#x}")
        try:
            return zlib.decompress(self.body)
        except zlib.error as exc:
            raise MessageFormatError(f"compressed body does not inflate: {exc}") from None

    def crc_ok(self) -> bool:
        """Whether BODYCRC matches the body."""
        return body_crc(self.body) == self.body_crc


def decode_message(data: bytes | bytearray | memoryview, pos: int = 0) -> StoredMessage:
    """Decode the record starting at ``pos``.

    Args:
        data: A buffer holding one or more records.
        pos: Where the record starts.

    Returns:
        The decoded record.

    Raises:
        MessageFormatError: The bytes are not a whole, well-formed message record.
    """
    end_of_data = len(data)
    if pos + 48 > end_of_data:
        raise MessageFormatError("record is truncated in its fixed fields")
    (size, magic, crc, queue_id, flag, qoff, poff, sys_flag, born_ts) = _HEAD.unpack_from(data, pos)
    if magic != MESSAGE_MAGIC:
        raise MessageFormatError(f"bad magic {magic & 0xFFFFFFFF:#010x} at {pos}")
    end = pos + size
    if size < RECORD_OVERHEAD or end > end_of_data:
        raise MessageFormatError(f"record size {size} at {pos} does not fit the buffer")
    try:
        p = pos + 48
        born_len = 20 if sys_flag & SysFlag.BORNHOST_V6 else 8
        born_host = unpack_host(data[p : p + born_len])
        p += born_len
        (store_ts,) = _Q.unpack_from(data, p)
        p += 8
        store_len = 20 if sys_flag & SysFlag.STOREHOST_V6 else 8
        store_host = unpack_host(data[p : p + store_len])
        p += store_len
        reconsume, prepared = _TAIL.unpack_from(data, p)
        p += 12
        (body_len,) = _I32.unpack_from(data, p)
        p += 4
        if body_len < 0 or p + body_len > end:
            raise MessageFormatError(f"body length {body_len} overruns the record at {pos}")
        body = bytes(data[p : p + body_len])
        p += body_len
        # Signed, as Java's ``byteBuffer.get()``: a length of 128-255 is malformed.
        (topic_len,) = _I8.unpack_from(data, p)
        if topic_len < 0 or p + 1 + topic_len + 2 > end:
            raise MessageFormatError(f"topic length {topic_len} overruns the record at {pos}")
        topic = bytes(data[p + 1 : p + 1 + topic_len]).decode("utf-8", "replace")
        p += 1 + topic_len
        (props_len,) = _I16.unpack_from(data, p)
        p += 2
        if props_len < 0 or p + props_len != end:
            raise MessageFormatError(f"properties length {props_len} does not end the record")
        props = decode_properties(data[p : p + props_len])
    except struct.error as exc:
        raise MessageFormatError(f"record at {pos} is malformed: {exc}") from None
    return StoredMessage(
        size=size,
        body_crc=crc,
        queue_id=queue_id,
        flag=flag,
        queue_offset=qoff,
        physical_offset=poff,
        sys_flag=sys_flag,
        born_timestamp=born_ts,
        born_host=born_host,
        store_timestamp=store_ts,
        store_host=store_host,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
        body=body,
        topic=topic,
        properties=props,
    )


# Plain ints: IntFlag's operators are Python-level calls (this runs per filtered record).
_BORN_V6: Final = int(SysFlag.BORNHOST_V6)
_STORE_V6: Final = int(SysFlag.STOREHOST_V6)


def record_properties(record: bytes | bytearray | memoryview) -> dict[str, str]:
    """The properties of one whole stored record, without decoding the rest.

    Args:
        record: Exactly one record (as a consume queue entry's offset and size give it).

    Returns:
        Names to values, as :func:`~rocklet.protocol.properties.decode_properties`.

    Raises:
        MessageFormatError: A length runs past the record.
    """
    return decode_properties(record_properties_text(record))


def record_properties_text(record: bytes | bytearray | memoryview) -> str:
    """The encoded properties string of one whole stored record (UTF-8, replacing).

    What a broker-side property filter reads for every candidate record: only the
    lengths before the properties are followed.

    Args:
        record: Exactly one record.

    Returns:
        ``name 0x01 value`` items joined by ``0x02``.

    Raises:
        MessageFormatError: A length runs past the record.
    """
    end = len(record)
    try:
        (sys_flag,) = _I32.unpack_from(record, 36)
        p = 48 + (20 if sys_flag & _BORN_V6 else 8) + 8
        p += (20 if sys_flag & _STORE_V6 else 8) + 12
        (body_len,) = _I32.unpack_from(record, p)
        p += 4 + body_len
        (topic_len,) = _I8.unpack_from(record, p)
        p += 1 + topic_len
        (props_len,) = _I16.unpack_from(record, p)
    except struct.error as exc:
        raise MessageFormatError(f"record is malformed: {exc}") from None
    p += 2
    if body_len < 0 or topic_len < 0 or props_len < 0 or p + props_len > end:
        raise MessageFormatError("a length runs past the record")
    return bytes(record[p : p + props_len]).decode("utf-8", "replace")


def iter_messages(data: bytes | bytearray | memoryview) -> Iterator[StoredMessage]:
    """Decode back-to-back records, as in a pull or query response body.

    Args:
        data: Concatenated records.

    Yields:
        Each record in order.

    Raises:
        MessageFormatError: A record is malformed or the data ends inside one.
    """
    pos = 0
    while pos < len(data):
        msg = decode_message(data, pos)
        pos += msg.size
        yield msg
