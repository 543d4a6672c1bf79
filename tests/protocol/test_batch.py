"""Batch bodies (SEND_BATCH_MESSAGE, and the C++ client's SEND_MESSAGE with batch="1")."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol import MessageFormatError
from rocklet.protocol.batch import BatchItem, decode_batch, encode_batch
from rocklet.protocol.properties import decode_properties
from tests.conftest import CAPTURES


def _item(flag: int, body: bytes, props: bytes, magic: int = 0, crc: int = 0) -> bytes:
    """One batch item straight from the documented layout."""
    size = 4 * 5 + len(body) + 2 + len(props)
    return (
        struct.pack(">iiiii", size, magic, crc, flag, len(body))
        + body
        + (struct.pack(">h", len(props)) + props)
    )


def test_layout_matches_the_reference() -> None:
    items = [BatchItem(3, b"body", b"TAGS\x01a"), BatchItem(0, b"", b"")]
    body = encode_batch(items)
    assert body == _item(3, b"body", b"TAGS\x01a") + _item(0, b"", b"")
    assert decode_batch(body) == items


def test_magic_and_crc_written_by_clients_are_ignored() -> None:
    body = _item(1, b"x", b"", magic=-626843481, crc=12345)
    assert decode_batch(body) == [BatchItem(1, b"x", b"")]


def test_cpp_batch_body_from_the_capture() -> None:
    lines = (CAPTURES / "capture.jsonl").read_text(encoding="utf-8").splitlines()
    (event,) = [
        e
        for e in map(json.loads, lines)
        if e["event"] == "request" and e["extFields"].get("batch") == ["str", "1"]
    ]
    body = event["body"].encode("utf-8")
    assert len(body) == event["body_len"] == 212  # recorded losslessly (all ASCII)
    items = decode_batch(body)
    assert [(i.flag, i.body) for i in items] == [(0, b"b1"), (0, b"b2")]
    props = [decode_properties(i.properties) for i in items]
    assert [p["TAGS"] for p in props] == ["TagA", "TagB"]
    assert props[0]["UNIQ_KEY"] == "0100007F0000B9C50000E3BB5C6E0500"
    assert all(i.properties.endswith(b"\x02") for i in items), "C++ keeps the trailing 0x02"
    assert encode_batch(items) == body


_GOOD = _item(0, b"abc", b"k\x01v")


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"", "holds no message"),
        (_GOOD[:19], "is truncated"),
        (_GOOD + _GOOD[:10], "at 28 is truncated"),
        (_GOOD[:-1], "size 28 at 0 overruns"),
        (struct.pack(">i", 21) + _GOOD[4:], "size 21 at 0 overruns"),
        (_GOOD[:16] + struct.pack(">i", -1) + _GOOD[20:], "body length -1"),
        (_GOOD[:16] + struct.pack(">i", 8) + _GOOD[20:], "body length 8"),
        (_GOOD[:23] + struct.pack(">h", 2) + _GOOD[25:], "properties length 2"),
        (_GOOD[:23] + struct.pack(">h", -1) + _GOOD[25:], "properties length -1"),
    ],
)
def test_malformed_bodies_are_message_format_errors(body: bytes, match: str) -> None:
    with pytest.raises(MessageFormatError, match=match):
        decode_batch(body)


def test_item_count_limit() -> None:
    body = encode_batch([BatchItem(0, b"", b"")] * 4)
    assert len(decode_batch(body, max_items=4)) == 4
    with pytest.raises(MessageFormatError, match="more than 3 messages"):
        decode_batch(body, max_items=3)


def test_encoder_refuses_properties_beyond_int16() -> None:
    with pytest.raises(MessageFormatError, match="properties are 32768 bytes"):
        encode_batch([BatchItem(0, b"", b"p" * 32768)])


_ITEMS = st.lists(
    st.builds(
        BatchItem,
        st.integers(-(2**31), 2**31 - 1),
        st.binary(max_size=50),
        st.binary(max_size=50),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(_ITEMS)
def test_round_trip(items: list[BatchItem]) -> None:
    assert decode_batch(encode_batch(items)) == items
    assert decode_batch(memoryview(encode_batch(items))) == items


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_raise_message_format_error(data: bytes) -> None:
    try:
        items = decode_batch(data)
    except MessageFormatError:
        return
    assert sum(22 + len(i.body) + len(i.properties) for i in items) == len(data)
