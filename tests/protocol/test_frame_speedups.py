"""The compiled frame steps (decode of a whole binary or usual-JSON frame, the answer's
head) against the Python path they shortcut: the same commands, the same bytes, the same
errors."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol import frame, header_codec
from rocklet.protocol.codes import ResponseCode, SerializeType
from rocklet.protocol.command import _SLOTS, RemotingCommand
from rocklet.protocol.errors import FrameError
from rocklet.protocol.frame import FrameDecoder, encode_command_into
from rocklet.protocol.header_codec import _LANG_BY_NUMBER
from tests.protocol.test_speedups import commands, int16, int32
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
            _C.decode_frame(
                bytearray(stream),
                0,
                len(stream),
                4096,
                1024,
                {},
                object.__new__,
                RemotingCommand,
                (),
                1,
                0,
            )
            is None
        )
        result = _decoded(stream, len(stream), compiled=True)
        assert result[0][0] == "error"  # type: ignore[index]
        assert result == _decoded(stream, len(stream), compiled=False)


# -- JSON headers: what the official clients write, and variations on it -------------

_int32 = st.integers(-(2**31), 2**31 - 1)
_plain = st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"]), max_size=12)
# Any text: other planes (escaped as surrogate pairs with ensure_ascii) and lone
# surrogates (which cannot be UTF-8) included.
_text = st.text(st.characters(codec=None), max_size=12)
_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), _text
)


def _rarely(
    usual: st.SearchStrategy[Any], odd: st.SearchStrategy[Any], one_in: int = 10
) -> st.SearchStrategy[Any]:
    """``odd`` once in ``one_in`` draws, else ``usual`` (one_of would not keep the ratio)."""
    return st.builds(lambda u, o, k: o if k == 0 else u, usual, odd, st.integers(0, one_in - 1))


@st.composite
def _json_headers(draw: st.DrawFn) -> bytes:
    """A JSON header as some client could write it: any key order, spacing, escaping.

    Mostly the usual shape (what the compiled step takes), now and then something else.
    """
    ints = st.one_of(_plain, st.integers(-(2**63), 2**63))  # the C++ client's numbers
    fields: dict[str, Any] = {
        "code": draw(_rarely(_int32, _scalar)),
        "opaque": draw(_int32),
        "flag": draw(st.sampled_from([0, 1, 2, 3])),
        "language": draw(_rarely(st.sampled_from(["JAVA", "CPP", "PYTHON", "GO"]), _scalar)),
        "version": draw(st.one_of(st.just(395), _int32)),
        "extFields": draw(
            st.dictionaries(_rarely(_plain, _text), _rarely(ints, _scalar, 20), max_size=6)
        ),
    }
    if draw(st.booleans()):
        fields["remark"] = draw(_rarely(st.none() | _plain, _scalar))
    if draw(st.booleans()):
        fields["serializeTypeCurrentRPC"] = "JSON"
    if draw(st.integers(0, 9)) == 0:
        fields[draw(_text)] = draw(st.one_of(_scalar, st.lists(_scalar, max_size=2)))
    if draw(st.integers(0, 19)) == 0:
        del fields[draw(st.sampled_from(sorted(fields)))]
    keys = draw(st.permutations(sorted(fields)))
    ordered = {k: fields[k] for k in keys}
    text = json.dumps(
        ordered,
        ensure_ascii=draw(st.booleans()),
        separators=draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t")])),
        indent=draw(st.sampled_from([None, None, 2])),
    )
    text += draw(st.sampled_from(["", "", "\n", " \r\n"]))  # the C++ client's newline
    return text.encode("utf-8", "surrogatepass")


def _json_frame(header: bytes, body: bytes = b"xyz") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def _compiled_step(stream: bytes) -> tuple[RemotingCommand, int] | None:
    """The compiled decode of the frame at the start of ``stream`` (None: not taken)."""
    got: tuple[RemotingCommand, int] | None = _C.decode_frame(
        bytearray(stream), 0, len(stream), 4096, 1024, _LANG_BY_NUMBER, object.__new__,
        RemotingCommand, _SLOTS, SerializeType.ROCKETMQ, SerializeType.JSON,
    )  # fmt: skip
    return got


@settings(max_examples=500, deadline=None)
@given(_json_headers(), st.integers(1, 64))
def test_json_headers_decode_as_the_python_path_decodes_them(header: bytes, chunk: int) -> None:
    stream = _json_frame(header) * 2
    assert _decoded(stream, chunk, compiled=True) == _decoded(stream, chunk, compiled=False)


@settings(max_examples=500, deadline=None)
@given(_json_headers(), st.data())
def test_damaged_json_headers_get_the_same_answer(header: bytes, data: st.DataObject) -> None:
    raw = bytearray(header)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.sampled_from(b'{}[]":,\\0123456789-.eEunlfat \n\x01\x80\xff'))
    stream = _json_frame(bytes(raw))
    assert _decoded(stream, len(stream), compiled=True) == _decoded(
        stream, len(stream), compiled=False
    )


@pytest.mark.parametrize(
    "header",
    [
        # The C++ client: numbers among the ext strings, \u escapes, a closing newline.
        b'{"code":10,"extFields":{"batch":"0","flag":0,"queueId":3,"properties":'
        b'"KEYS\\u0001k1\\u0002TAGS\\u0001TagA\\u0002","bornTimestamp":1764150000000},'
        b'"flag":0,"language":"CPP","opaque":7,"remark":"","serializeTypeCurrentRPC":"JSON",'
        b'"version":395}\n',
        # Java: strings only, no remark.
        b'{"code":310,"extFields":{"a":"PG","b":"T","e":"1","i":"UNIQ_KEY\\u0001AB\\u0002"},'
        b'"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":401}',
        # The longest number taken: 18 digits.
        b'{"code":1,"extFields":{"n":-999999999999999999},"flag":0,"language":"J","opaque":1,'
        b'"version":0}',
        # Non-ASCII text, raw and escaped.
        '{"code":1,"extFields":{"t":"caf\u00e9 \\u4e2d"},"flag":0,"language":"JAVA",'
        '"opaque":1,"remark":null,"version":0}'.encode(),
    ],
)
def test_the_usual_client_headers_take_the_compiled_step(header: bytes) -> None:
    stream = _json_frame(header)
    got = _compiled_step(stream)
    assert got is not None
    assert [got[0], ("buffered", 0)] == _decoded(stream, len(stream), compiled=False)


@pytest.mark.parametrize(
    "header",
    [
        b' {"code":1}',  # leading space: json.loads takes it, the compiled step does not
        b'{"code":1.0,"extFields":{},"flag":0,"language":"J","opaque":1,"version":0}',
        b'{"code":1,"extFields":{"k":1e3},"flag":0,"language":"J","opaque":1,"version":0}',
        b'{"code":1,"extFields":{"k":"\\ud83d\\ude00"},"flag":0,"language":"J","opaque":1,'
        b'"version":0}',
        b'{"code":1,"extFields":{"k":true},"flag":0,"language":"J","opaque":1,"version":0}',
        b'{"code":1,"extFields":{},"flag":0,"language":"J","opaque":1}',  # no version
        b'{"code":2147483648,"extFields":{},"flag":0,"language":"J","opaque":1,"version":0}',
        b'{"code":1,"extFields":{"n":1000000000000000000},"flag":0,"language":"J","opaque":1,'
        b'"version":0}',  # 19 digits
        b'{"c\\u006fde":1,"extFields":{},"flag":0,"language":"J","opaque":1,"version":0}',
        b'{"code":1,"extFields":{},"flag":0,"language":"J","opaque":1,"version":0,"x":[1]}',
    ],
)
def test_unusual_json_headers_are_left_to_the_python_path(header: bytes) -> None:
    stream = _json_frame(header)
    assert _compiled_step(stream) is None
    assert _decoded(stream, len(stream), compiled=True) == _decoded(
        stream, len(stream), compiled=False
    )


@settings(max_examples=400, deadline=None)
@given(commands, st.lists(st.binary(max_size=6), max_size=2))
def test_answers_encode_as_the_python_path_encodes_them(
    cmd: RemotingCommand, extra: list[bytes]
) -> None:
    assert _wire(cmd, True, tuple(extra)) == _wire(cmd, False, tuple(extra))


# Text JSON writes as it is (the compiled step), and now and then any text.
_ascii = st.text(
    st.characters(min_codepoint=32, max_codepoint=126, exclude_characters='"\\'), max_size=12
)
_json_answers = st.builds(
    RemotingCommand,
    code=st.one_of(
        int16, st.sampled_from(ResponseCode), st.booleans(), st.integers(-(2**40), 2**40)
    ),
    opaque=st.one_of(int32, int32, st.integers(-(2**40), 2**40), st.integers(2**63, 2**70)),
    flag=st.sampled_from([0, 1, 2**31 - 1, -(2**31), 2**31]),
    remark=st.one_of(st.none(), _ascii, _ascii, _text),
    ext_fields=st.dictionaries(
        _rarely(_ascii, _text, 20),
        _rarely(_ascii, _text, 20),
        max_size=6,
    ),
    body=st.binary(max_size=8),
    language=st.sampled_from(["JAVA", "CPP", "PYTHON", "caf\u00e9", 'a"b']),
    version=st.one_of(int16, st.integers(-(2**40), 2**40)),
    serialize_type=st.just(SerializeType.JSON),
)


def _wire_or_error(cmd: RemotingCommand, compiled: bool) -> object:
    try:
        return _wire(cmd, compiled)
    except ValueError as exc:
        return ("error", str(exc))


@settings(max_examples=500, deadline=None)
@given(_json_answers)
def test_json_answers_encode_as_the_python_path_encodes_them(cmd: RemotingCommand) -> None:
    assert _wire_or_error(cmd, compiled=True) == _wire_or_error(cmd, compiled=False)


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
