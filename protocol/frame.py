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
their 4 bytes arrive, before anything is buffered for them; a length alone makes the
decoder set aside at most :data:`RESERVE_AHEAD` bytes.

It can also be read into directly (asyncio's ``BufferedProtocol``): :meth:`~FrameDecoder.
get_buffer` hands out free space, :meth:`~FrameDecoder.buffer_updated` says how much the
socket wrote there, and :meth:`~FrameDecoder.settle` ends the read. With nothing pending,
a read lands in a scratch buffer (the caller's, shared by the decoders of one thread:
:func:`scratch_buffer` makes one) and whole frames are decoded from it where they lie;
only a frame cut by the read's end is copied, once, into the decoder's own buffer, which
is sized for the whole frame so the rest of it arrives in place. No bytes object per
read, no growing buffer that copies itself as a large answer trickles in, and an idle
connection holds no buffer at all.
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
    "RESERVE_AHEAD",
    "SCRATCH_SIZE",
    "FrameDecoder",
    "encode_command",
    "encode_command_into",
    "encode_command_parts",
    "scratch_buffer",
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
#: The most a frame's announced length sets aside before its bytes arrive; a longer
#: frame's buffer grows (doubling) as they do, so a hostile length costs little.
RESERVE_AHEAD: Final = 512 * 1024
# Free space offered to a read when nothing says how much is coming.
_MIN_READ: Final = 64 * 1024
#: Size of a scratch buffer from :func:`scratch_buffer`: a read takes what the socket
#: has, up to this.
SCRATCH_SIZE: Final = 1024 * 1024
_EMPTY: Final = bytearray()


def _copy(dest: bytearray, src: bytearray, start: int, end: int) -> None:
    """``dest[: end - start] = src[start:end]`` with one copy.

    Through views: assigning to a slice of a bytearray from anything but a bytearray
    copies the value first.
    """
    with memoryview(dest) as into, memoryview(src) as view:
        into[: end - start] = view[start:end]


def scratch_buffer() -> bytearray:
    """A scratch buffer for the decoders of one thread (see :class:`FrameDecoder`).

    Returns:
        A new buffer of :data:`SCRATCH_SIZE` bytes.
    """
    return bytearray(SCRATCH_SIZE)


# The compiled twin of next_command's usual frame (None: the Python path serves all).
_speedups = compiled.load("rocklet.protocol._speedups")
# A buffer for the decoder's own use: compiled, without zeroing what reads overwrite.
_new_buffer = bytearray if _speedups is None else _speedups.receive_buffer
_ROCKETMQ: Final = SerializeType.ROCKETMQ
_JSON: Final = SerializeType.JSON

Buffer: TypeAlias = bytes | bytearray | memoryview


class FrameDecoder:
    """Incremental decoder of remoting frames.

    Not thread-safe: one decoder per connection, driven by one reader.

    Args:
        max_frame_size: Largest accepted total length (the frame's first word).
        max_header_size: Largest accepted header length.
        scratch: Where :meth:`get_buffer` lets a read land when nothing is pending:
            a buffer shared by decoders that never read at the same time (those of one
            event loop). Default: none (reads go to the decoder's own buffer).
    """

    __slots__ = ("_buf", "_end", "_max_frame", "_max_header", "_pos", "_scratch")

    def __init__(
        self,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
        scratch: bytearray | None = None,
    ) -> None:
        # Bytes [_pos, _end) of _buf are received and not decoded yet. _buf is the
        # decoder's own buffer, _EMPTY when nothing is pending, or during a read the
        # scratch buffer.
        self._buf = _EMPTY
        self._pos = 0
        self._end = 0
        self._max_frame = max_frame_size
        self._max_header = max_header_size
        self._scratch = scratch

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as commands."""
        return self._end - self._pos

    @property
    def held(self) -> int:
        """Size of the decoder's own buffer: 0 when nothing is pending (after a settle)."""
        buf = self._buf
        return 0 if buf is self._scratch else len(buf)

    def feed(self, data: Buffer) -> None:
        """Append received bytes (a copy).

        Args:
            data: Any number of bytes, in arrival order.
        """
        size = len(data)
        if not size:
            return
        self.settle()
        self._reserve(size)
        end = self._end
        # Into a view: slice assignment on the bytearray itself copies ``data`` first.
        with memoryview(self._buf) as view:
            view[end : end + size] = data
        self._end = end + size

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Free space for the next read (asyncio's ``BufferedProtocol.get_buffer``).

        Call :meth:`buffer_updated` with what was written there, then :meth:`settle`
        once the commands of the read are taken (before the next read of any decoder of
        those sharing the scratch buffer).

        Args:
            sizehint: Ignored (what is pending decides the size).

        Returns:
            A writable view of the free space.
        """
        scratch = self._scratch
        if self._pos == self._end and scratch is not None:
            self._buf = scratch
            self._pos = self._end = 0
            return memoryview(scratch)
        self._reserve(self._wanted())
        return memoryview(self._buf)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        """Record that a read wrote ``nbytes`` into the last :meth:`get_buffer` space.

        Args:
            nbytes: Bytes written.
        """
        self._end += nbytes

    def settle(self) -> None:
        """End a read: bytes left in the scratch buffer move to the decoder's own.

        Also lets go of the decoder's own buffer once everything in it is decoded.
        """
        buf = self._buf
        if buf is _EMPTY:
            return
        pos, end = self._pos, self._end
        if pos == end:
            self._buf = _EMPTY
            self._pos = self._end = 0
        elif buf is self._scratch:
            # Sized for the whole frame, so the rest of it is read in place.
            pending = end - pos
            own = _new_buffer(max(pending, self._frame_size(buf, pos)))
            _copy(own, buf, pos, end)
            self._buf, self._pos, self._end = own, 0, pending

    def _frame_size(self, buf: bytearray, pos: int) -> int:
        """The whole frame at ``pos`` (what of it is announced, up to RESERVE_AHEAD)."""
        if self._end - pos < 4:
            return 0
        total = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
        if total < 4 or total > self._max_frame:
            return 0  # next_command refuses it
        return min(4 + total, RESERVE_AHEAD)

    def _wanted(self) -> int:
        """Free space worth offering the next read: the rest of the pending frame.

        Only the rest: what follows the frame goes to the scratch buffer next time.
        """
        rest = self._frame_size(self._buf, self._pos) - (self._end - self._pos)
        return rest if rest > 0 else _MIN_READ

    def _reserve(self, room: int) -> None:
        """Make ``room`` free bytes after ``_end`` in the decoder's own buffer."""
        buf, pos, end = self._buf, self._pos, self._end
        if buf is not _EMPTY and buf is not self._scratch and len(buf) - end >= room:
            return
        pending = end - pos
        size = len(buf) if buf is not self._scratch else 0
        if pending + room > size:
            # Grow by doubling at least, so a frame longer than RESERVE_AHEAD arriving
            # in small reads is copied O(log n) times, not once per read.
            size = max(pending + room, 2 * size)
        own = _new_buffer(size)
        if pending:
            _copy(own, buf, pos, end)
        self._buf, self._pos, self._end = own, 0, pending

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
        buf, pos, size = self._buf, self._pos, self._end
        if _speedups is not None:
            # The usual frame (binary or usual JSON header, all here) in one compiled step.
            got = _speedups.decode_frame(
                buf, pos, size, self._max_frame, self._max_header, _LANG_BY_NUMBER, _new,
                RemotingCommand, _SLOTS, _ROCKETMQ, _JSON,
            )  # fmt: skip
            if got is not None:
                cmd, end = got
                self._consumed(end)
                return cmd  # type: ignore[no-any-return]
        avail = size - pos
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
        if size < end:
            return None
        start = pos + 8
        # Through a memoryview: slicing the bytearray and then converting would copy twice.
        with memoryview(buf) as view:
            header = bytes(view[start : start + header_len])
            body = bytes(view[start + header_len : end])
        self._consumed(end)
        return decode_header(stype, header, body)

    def _consumed(self, end: int) -> None:
        """Move past a frame that ended at ``end``."""
        if end == self._end:
            self._pos = self._end = 0
            if self._buf is not self._scratch:
                self._buf = _EMPTY  # nothing pending: an idle decoder holds no buffer
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
