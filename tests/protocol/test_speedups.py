"""The compiled binary header codec against its pure-Python twin."""

from __future__ import annotations

import dataclasses
import os
import struct
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol import compiled, header_codec
from rocklet.protocol.codes import LanguageCode, SerializeType
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import FrameError, HeaderError
from tests.speedups_support import compiled_module

_C = compiled_module("rocklet.protocol._speedups")


@pytest.fixture(autouse=True, scope="module")
def _compiled_twins_wired() -> Iterator[None]:
    """The ``*_c`` wrappers call the compiled module even under ROCKLET_PURE_PYTHON=1."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(header_codec, "_speedups", _C)
        yield


int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
# Lone surrogates included: headers decoded with surrogateescape carry them.
text = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
commands = st.builds(
    RemotingCommand,
    code=int16,
    opaque=int32,
    flag=int32,
    remark=st.none() | text,
    ext_fields=st.dictionaries(text, text, max_size=8),
    body=st.binary(max_size=8),
    language=st.sampled_from([m.name for m in LanguageCode] + ["NOT_A_LANGUAGE"]),
    version=int16,
    serialize_type=st.just(SerializeType.ROCKETMQ),
)


def _decode(fn: object, data: bytes) -> tuple[str, object]:
    try:
        return "ok", fn(data, b"body")  # type: ignore[operator]
    except FrameError as exc:
        return "error", str(exc)


@settings(max_examples=400, deadline=None)
@given(commands)
def test_encode_and_decode_match_the_python_twin(cmd: RemotingCommand) -> None:
    data = header_codec._encode_binary_py(cmd)
    assert header_codec._encode_binary_c(cmd) == data
    assert _decode(header_codec._decode_binary_c, data) == _decode(
        header_codec._decode_binary_py, data
    )


@settings(max_examples=600, deadline=None)
@given(commands, st.data())
def test_damaged_headers_get_the_same_answer(cmd: RemotingCommand, data: st.DataObject) -> None:
    raw = bytearray(header_codec._encode_binary_py(cmd))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    for candidate in (bytes(raw), bytes(raw[:cut])):
        assert _decode(header_codec._decode_binary_c, candidate) == _decode(
            header_codec._decode_binary_py, candidate
        )


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_get_the_same_answer(raw: bytes) -> None:
    assert _decode(header_codec._decode_binary_c, raw) == _decode(
        header_codec._decode_binary_py, raw
    )


def test_huge_and_negative_lengths_are_refused_alike() -> None:
    fixed = struct.pack(">hbhii", 10, 0, 1, 2, 0)
    for tail in (
        struct.pack(">i", 2**31 - 1),
        struct.pack(">i", -1),
        struct.pack(">ii", 0, 2**31 - 1),
        struct.pack(">iih", 0, 2, -5),
        struct.pack(">iihbi", 0, 7, 1, 65, 2**31 - 1),
    ):
        raw = fixed + tail
        py = _decode(header_codec._decode_binary_py, raw)
        assert py[0] == "error"
        assert _decode(header_codec._decode_binary_c, raw) == py


def test_out_of_range_fields_are_refused_alike() -> None:
    for cmd in (RemotingCommand(code=40000), RemotingCommand(code=1, version=-40000)):
        with pytest.raises(ValueError) as py:
            header_codec._encode_binary_py(cmd)
        with pytest.raises(ValueError) as c:
            header_codec._encode_binary_c(cmd)
        assert str(c.value) == str(py.value)
    long_key = RemotingCommand(code=1, ext_fields={"k" * 40000: "v"})
    with pytest.raises(ValueError, match="extFields key length"):
        _C.encode_binary(1, 0, 1, 0, 0, None, long_key.ext_fields)


def test_the_product_uses_the_compiled_codec_unless_told_not_to() -> None:
    expected = not compiled.PURE_PYTHON
    assert compiled.active() == dict.fromkeys(compiled.MODULES, expected)
    uses_c = header_codec._decode_binary is header_codec._decode_binary_c
    assert uses_c is expected
    probe = "from rocklet.protocol import compiled; print(sorted(compiled.active().values()))"
    env = {**os.environ, "ROCKLET_PURE_PYTHON": "1"}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[False, False]"


def _all_headers() -> list[type]:
    import rocklet.protocol.headers  # noqa: F401  (imports every header module)
    from rocklet.protocol.headers.base import Header

    found, todo = [], list(Header.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        found.append(cls)
    return sorted(found, key=lambda c: c.__qualname__)


# The spellings a peer may send for a field of any type: usual and unusual numbers,
# booleans, text, bounds edges, and what Python's int() accepts beyond plain digits.
_SPELLINGS = st.sampled_from(
    ["0", "1", "-1", "7", "007", "+3", " 4", "1_000", "٣", "true", "false", "TRUE", "",
     "x", "é", "\ud800", "2147483647", "2147483648", "-2147483649", "9223372036854775807",
     "9223372036854775808", "123456789012345678", "1234567890123456789", "-", "1.5"]
)  # fmt: skip


@pytest.mark.parametrize("cls", _all_headers(), ids=lambda c: c.__qualname__)
def test_compiled_header_parser_matches_the_python_one(cls: type) -> None:
    from rocklet.protocol.headers import base

    specs = cls._resolve()  # type: ignore[attr-defined]
    defaults = tuple(
        None if f.default is dataclasses.MISSING else f.default for f in dataclasses.fields(cls)
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "_speedups", None)
        python_parse = base._compile_parser(cls, specs, defaults)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "_speedups", _C)
        both = base._compile_parser(cls, specs, defaults)
    keys = [spec.key for spec in specs] + ["unknown"]

    def outcome(parse: object, ext: dict[str, str]) -> tuple[str, object]:
        try:
            return "ok", parse(cls, ext)  # type: ignore[operator]
        except HeaderError as exc:
            return "error", str(exc)

    @settings(max_examples=25, deadline=None)
    @given(st.dictionaries(st.sampled_from(keys), _SPELLINGS | text, max_size=len(keys)))
    def check(ext: dict[str, str]) -> None:
        assert outcome(both, ext) == outcome(python_parse, ext)

    check()
    full = {spec.key: "1" for spec in specs}
    assert outcome(both, full) == outcome(python_parse, full)
