"""Shared decoder checks: every decoding test feeds its bytes four ways (h11's ``tr``).

A decoder that only works when a frame arrives in one piece, or that eats into the
next frame, fails here even if the whole-buffer case passes.
"""

from __future__ import annotations

from typing import Any, Final

import pytest

from rocklet.protocol import FrameDecoder, FrameError, RemotingCommand, encode_command
from rocklet.protocol.frame import scratch_buffer

#: A valid frame used as "the start of the next frame" after the bytes under test.
_NEXT_FRAME: Final = encode_command(
    RemotingCommand(code=34, opaque=7, ext_fields={"k": "v"}, body=b"next-frame-body")
)
#: Read sizes of the buffered way (cycled): a byte, a few, a length word's worth, a page.
_READ_SIZES: Final = (1, 3, 8, 4096, 5, 65536)
#: Cuts of the next frame that stay incomplete: inside the total length, the whole
#: length word, both length words, and everything but the last byte.
_TRAILING_CUTS: Final = (1, 4, 8, len(_NEXT_FRAME) - 1)


def frame_ends(data: bytes) -> list[int]:
    """Offsets just past each frame of a well-formed stream, from its length words.

    Args:
        data: Whole frames, back to back.

    Returns:
        One end offset per frame.
    """
    ends, pos = [], 0
    while pos < len(data):
        pos += 4 + int.from_bytes(data[pos : pos + 4], "big")
        ends.append(pos)
    assert pos == len(data), "test data does not end on a frame boundary"
    return ends


def decode_all(data: bytes, **limits: Any) -> list[RemotingCommand]:
    """Decode a stream of whole frames in one feed.

    Args:
        data: Whole frames, back to back.
        **limits: FrameDecoder keyword arguments.

    Returns:
        The commands.
    """
    decoder = FrameDecoder(**limits)
    decoder.feed(data)
    commands = list(decoder.commands())
    assert decoder.buffered == 0
    return commands


def assert_decodes(data: bytes, expected: list[RemotingCommand], **limits: Any) -> None:
    """Assert ``data`` decodes to ``expected`` however it is cut into pieces.

    1. Whole: one feed yields exactly ``expected`` and leaves nothing buffered.
    2. One byte at a time: ``next_command`` is ``None`` until each frame's last
       byte arrives, and then returns that frame's command.
    3. With trailing bytes of an incomplete next frame: ``expected`` comes out, the
       trailing bytes stay buffered untouched, and completing them yields the next
       frame's command.
    4. Read into, as a ``BufferedProtocol`` transport does (:func:`read_into`), in reads
       of many sizes, with another decoder sharing the scratch buffer reading its own
       stream between them: ``expected`` comes out and nothing is left held.

    Args:
        data: Whole frames, back to back.
        expected: The commands they encode.
        **limits: FrameDecoder keyword arguments.
    """
    assert decode_all(data, **limits) == expected
    _assert_byte_by_byte(data, expected, **limits)
    _assert_trailing_untouched(data, expected, **limits)
    _assert_read_into(data, expected, **limits)


def _assert_byte_by_byte(data: bytes, expected: list[RemotingCommand], **limits: Any) -> None:
    ends = set(frame_ends(data))
    assert len(ends) == len(expected)
    decoder = FrameDecoder(**limits)
    pending = iter(expected)
    view = memoryview(data)
    for i in range(len(data)):
        decoder.feed(view[i : i + 1])
        got = decoder.next_command()
        if i + 1 in ends:
            assert got == next(pending), f"wrong command completed at byte {i + 1}"
        else:
            assert got is None, f"a command came out at byte {i + 1}, inside a frame"
    assert next(pending, None) is None
    assert decoder.buffered == 0


def _assert_trailing_untouched(data: bytes, expected: list[RemotingCommand], **limits: Any) -> None:
    (next_cmd,) = decode_all(_NEXT_FRAME)
    for cut in _TRAILING_CUTS:
        decoder = FrameDecoder(**limits)
        decoder.feed(data + _NEXT_FRAME[:cut])
        assert list(decoder.commands()) == expected
        assert decoder.next_command() is None
        assert decoder.buffered == cut, f"trailing {cut} bytes were not left untouched"
        decoder.feed(_NEXT_FRAME[cut:])
        assert decoder.next_command() == next_cmd
        assert decoder.buffered == 0


def read_into(decoder: FrameDecoder, data: bytes, size: int) -> tuple[int, list[RemotingCommand]]:
    """One read as a ``BufferedProtocol`` transport makes it, and the commands it completes.

    Args:
        decoder: The decoder.
        data: Bytes the socket has; at most ``size`` of them, and at most what
            ``get_buffer`` offers, are read.
        size: The read's size limit.

    Returns:
        Bytes read, and the commands decoded after the read (before ``settle``).
    """
    with decoder.get_buffer(-1) as view:
        n = min(len(view), len(data), size)
        assert n > 0, "get_buffer offered no room"
        view[:n] = data[:n]
    decoder.buffer_updated(n)
    try:
        return n, list(decoder.commands())
    finally:
        decoder.settle()


def _assert_read_into(data: bytes, expected: list[RemotingCommand], **limits: Any) -> None:
    scratch = scratch_buffer()
    decoder = FrameDecoder(scratch=scratch, **limits)
    other = FrameDecoder(scratch=scratch)
    (next_cmd,) = decode_all(_NEXT_FRAME)
    got: list[RemotingCommand] = []
    pos = step = 0
    while pos < len(data):
        n, commands = read_into(decoder, data[pos:], _READ_SIZES[step % len(_READ_SIZES)])
        got += commands
        pos += n
        step += 1
        # The other decoder's read lands in the same scratch buffer meanwhile.
        assert read_into(other, _NEXT_FRAME, len(_NEXT_FRAME)) == (len(_NEXT_FRAME), [next_cmd])
    assert got == expected
    assert (decoder.buffered, decoder.held, other.held) == (0, 0, 0)


def assert_refuses(data: bytes, *, at: int, match: str, **limits: Any) -> None:
    """Assert the decoder refuses ``data`` with a FrameError as soon as byte ``at`` arrives.

    Feeding the whole buffer must raise; feeding byte by byte must return ``None`` for
    the first ``at - 1`` bytes and raise on byte ``at``, so the refusal cannot depend
    on bytes that come later (or on buffering them).

    Args:
        data: The offending bytes (at least ``at`` of them).
        at: 1-based index of the byte that makes the input refusable.
        match: Regular expression the error message must match.
        **limits: FrameDecoder keyword arguments.
    """
    assert len(data) >= at
    decoder = FrameDecoder(**limits)
    decoder.feed(data)
    with pytest.raises(FrameError, match=match):
        decoder.next_command()
    decoder = FrameDecoder(**limits)
    for i in range(at - 1):
        decoder.feed(data[i : i + 1])
        assert decoder.next_command() is None, f"refused early, at byte {i + 1}"
    decoder.feed(data[at - 1 : at])
    with pytest.raises(FrameError, match=match):
        decoder.next_command()


def raw_frame(header: bytes, body: bytes = b"", *, serialize_type: int = 0) -> bytes:
    """Build a frame around hand-made header bytes.

    Args:
        header: Header bytes exactly as a peer would send them.
        body: Body bytes.
        serialize_type: The high byte of the header-length word.

    Returns:
        The frame.
    """
    word = (serialize_type << 24) | len(header)
    total = 4 + len(header) + len(body)
    return total.to_bytes(4, "big") + word.to_bytes(4, "big") + header + body
