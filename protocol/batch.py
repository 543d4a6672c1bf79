"""Batch body codec (SEND_BATCH_MESSAGE, and the C++ client's SEND_MESSAGE batch="1").

Each message of a batch body is, big-endian (``MessageDecoder.encodeMessage``):

    ======  ====  ================================================
    offset  size  field
    ======  ====  ================================================
    0       4     TOTALSIZE of this item
    4       4     MAGICCODE (clients write 0; not checked)
    8       4     BODYCRC (clients write 0; the broker computes it)
    12      4     FLAG
    16      4+B   body length, body
    20+B    2+P   properties length (int16), properties
    ======  ====  ================================================
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final, NamedTuple

from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.properties import MAX_PROPERTIES_SIZE

__all__ = ["BatchItem", "decode_batch", "encode_batch"]

_HEAD = struct.Struct(">iiiii")
_I16 = struct.Struct(">h")
_ITEM_OVERHEAD: Final = 22


class BatchItem(NamedTuple):
    """One message of a batch: user flag, body and encoded properties."""

    flag: int
    body: bytes
    properties: bytes


def encode_batch(items: Iterable[BatchItem]) -> bytes:
    """Encode messages as a batch body.

    Args:
        items: The messages.

    Returns:
        The body bytes.

    Raises:
        MessageFormatError: An item's properties exceed their int16 length field.
    """
    out = bytearray()
    for item in items:
        if len(item.properties) > MAX_PROPERTIES_SIZE:
            raise MessageFormatError(
                f"properties are {len(item.properties)} bytes; the limit is {MAX_PROPERTIES_SIZE}"
            )
        size = _ITEM_OVERHEAD + len(item.body) + len(item.properties)
        out += _HEAD.pack(size, 0, 0, item.flag, len(item.body))
        out += item.body
        out += _I16.pack(len(item.properties))
        out += item.properties
    return bytes(out)


def decode_batch(data: bytes | memoryview, *, max_items: int = 100_000) -> list[BatchItem]:
    """Decode a batch body.

    Args:
        data: The body.
        max_items: Refuse bodies with more messages than this.

    Returns:
        The messages in order.

    Raises:
        MessageFormatError: An item's lengths disagree or overrun the body.
    """
    items: list[BatchItem] = []
    pos, end = 0, len(data)
    while pos < end:
        if pos + _HEAD.size > end:
            raise MessageFormatError(f"batch item at {pos} is truncated")
        size, _magic, _crc, flag, body_len = _HEAD.unpack_from(data, pos)
        if size < _ITEM_OVERHEAD or pos + size > end:
            raise MessageFormatError(f"batch item size {size} at {pos} overruns the body")
        if body_len < 0 or _ITEM_OVERHEAD + body_len > size:
            raise MessageFormatError(f"batch item body length {body_len} overruns the item")
        p = pos + _HEAD.size
        body = bytes(data[p : p + body_len])
        p += body_len
        (props_len,) = _I16.unpack_from(data, p)
        p += 2
        if props_len < 0 or props_len > MAX_PROPERTIES_SIZE or p + props_len != pos + size:
            raise MessageFormatError(f"batch item properties length {props_len} is inconsistent")
        items.append(BatchItem(flag, body, bytes(data[p : p + props_len])))
        if len(items) > max_items:
            raise MessageFormatError(f"batch has more than {max_items} messages")
        pos += size
    if not items:
        raise MessageFormatError("batch body holds no message")
    return items
