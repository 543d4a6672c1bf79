"""REGISTER_BROKER (103) bodies, plain JSON or compressed (docs/protocol.md).

Plain (``compressed=false``)::

    {"filterServerList":[],"topicConfigSerializeWrapper":{...}}

Compressed (``compressed=true``): a zlib stream (RFC 1950; Java's ``Deflater`` at
``BEST_COMPRESSION``) of, big-endian (``RegisterBrokerBody.encode(true)``):

    ============  ==========================================================
    size          field
    ============  ==========================================================
    4 + D         DataVersion JSON length, DataVersion JSON
    4             topic count N
    N x (4 + T)   per topic: length, ``TopicConfig.encode()`` (space-separated)
    4 + F         filterServerList JSON length, filterServerList JSON
    ============  ==========================================================

The compressed form carries no ``topicSysFlag`` or ``order``; decoding leaves them at
their defaults, as Java does.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Any, Final, Self

from rocklet.protocol import fastjson
from rocklet.protocol.bodies._fields import encode, get_map, get_str_list, parse_object
from rocklet.protocol.bodies.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from rocklet.protocol.errors import BodyError

__all__ = ["RegisterBrokerBody"]

_I32 = struct.Struct(">i")
#: Refuse to inflate more than this: a registration of 100k topics is ~5 MiB.
MAX_INFLATED_SIZE: Final = 64 * 1024 * 1024


class _Reader:
    """Bounds-checked reads over the inflated bytes."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def int32(self, what: str) -> int:
        if self._pos + 4 > len(self._data):
            raise BodyError(f"compressed register body is truncated before the {what}")
        (value,) = _I32.unpack_from(self._data, self._pos)
        self._pos += 4
        if value < 0:
            raise BodyError(f"compressed register body has a negative {what}: {value}")
        return int(value)

    def chunk(self, what: str) -> str:
        size = self.int32(f"{what} length")
        end = self._pos + size
        if end > len(self._data):
            raise BodyError(f"compressed register body {what} overruns the data ({size} bytes)")
        raw = self._data[self._pos : end]
        self._pos = end
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BodyError(f"compressed register body {what} is not UTF-8") from None


def _inflate(data: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, MAX_INFLATED_SIZE)
    except zlib.error as exc:
        raise BodyError(f"compressed register body does not inflate: {exc}") from None
    if inflater.unconsumed_tail:
        raise BodyError(f"compressed register body inflates past {MAX_INFLATED_SIZE} bytes")
    return out


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    """A broker's registration: its topic table and filter servers."""

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper
    filter_server_list: tuple[str, ...] = ()

    def to_json(self) -> bytes:
        """Serialize the plain (``compressed=false``) form."""
        body: dict[str, Any] = {
            "filterServerList": list(self.filter_server_list),
            "topicConfigSerializeWrapper": self.topic_config_serialize_wrapper.to_dict(),
        }
        return encode(body)

    @classmethod
    def from_json(cls, data: bytes) -> Self:
        """Parse the plain form.

        Raises:
            BodyError: Not a valid RegisterBrokerBody.
        """
        what = "RegisterBrokerBody"
        obj = parse_object(data, what)
        wrapper = TopicConfigSerializeWrapper.from_dict(
            get_map(obj, "topicConfigSerializeWrapper", what)
        )
        return cls(wrapper, get_str_list(obj, "filterServerList", what))

    def encode_compressed(self) -> bytes:
        """Serialize the compressed (``compressed=true``) form.

        Returns:
            The zlib stream.
        """
        wrapper = self.topic_config_serialize_wrapper
        parts: list[bytes] = []

        def chunk(raw: bytes) -> None:
            parts.append(_I32.pack(len(raw)))
            parts.append(raw)

        chunk(wrapper.data_version.to_json())
        parts.append(_I32.pack(len(wrapper.topic_config_table)))
        for config in wrapper.topic_config_table.values():
            chunk(config.encode().encode())
        chunk(fastjson.dumps(list(self.filter_server_list)).encode())
        return zlib.compress(b"".join(parts), zlib.Z_BEST_COMPRESSION)

    @classmethod
    def decode_compressed(cls, data: bytes) -> Self:
        """Parse the compressed form.

        Raises:
            BodyError: The stream does not inflate or its contents are malformed.
        """
        reader = _Reader(_inflate(data))
        version = DataVersion.from_json(reader.chunk("DataVersion").encode())
        count = reader.int32("topic count")
        table: dict[str, TopicConfig] = {}
        for _ in range(count):
            config = TopicConfig.decode(reader.chunk("TopicConfig"))
            table[config.topic_name] = config
        servers_text = reader.chunk("filterServerList")
        try:
            servers = fastjson.loads(servers_text)
        except ValueError:
            raise BodyError(f"filterServerList is not JSON: {servers_text[:80]!r}") from None
        filters = get_str_list({"filterServerList": servers}, "filterServerList", "register")
        return cls(TopicConfigSerializeWrapper(table, version), filters)

    @classmethod
    def decode(cls, data: bytes, *, compressed: bool) -> Self:
        """Parse either form, as the request header's ``compressed`` flag says.

        Raises:
            BodyError: The body is malformed.
        """
        return cls.decode_compressed(data) if compressed else cls.from_json(data)
