"""Property tests of the frame codec: round trips, fuzz invariant, arbitrary chunking.

Value ranges follow the wire types (documented in :mod:`rocklet.protocol.header_codec`): JSON
and msgpack carry code, opaque, flag and version as int32; the ROCKETMQ binary header
narrows code and version to int16, knows languages only by number, and cannot tell an
empty remark from a missing one. Out-of-range values are refused on encode
(tests in ``test_frame.py``), so the strategies stay inside the ranges.
"""

from __future__ import annotations

import json
import struct

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocklet.protocol import (
    FrameDecoder,
    LanguageCode,
    ProtocolError,
    RemotingCommand,
    SerializeType,
    encode_command,
)
from tests.protocol.helpers import assert_decodes

INT32 = st.integers(-(2**31), 2**31 - 1)
INT16 = st.integers(-(2**15), 2**15 - 1)
TEXT = st.text(max_size=40)
EXT = st.dictionaries(TEXT, TEXT, max_size=8)
BODY = st.binary(max_size=300)

_FAST = settings(max_examples=150, deadline=None)


@st.composite
def commands(draw: st.DrawFn, stype: SerializeType | None = None) -> RemotingCommand:
    """Any command the given serialization can carry exactly."""
    stype = draw(st.sampled_from(SerializeType)) if stype is None else stype
    if stype == SerializeType.ROCKETMQ:
        code, version = draw(INT16), draw(INT16)
        language = draw(st.sampled_from([lang.name for lang in LanguageCode]))
        remark = draw(st.none() | st.text(min_size=1, max_size=40))
    else:
        code, version = draw(INT32), draw(INT32)
        language, remark = draw(TEXT), draw(st.none() | TEXT)
    return RemotingCommand(
        code=code,
        opaque=draw(INT32),
        flag=draw(INT32),
        remark=remark,
        ext_fields=draw(EXT),
        body=draw(BODY),
        language=language,
        version=version,
        serialize_type=stype,
    )


@_FAST
@given(commands(SerializeType.JSON))
def test_json_round_trip(cmd: RemotingCommand) -> None:
    assert_decodes(encode_command(cmd), [cmd])


@_FAST
@given(commands(SerializeType.ROCKETMQ))
def test_binary_round_trip(cmd: RemotingCommand) -> None:
    assert_decodes(encode_command(cmd), [cmd])


@_FAST
@given(commands(SerializeType.MSGPACK))
def test_msgpack_round_trip(cmd: RemotingCommand) -> None:
    assert_decodes(encode_command(cmd), [cmd])


@_FAST
@given(st.lists(commands(), min_size=1, max_size=6), st.data())
def test_any_split_of_a_stream_yields_the_same_commands(
    cmds: list[RemotingCommand], data: st.DataObject
) -> None:
    stream = b"".join(encode_command(c) for c in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    decoder, got = FrameDecoder(), list[RemotingCommand]()
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        decoder.feed(stream[start:end])
        got.extend(decoder.commands())
    assert got == cmds
    assert decoder.buffered == 0


# --- fuzz invariant: commands or ProtocolError, never anything else ------------------------


def _feed_whole(data: bytes) -> None:
    decoder = FrameDecoder(max_frame_size=1 << 16, max_header_size=1 << 12)
    decoder.feed(data)
    try:
        for _ in decoder.commands():
            pass
    except ProtocolError:
        pass


def _feed_bytewise(data: bytes) -> None:
    decoder = FrameDecoder(max_frame_size=1 << 16, max_header_size=1 << 12)
    try:
        for i in range(len(data)):
            decoder.feed(data[i : i + 1])
            for _ in decoder.commands():
                pass
    except ProtocolError:
        pass


def _framed(header: bytes, stype: int) -> bytes:
    return struct.pack(">iI", 4 + len(header), (stype << 24) | len(header)) + header


@st.composite
def hostile_streams(draw: st.DrawFn) -> bytes:
    """Raw bytes, or valid length words around random or mutated header bytes."""
    kind = draw(st.sampled_from(["raw", "header", "mutated"]))
    if kind == "raw":
        return draw(st.binary(max_size=200))
    stype = draw(st.integers(0, 3))
    if kind == "header":
        return _framed(draw(st.binary(max_size=120)), stype)
    frame = bytearray(encode_command(draw(commands())))
    for _ in range(draw(st.integers(1, 4))):
        frame[draw(st.integers(0, len(frame) - 1))] = draw(st.integers(0, 255))
    return bytes(frame)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_streams())
def test_hostile_bytes_yield_commands_or_protocol_errors(data: bytes) -> None:
    _feed_whole(data)
    _feed_bytewise(data)


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
_PACKABLE = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | TEXT | BODY,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(TEXT | st.integers(0, 9) | BODY, inner, max_size=3)
    ),
    max_leaves=8,
)
_HEADER_KEYS = st.sampled_from(["code", "opaque", "flag", "remark", "extFields", "version"])


@_FAST
@given(st.dictionaries(_HEADER_KEYS, _PACKABLE, max_size=6))
def test_any_msgpack_map_yields_a_command_or_a_protocol_error(obj: dict[str, object]) -> None:
    # msgpack can carry what JSON cannot (bin, int keys); none of it may escape as a
    # TypeError from the normaliser.
    data = _framed(msgpack.packb(obj, use_bin_type=True), SerializeType.MSGPACK)
    _feed_whole(data)


@_FAST
@given(st.dictionaries(_HEADER_KEYS, _JSONISH, max_size=6))
def test_any_json_object_yields_a_command_or_a_protocol_error(obj: dict[str, object]) -> None:
    data = _framed(json.dumps(obj).encode(), SerializeType.JSON)
    _feed_whole(data)
