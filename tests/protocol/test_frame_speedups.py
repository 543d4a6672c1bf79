"""The compiled frame steps (decode of a whole binary frame, the answer's head) against
the Python path they shortcut: the same commands, the same bytes, the same errors."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol import frame, header_codec
from rocklet.protocol.codes import SerializeType
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import FrameError
from rocklet.protocol.frame import FrameDecoder, encode_command_into
from tests.protocol.test_speedups import commands
from tests.speedups_support import compiled_module

_C = compiled_module("rocklet.protocol._speedups")


@pytest.fixture(autouse=True)
def _compiled_wired() -> Iterator[None]:
    """The frame module calls the compiled steps even under ROCKLET_PURE_PYTHON=1."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frame, "_speedups", _C)
        patch.setattr(header_codec, "_speedups", _C)
        yield


def _decoded(stream: bytes, chunk: int, compiled: bool) -> list[object]:
    """Feed ``stream`` in ``chunk``-byte reads: every command, then the error or what
    is left buffered."""
    out: list[object] = []
    with pytest.MonkeyPatch.context() as patch:
        if not compiled:
            patch.setattr(frame, "_speedups", None)
        decoder = FrameDecoder(max_frame_size=4096, max_header_size=1024)
        try:
            for at in range(0, len(stream), chunk):
                decoder.feed(stream[at : at + chunk])
                while (cmd := decoder.next_command()) is not None:
                    out.append(cmd)
        except FrameError as exc:
            out.append(("error", str(exc)))  # the decoder is unusable from here on
        else:
            out.append(("buffered", decoder.buffered))
    return out


def _wire(cmd: RemotingCommand, compiled: bool, extra: tuple[bytes, ...] = ()) -> bytes:
    with pytest.MonkeyPatch.context() as patch:
        if not compiled:
            patch.setattr(frame, "_speedups", None)
        parts: list[bytes] = []
        size = encode_command_into(parts, cmd, extra)  # type: ignore[arg-type]
    data = b"".join(parts)
    assert size == len(data)
    return data


@settings(max_examples=300, deadline=None)
@given(st.lists(commands, min_size=1, max_size=4), st.integers(1, 64))
def test_frames_decode_as_the_python_path_decodes_them(
    cmds: list[RemotingCommand], chunk: int
) -> None:
    stream = b"".join(_wire(cmd, compiled=False) for cmd in cmds)
    assert _decoded(stream, chunk, compiled=True) == _decoded(stream, chunk, compiled=False)


@settings(max_examples=400, deadline=None)
@given(commands, st.data())
def test_damaged_frames_get_the_same_answer(cmd: RemotingCommand, data: st.DataObject) -> None:
    raw = bytearray(_wire(cmd, compiled=False) * 2)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    chunk = data.draw(st.integers(1, len(raw)))
    assert _decoded(bytes(raw), chunk, compiled=True) == _decoded(bytes(raw), chunk, compiled=False)


def test_lengths_beyond_the_limits_are_left_to_the_python_path() -> None:
    header = header_codec._encode_binary_py(RemotingCommand(code=1))
    for total, word in (
        (5000, (1 << 24) | len(header)),  # frame over the limit
        (4 + 2000, (1 << 24) | 2000),  # header over the limit
        (4 + len(header), (9 << 24) | len(header)),  # unknown serialize type
        (3, (1 << 24) | len(header)),  # below the minimum
        (4 + len(header), (1 << 24) | (len(header) + 1)),  # header beyond the frame
    ):
        stream = struct.pack(">ii", total, word) + header + b"\0" * 3000
        assert (
            _C.decode_binary_frame(
                bytearray(stream), 0, 4096, 1024, {}, object.__new__, RemotingCommand, (), 1
            )
            is None
        )
        result = _decoded(stream, len(stream), compiled=True)
        assert result[0][0] == "error"  # type: ignore[index]
        assert result == _decoded(stream, len(stream), compiled=False)


@settings(max_examples=400, deadline=None)
@given(commands, st.lists(st.binary(max_size=6), max_size=2))
def test_answers_encode_as_the_python_path_encodes_them(
    cmd: RemotingCommand, extra: list[bytes]
) -> None:
    assert _wire(cmd, True, tuple(extra)) == _wire(cmd, False, tuple(extra))


@pytest.mark.parametrize(
    "cmd",
    [
        RemotingCommand(code=40000, serialize_type=SerializeType.ROCKETMQ),
        RemotingCommand(code=1, version=-40000, serialize_type=SerializeType.ROCKETMQ),
        RemotingCommand(code=1, opaque=2**31, serialize_type=SerializeType.ROCKETMQ),
        RemotingCommand(code=1, flag=2**70, serialize_type=SerializeType.ROCKETMQ),
    ],
)
def test_out_of_range_answers_are_refused_with_the_python_reason(cmd: RemotingCommand) -> None:
    assert _C.encode_binary_head(cmd, {}, 0, 0) is None
    with pytest.raises(ValueError) as compiled:
        _wire(cmd, compiled=True)
    with pytest.raises(ValueError) as python:
        _wire(cmd, compiled=False)
    assert str(compiled.value) == str(python.value)
