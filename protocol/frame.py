"""Frame codec: an incremental decoder and an encoder for remoting frames.

Layout of one frame (both directions, big-endian):

    ======  ====  ==============================================================
    offset  size  field
    ======  ====  ==============================================================
    0       4     total length T = 4 + header length + body length (not itself)
    4       4     serialize type << 24 | header length H
    8       H     header (see :mod:`rocklet.protocol.header_codec`)
    8+H     T-4-H body
    ======  ====  ==============================================================

The decoder is sans-IO (h11/wsproto style): :meth:`FrameDecoder.feed` takes any number
of bytes and :meth:`FrameDecoder.next_command` returns whole commands. Lengths are
checked against the limits, and the serialize type against the known ones, as soon as
their 4 bytes arrive, before anything is buffered for them, so a hostile length cannot
make us allocate.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Final, TypeAlias

from rocklet.protocol import compiled
from rocklet.protocol.codes import SerializeType
from rocklet.protocol.command import _SLOTS, RemotingCommand, _new
from rocklet.protocol.errors import FrameError
from rocklet.protocol.header_codec import (
    _LANG_BY_NAME,
    _LANG_BY_NUMBER,
    _OTHER,
    decode_header,
    encode_header,
)

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "DEFAULT_MAX_HEADER_SIZE",
    "FrameDecoder",
    "encode_command",
    "encode_command_into",
    "encode_command_parts",
]

#: Java's ``NettyDecoder`` default (``com.rocketmq.remoting.frameMaxLength``): 16 MiB.
#: A batch of messages up to the 4 MiB message limit fits with room to spare.
DEFAULT_MAX_FRAME_SIZE: Final = 16 * 1024 * 1024
#: Java has no separate header limit. Real headers are under 2 KiB, but properties may
#: reach 32767 bytes and JSON escapes each 0x01/0x02 separator as six characters, so
#: the cap leaves room for the worst legal header and still stops absurd ones.
DEFAULT_MAX_HEADER_SIZE: Final = 1024 * 1024

_LENGTHS = struct.Struct(">ii")
_PREFIX = struct.Struct(">II")
#: The header length shares its word with the serialize type: 24 bits.
_MAX_HEADER_FIELD: Final = 0xFFFFFF
_KNOWN_TYPES: Final = frozenset(t.value for t in SerializeType)
# Compact the receive buffer once this many consumed bytes sit at its front: moving
# the unread tail is O(tail), so doing it rarely keeps decoding linear.
_COMPACT_AT: Final = 64 * 1024
# The compiled twin of next_command's usual frame (None: the Python path serves all).
_speedups = compiled.load("rocklet.protocol._speedups")
_ROCKETMQ: Final = SerializeType.ROCKETMQ
_JSON: Final = SerializeType.JSON

Buffer: TypeAlias = bytes | bytearray | memoryview


class FrameDecoder:
    """Incremental decoder of remoting frames.

    Not thread-safe: one decoder per connection, driven by one reader.

    Args:
        max_frame_size: Largest accepted total length (the frame's first word).
        max_header_size: Largest accepted header length.
    """

    __slots__ = ("_buf", "_max_frame", "_max_header", "_pos")

    def __init__(
        self,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
    ) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._max_frame = max_frame_size
        self._max_header = max_header_size

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as commands."""
        return len(self._buf) - self._pos

    def feed(self, data: Buffer) -> None:
        """Append received bytes.

        Args:
            data: Any number of bytes, in arrival order.
        """
        self._buf += data

    def next_command(self) -> RemotingCommand | None:
        """Return the next whole command, or ``None`` when more bytes are needed.

        Returns:
            A decoded command, or ``None``.

        Raises:
            FrameError: The stream is broken (bad lengths, unknown serialize type,
                unparsable header). Lengths and the serialize type are refused as soon
                as their bytes arrive. The decoder is then unusable; close the
                connection.
        """
        buf, pos = self._buf, self._pos
        if _speedups is not None:
            # The usual frame (binary or usual JSON header, all here) in one compiled step.
            got = _speedups.decode_frame(
                buf, pos, self._max_frame, self._max_header, _LANG_BY_NUMBER, _new,
                RemotingCommand, _SLOTS, _ROCKETMQ, _JSON,
            )  # fmt: skip
            if got is not None:
                cmd, end = got
                if end == len(buf):  # _consumed's usual case, inlined
                    buf.clear()
                    self._pos = 0
                else:
                    self._consumed(end)
                return cmd  # type: ignore[no-any-return]
        avail = len(buf) - pos
        if avail < 4:
            return None
        if avail < 8:
            # Only the total length is here; still refuse a bad one straight away.
            self._check_total(int.from_bytes(buf[pos : pos + 4], "big", signed=True))
            return None
        total, word = _LENGTHS.unpack_from(buf, pos)
        if total < 4 or total > self._max_frame:
            self._check_total(total)
        stype, header_len = (word >> 24) & 0xFF, word & _MAX_HEADER_FIELD
        if stype not in _KNOWN_TYPES:
            raise FrameError(f"unknown serialize type {stype}")
        if header_len > total - 4:
            raise FrameError(f"header length {header_len} exceeds frame length {total}")
        if header_len > self._max_header:
            raise FrameError(f"header length {header_len} exceeds the limit {self._max_header}")
        end = pos + 4 + total
        if len(buf) < end:
            return None
        start = pos + 8
        # Through a memoryview: slicing the bytearray and then converting would copy
        # twice. The view must be released before the buffer is resized below.
        with memoryview(buf) as view:
            header = bytes(view[start : start + header_len])
            body = bytes(view[start + header_len : end])
        self._consumed(end)
        return decode_header(stype, header, body)

    def _consumed(self, end: int) -> None:
        """Move past a frame that ended at ``end``, compacting the buffer now and then."""
        buf = self._buf
        if end == len(buf):
            buf.clear()
            self._pos = 0
        elif end >= _COMPACT_AT:
            del buf[:end]
            self._pos = 0
        else:
            self._pos = end

    def commands(self) -> Iterator[RemotingCommand]:
        """Yield every whole command buffered so far.

        Yields:
            Decoded commands, in order.

        Raises:
            FrameError: As :meth:`next_command`.
        """
        while (cmd := self.next_command()) is not None:
            yield cmd

    def _check_total(self, total: int) -> None:
        if total < 4:
            raise FrameError(f"frame length {total} is smaller than the minimum 4")
        if total > self._max_frame:
            raise FrameError(f"frame length {total} exceeds the limit {self._max_frame}")


def _prefix(cmd: RemotingCommand, header: bytes, body_len: int) -> bytes:
    if len(header) > _MAX_HEADER_FIELD:
        # The length would spill into the serialize-type byte and garble the frame.
        raise ValueError(f"header of {len(header)} bytes does not fit the 24-bit length field")
    return _PREFIX.pack(4 + len(header) + body_len, (cmd.serialize_type << 24) | len(header))


def encode_command_parts(cmd: RemotingCommand, extra_body: Sequence[Buffer] = ()) -> list[Buffer]:
    """Encode a command as buffers for ``writelines`` (no copy of the body).

    Args:
        cmd: The command; ``cmd.body`` is the first part of the body.
        extra_body: More body parts sent after ``cmd.body``, e.g. slices of a mapped
            commitlog for a pull response.

    Returns:
        The frame as a list of buffers whose concatenation is the wire form.

    Raises:
        ValueError: A header field does not fit its wire type
            (:func:`rocklet.protocol.header_codec.encode_header`).
    """
    parts: list[Buffer] = []
    encode_command_into(parts, cmd, extra_body)
    return parts


def encode_command_into(
    out: list[Buffer], cmd: RemotingCommand, extra_body: Sequence[Buffer] = ()
) -> int:
    """Append a command's frame to ``out`` as buffers, as :func:`encode_command_parts`.

    For writers that gather many frames before one ``writelines``: no list per frame,
    and the frame's size comes back for their bookkeeping.

    Args:
        out: Where the buffers are appended.
        cmd: The command; ``cmd.body`` is the first part of the body.
        extra_body: More body parts sent after ``cmd.body``.

    Returns:
        The frame's size in bytes.

    Raises:
        ValueError: As :func:`encode_command_parts`.
    """
    body = cmd.body
    body_len = len(body)
    for part in extra_body:
        body_len += len(part)
    head = None
    if _speedups is not None:
        # Length words and header in one compiled step (None: a field the Python path
        # refuses with its reason, or JSON text that needs escapes).
        stype = cmd.serialize_type
        if stype is _ROCKETMQ:
            head = _speedups.encode_binary_head(cmd, _LANG_BY_NAME, _OTHER, body_len)
        elif stype is _JSON:
            head = _speedups.encode_json_head(cmd, body_len)
    if head is None:
        header = encode_header(cmd)
        header_len = len(header)
        if header_len > _MAX_HEADER_FIELD:
            _prefix(cmd, header, body_len)  # raises
        head = (
            _PREFIX.pack(4 + header_len + body_len, (cmd.serialize_type << 24) | header_len)
            + header
        )
    out.append(head)
    if body:
        out.append(body)
    if extra_body:
        out.extend(extra_body)
    return len(head) + body_len


def encode_command(cmd: RemotingCommand) -> bytes:
    """Encode a command as one frame.

    Args:
        cmd: The command.

    Returns:
        The frame's bytes.

    Raises:
        ValueError: A header field does not fit its wire type
            (:func:`rocklet.protocol.header_codec.encode_header`).
    """
    header = encode_header(cmd)
    return _prefix(cmd, header, len(cmd.body)) + header + cmd.body
