"""Message properties strings and Java's String.hashCode (tag and key hashes)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol.message import java_string_hash
from rocklet.protocol.properties import decode_properties, encode_properties

# --- properties ----------------------------------------------------------------------------

JAVA_STYLE = b"KEYS\x01order-0 user-0\x02UNIQ_KEY\x01ABC\x02TAGS\x01TagA"  # 4.9.x broker
CPP_STYLE = b"KEYS\x01order-0 user-0\x02UNIQ_KEY\x01ABC\x02TAGS\x01TagA\x02"  # C++ client
DECODED = {"KEYS": "order-0 user-0", "UNIQ_KEY": "ABC", "TAGS": "TagA"}


@pytest.mark.parametrize("data", [JAVA_STYLE, CPP_STYLE, bytearray(CPP_STYLE), JAVA_STYLE.decode()])
def test_java_and_cpp_forms_decode_alike(data: bytes | bytearray | str) -> None:
    decoded = decode_properties(data)
    assert decoded == DECODED
    assert list(decoded) == ["KEYS", "UNIQ_KEY", "TAGS"], "order is kept"


def test_encoding_writes_the_java_form_in_order() -> None:
    assert encode_properties(DECODED) == JAVA_STYLE
    assert encode_properties({}) == b""


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", {}),
        (b"\x02\x02", {}),
        (b"\x01v\x02k\x01v", {"k": "v"}),  # empty name
        (b"k\x01\x02a\x01b", {"a": "b"}),  # empty value, as both Java and C++ drop it
        (b"novalue\x02a\x01b", {"a": "b"}),  # no 0x01 separator
        (b"a\x011\x02a\x012", {"a": "2"}),  # a repeated name keeps the last value
        (b"a\x01x\x01y", {"a": "x\x01y"}),  # value is everything after the first 0x01
        (b"k\x01\xff\xfe", {"k": "\ufffd\ufffd"}),  # malformed UTF-8 never raises
    ],
)
def test_decoding_skips_what_java_skips(data: bytes, expected: dict[str, str]) -> None:
    assert decode_properties(data) == expected


def test_encoding_leaves_out_empty_names_and_values() -> None:
    assert encode_properties({"": "v", "k": "", "a": "b"}) == b"a\x01b"


_PART = st.text(st.characters(exclude_characters="\x01\x02", exclude_categories=["Cs"]), min_size=1)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_PART, _PART, max_size=10), st.booleans())
def test_properties_round_trip(props: dict[str, str], cpp_trailer: bool) -> None:
    encoded = encode_properties(props) + (b"\x02" if cpp_trailer and props else b"")
    assert decode_properties(encoded) == props


# --- java_string_hash ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("TagA", 2598919),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),  # the classic collision: clients compare tag strings after hashes
        ("polygenelubricants", -(2**31)),  # wraps to Integer.MIN_VALUE
        ("Täg", 84 * 31 * 31 + 0xE4 * 31 + ord("g")),
        # U+1F600 is the UTF-16 pair D83D DE00: two units, as Java counts them.
        ("\U0001f600", 0xD83D * 31 + 0xDE00),
        ("\ud800", 0xD800),  # a lone surrogate is one unit, not an error
    ],
)
def test_java_string_hash_known_values(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def _reference_hash(text: str) -> int:
    h = 0
    for ch in text:
        cp = ord(ch)
        units = [cp] if cp < 0x10000 else [0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + (cp & 0x3FF)]
        for unit in units:
            h = (h * 31 + unit) % 2**32
    return h - 2**32 if h >= 2**31 else h


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_java_string_hash_is_a_wrapped_int32_over_utf16_units(text: str) -> None:
    got = java_string_hash(text)
    assert -(2**31) <= got < 2**31
    assert got == _reference_hash(text)
