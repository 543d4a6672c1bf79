"""Message ids: the offset msgId (store host, port, commitlog offset as 32 hex digits)
and the Java-layout client msgId read back for people."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol import MessageFormatError
from rocklet.protocol.message import pack_host
from rocklet.protocol.message_id import (
    ClientMessageId,
    OffsetMessageId,
    make_offset_msg_id,
    parse_client_msg_id,
    parse_offset_msg_id,
)

DOC_EXAMPLE = "7F00000100002A9F0000000000000C8A"  # docs/protocol.md


def test_reference_example() -> None:
    assert make_offset_msg_id(pack_host("127.0.0.1", 10911), 0xC8A) == DOC_EXAMPLE
    assert parse_offset_msg_id(DOC_EXAMPLE) == OffsetMessageId("127.0.0.1", 10911, 3210)
    assert parse_offset_msg_id(DOC_EXAMPLE.lower()) == parse_offset_msg_id(DOC_EXAMPLE)


def test_ids_from_the_real_broker_capture() -> None:
    # cpp-client-smoke.decoded.txt: the broker's first two send responses.
    assert parse_offset_msg_id("7F00000100002A9F0000000000000000").offset == 0
    assert parse_offset_msg_id("7F00000100002A9F00000000000000D3").offset == 0xD3


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "must be 32 hex digits, got 0"),
        (DOC_EXAMPLE + "00", "must be 32 hex digits, got 34"),
        (DOC_EXAMPLE[:-1] + "G", "is not hex"),
        # bytes.fromhex skips spaces: 30 digits and 2 spaces would give 15 bytes.
        ("7F 000001 00002A9F0000000000000C", "is not hex"),
        ("7F00000100002A9F0000000000000C8\u0661", "is not hex"),
    ],
)
def test_malformed_ids_are_message_format_errors(text: str, match: str) -> None:
    with pytest.raises(MessageFormatError, match=match):
        parse_offset_msg_id(text)


def test_make_refuses_a_host_field_that_is_not_ipv4() -> None:
    with pytest.raises(ValueError, match="must be 8 bytes"):
        make_offset_msg_id(bytes(20), 1)


@settings(max_examples=200, deadline=None)
@given(
    st.ip_addresses(v=4),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
)
def test_round_trip(ip: object, port: int, offset: int) -> None:
    msg_id = make_offset_msg_id(pack_host(str(ip), port), offset)
    assert len(msg_id) == 32
    assert msg_id == msg_id.upper()
    assert parse_offset_msg_id(msg_id) == OffsetMessageId(str(ip), port, offset)


def test_client_ids_of_both_ip_kinds_decode_field_by_field() -> None:
    v4 = "C0A80001" + "1F90" + "DEADBEEF" + "0000EA60" + "0007"
    assert parse_client_msg_id(v4) == ClientMessageId("192.168.0.1", 0x1F90, 60_000, 7)
    v6 = "20010DB8" + "0" * 22 + "01" + "0001" + "00000000" + "FFFFFFFF" + "FFFF"
    assert parse_client_msg_id(v6.lower()) == ClientMessageId("2001:db8::1", 1, 2**32 - 1, 65535)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "32 hex digits \\(IPv4\\) or 56 \\(IPv6\\), got 0"),
        ("0" * 40, "got 40"),
        ("0" * 31 + "G", "is not hex"),
        ("0" * 30 + " 0", "is not hex"),
    ],
)
def test_malformed_client_ids_are_message_format_errors(text: str, match: str) -> None:
    with pytest.raises(MessageFormatError, match=match):
        parse_client_msg_id(text)
