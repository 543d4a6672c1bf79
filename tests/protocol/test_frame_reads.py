"""Reading into the decoder (asyncio's BufferedProtocol): the scratch buffer, what is held.

Every decoding test also reads its bytes this way (``helpers.assert_decodes``); these
pin down the buffer rules: whole frames are decoded where the read left them and
nothing is held afterwards; a frame cut by a read is copied once into a buffer sized
for it, and the rest is read in place; a length alone sets aside at most
``RESERVE_AHEAD``; bytes left undecoded in the shared scratch survive another
decoder's read.
"""

from __future__ import annotations

import pytest

from rocklet.protocol import FrameDecoder, RemotingCommand, encode_command
from rocklet.protocol.frame import RESERVE_AHEAD, scratch_buffer
from tests.protocol.helpers import read_into
from tests.speedups_support import compiled_module


def frames(count: int, size: int) -> tuple[list[RemotingCommand], bytes]:
    cmds = [RemotingCommand(code=11, opaque=i, body=bytes([i % 256]) * size) for i in range(count)]
    return cmds, b"".join(encode_command(c) for c in cmds)


def test_whole_frames_are_decoded_from_the_scratch_and_nothing_is_held() -> None:
    cmds, data = frames(20, 1000)
    decoder = FrameDecoder(scratch=scratch_buffer())
    assert decoder.held == 0
    assert read_into(decoder, data, len(data)) == (len(data), cmds)
    assert (decoder.buffered, decoder.held) == (0, 0)


def test_a_cut_frame_is_copied_once_and_its_rest_is_read_in_place() -> None:
    (cmd,), data = frames(1, 200_000)
    decoder = FrameDecoder(scratch=scratch_buffer())
    assert read_into(decoder, data, 190_000) == (190_000, [])
    # Moved out of the scratch into a buffer the size of the whole frame...
    assert (decoder.buffered, decoder.held) == (190_000, len(data))
    # ...so the next read is offered exactly the rest of it, in that buffer.
    with decoder.get_buffer(-1) as view:
        assert len(view) == len(data) - 190_000
    assert read_into(decoder, data[190_000:], len(data)) == (len(data) - 190_000, [cmd])
    assert (decoder.buffered, decoder.held) == (0, 0)


def test_a_length_alone_sets_aside_at_most_reserve_ahead() -> None:
    huge = 8 * 1024 * 1024
    prefix = huge.to_bytes(4, "big") + (1 << 24).to_bytes(4, "big")
    decoder = FrameDecoder(scratch=scratch_buffer())
    assert read_into(decoder, prefix, len(prefix)) == (8, [])
    assert decoder.held <= RESERVE_AHEAD
    with decoder.get_buffer(-1) as view:
        assert len(view) <= RESERVE_AHEAD
    # Beyond it, the buffer grows with what really arrives (doubling), no faster.
    received = 8
    chunk = b"\0" * 65536
    while received < 2 * RESERVE_AHEAD:
        n, _ = read_into(decoder, chunk, len(chunk))
        received += n
        assert decoder.held <= max(RESERVE_AHEAD, 2 * received)


def test_bytes_left_in_the_scratch_survive_another_decoders_read() -> None:
    # A connection stops after one command (its per-turn budget); the rest of its read
    # must be moved out before the next read, of any connection, reuses the scratch.
    scratch = scratch_buffer()
    cmds, data = frames(3, 500)
    decoder = FrameDecoder(scratch=scratch)
    with decoder.get_buffer(-1) as view:
        view[: len(data)] = data
    decoder.buffer_updated(len(data))
    assert decoder.next_command() == cmds[0]
    decoder.settle()
    assert decoder.held == decoder.buffered == len(data) - len(encode_command(cmds[0]))
    other_cmds, other_data = frames(2, 700)
    assert read_into(FrameDecoder(scratch=scratch), other_data, len(other_data))[1] == other_cmds
    assert list(decoder.commands()) == cmds[1:]


@pytest.mark.parametrize("read", [1, 100, 4096, 1 << 20])
def test_without_a_scratch_reads_go_to_the_decoders_own_buffer(read: int) -> None:
    cmds, data = frames(5, 3000)
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    pos = 0
    while pos < len(data):
        n, out = read_into(decoder, data[pos:], read)
        pos += n
        got += out
    assert got == cmds
    assert (decoder.buffered, decoder.held) == (0, 0)


def test_compiled_receive_buffer_is_bytearray_without_the_zeroing() -> None:
    speedups = compiled_module("rocklet.protocol._speedups")
    buf = speedups.receive_buffer(1000)
    assert type(buf) is bytearray
    assert len(buf) == 1000
    assert speedups.receive_buffer(0) == bytearray()
    with pytest.raises(ValueError, match="negative"):
        speedups.receive_buffer(-1)
