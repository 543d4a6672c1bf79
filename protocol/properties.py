"""Message properties string and the property names the protocol gives meaning to.

The wire and disk form is ``name 0x01 value`` items joined by ``0x02``. We write no
trailing ``0x02``, byte for byte what a RocketMQ 4.9.4 broker stores; the C++ client
sends one, and every reader accepts both forms.
Items with an empty name or value, or without a ``0x01``, are skipped on read, as
Java's ``MessageDecoder.string2messageProperties`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["MAX_PROPERTIES_SIZE", "Prop", "decode_properties", "encode_properties"]

#: Properties are stored behind a signed int16 length (docs/protocol.md).
MAX_PROPERTIES_SIZE: Final = 32767

_NAME_SEP: Final = "\x01"
_ITEM_SEP: Final = "\x02"


class Prop:
    """Names of the properties the broker and clients interpret (``MessageConst``)."""

    KEYS: Final = "KEYS"
    TAGS: Final = "TAGS"
    WAIT: Final = "WAIT"
    DELAY: Final = "DELAY"
    RETRY_TOPIC: Final = "RETRY_TOPIC"
    REAL_TOPIC: Final = "REAL_TOPIC"
    REAL_QID: Final = "REAL_QID"
    TRAN_MSG: Final = "TRAN_MSG"
    PGROUP: Final = "PGROUP"
    MIN_OFFSET: Final = "MIN_OFFSET"
    MAX_OFFSET: Final = "MAX_OFFSET"
    ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
    RECONSUME_TIME: Final = "RECONSUME_TIME"
    MSG_REGION: Final = "MSG_REGION"
    TRACE_ON: Final = "TRACE_ON"
    UNIQ_KEY: Final = "UNIQ_KEY"
    MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIME: Final = "CONSUME_START_TIME"
    TRAN_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    CORRELATION_ID: Final = "CORRELATION_ID"
    REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
    TTL: Final = "TTL"
    ARRIVE_TIME: Final = "ARRIVE_TIME"
    PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
    CLUSTER: Final = "CLUSTER"
    MSG_TYPE: Final = "MSG_TYPE"


def encode_properties(props: Mapping[str, str]) -> bytes:
    """Encode properties as ``name 0x01 value`` items joined by ``0x02``, UTF-8.

    Args:
        props: Property names to values. Empty names or values are left out, because
            every reader would drop them anyway.

    Returns:
        The encoded bytes (possibly empty).
    """
    return _ITEM_SEP.join(
        f"{name}{_NAME_SEP}{value}" for name, value in props.items() if name and value
    ).encode()


def decode_properties(data: bytes | bytearray | memoryview | str) -> dict[str, str]:
    """Decode a properties string.

    Args:
        data: The stored or received properties (bytes are decoded as UTF-8 with
            replacement, so malformed text never raises).

    Returns:
        Names to values, in the order they appear; a repeated name keeps its last value.
    """
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
    out: dict[str, str] = {}
    for item in text.split(_ITEM_SEP):
        name, sep, value = item.partition(_NAME_SEP)
        if sep and name and value:
            out[name] = value
    return out
