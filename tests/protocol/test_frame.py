"""Frame codec: layouts, serializations, limits and the quirks real clients send."""

from __future__ import annotations

import json
import struct
from dataclasses import replace
from typing import Any

import msgpack
import pytest

from rocklet.protocol import (
    FrameDecoder,
    RemotingCommand,
    SerializeType,
    encode_command,
    encode_command_parts,
)
from rocklet.protocol.frame import Buffer
from tests.protocol.helpers import assert_decodes, assert_refuses, raw_frame

SAMPLE = RemotingCommand(
    code=10,
    opaque=42,
    flag=0,
    remark="why ✓",
    ext_fields={"topic": "T", "queueId": "3", "properties": "TAGS\x01a\x02KEYS\x01k ключ"},
    body=b"\x00\x01body\xff",
    language="CPP",
    version=63,
)


def binary_header(
    code: int = 105,
    language: int = 0,
    version: int = 401,
    opaque: int = 0,
    flag: int = 0,
    remark: bytes = b"",
    ext: bytes = b"",
) -> bytes:
    """ROCKETMQ binary header built straight from the documented layout."""
    return (
        struct.pack(">hbhii", code, language, version, opaque, flag)
        + struct.pack(">i", len(remark))
        + remark
        + struct.pack(">i", len(ext))
        + ext
    )


def ext_entry(key: bytes, value: bytes) -> bytes:
    return struct.pack(">h", len(key)) + key + struct.pack(">i", len(value)) + value


# --- round trips ---------------------------------------------------------------------


@pytest.mark.parametrize("stype", list(SerializeType))
def test_each_serialization_round_trips(stype: SerializeType) -> None:
    cmd = replace(SAMPLE, serialize_type=stype)
    frame = encode_command(cmd)
    assert frame[4] == stype, "the serialize type travels in the header-length word's high byte"
    assert_decodes(frame, [cmd])


def test_one_stream_mixes_serializations_and_empty_commands() -> None:
    cmds = [replace(SAMPLE, opaque=i, serialize_type=t) for i, t in enumerate(SerializeType)]
    cmds.append(RemotingCommand(code=0, opaque=99, flag=1))
    cmds.append(RemotingCommand(code=0, opaque=100, flag=1, serialize_type=SerializeType.ROCKETMQ))
    assert_decodes(b"".join(encode_command(c) for c in cmds), cmds)


def test_stream_larger_than_the_compaction_threshold() -> None:
    # 150 KiB in one feed: the decoder compacts its buffer mid-stream (past 64 KiB) while
    # frames and trailing bytes are still pending.
    cmds = [RemotingCommand(code=11, opaque=i, body=bytes([i]) * 1000) for i in range(150)]
    assert_decodes(b"".join(encode_command(c) for c in cmds), cmds)


def test_decoder_accepts_memoryview_and_bytearray_feeds() -> None:
    frame = encode_command(SAMPLE)
    decoder = FrameDecoder()
    decoder.feed(memoryview(frame)[:10])
    decoder.feed(bytearray(frame[10:]))
    assert decoder.next_command() == SAMPLE


# --- exact layouts ---------------------------------------------------------------------


def test_json_header_is_shaped_like_fastjson_output() -> None:
    cmd = RemotingCommand(code=0, opaque=12, flag=1, ext_fields={"queueId": "1"})
    frame = encode_command(cmd)
    header = (
        b'{"code":0,"extFields":{"queueId":"1"},"flag":1,"language":"JAVA","opaque":12,'
        b'"serializeTypeCurrentRPC":"JSON","version":401}'
    )
    assert frame == struct.pack(">ii", 4 + len(header), len(header)) + header


def test_json_header_always_carries_an_ext_fields_object() -> None:
    # The C++ client dereferences a missing extFields (docs/protocol.md).
    header = encode_command(RemotingCommand(code=0, flag=1, remark="r"))[8:]
    obj = json.loads(header)
    assert obj["extFields"] == {}
    assert obj["remark"] == "r"


def test_lone_surrogates_are_sent_as_json_escapes() -> None:
    # A peer may send "\ud800" escaped; a remark echoing it has no UTF-8 form, so the
    # header carries the escape back instead of failing to encode (no answer at all).
    cmd = RemotingCommand(code=1, flag=1, remark="group \ud800\n", ext_fields={"g": "\udfff"})
    frame = encode_command(cmd)
    assert b"\\ud800" in frame and b"\\udfff" in frame
    decoder = FrameDecoder()
    decoder.feed(frame)
    decoded = decoder.next_command()
    assert decoded is not None
    assert decoded.remark == "group \ud800\n" and decoded.ext_fields == {"g": "\udfff"}


def test_binary_header_without_remark_or_ext_is_21_bytes() -> None:
    cmd = RemotingCommand(code=105, opaque=2, serialize_type=SerializeType.ROCKETMQ)
    frame = encode_command(cmd)
    assert frame == struct.pack(">ii", 25, (1 << 24) | 21) + binary_header(opaque=2)
    assert_decodes(frame, [cmd])


def test_binary_header_layout_with_remark_and_ext() -> None:
    cmd = RemotingCommand(
        code=17,
        opaque=-5,
        flag=3,
        remark="é",
        ext_fields={"topic": "ü"},
        language="CPP",
        version=-2,
        serialize_type=SerializeType.ROCKETMQ,
        body=b"B",
    )
    header = binary_header(17, 1, -2, -5, 3, "é".encode(), ext_entry(b"topic", "ü".encode()))
    frame = raw_frame(header, b"B", serialize_type=1)
    assert encode_command(cmd) == frame
    assert_decodes(frame, [cmd])


def test_java_broker_json_response_from_the_reference() -> None:
    header = (
        b'{"code":0,"extFields":{"queueId":"1","msgId":"7F00000100002A9F0000000000000C8A",'
        b'"queueOffset":"5","MSG_REGION":"DefaultRegion","TRACE_ON":"true"},"flag":1,'
        b'"language":"JAVA","opaque":12,"serializeTypeCurrentRPC":"JSON","version":407}'
    )
    expected = RemotingCommand(
        code=0,
        opaque=12,
        flag=1,
        ext_fields={
            "queueId": "1",
            "msgId": "7F00000100002A9F0000000000000C8A",
            "queueOffset": "5",
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        },
        language="JAVA",
        version=407,
    )
    assert_decodes(raw_frame(header), [expected])


def test_cpp_header_with_trailing_newline() -> None:
    # jsoncpp's FastWriter ends the document with "\n" (docs/protocol.md).
    header = (
        b'{"code":10,"extFields":{"batch":"0","queueId":0,"sysFlag":0,"topic":"TestTopic"},'
        b'"flag":0,"language":"CPP","opaque":1,"remark":"","version":63}\n'
    )
    expected = RemotingCommand(
        code=10,
        opaque=1,
        remark="",
        ext_fields={"batch": "0", "queueId": "0", "sysFlag": "0", "topic": "TestTopic"},
        body=b"hello-sync",
        language="CPP",
        version=63,
    )
    assert_decodes(raw_frame(header, b"hello-sync"), [expected])


# --- extFields normalisation -------------------------------------------------------------

_LOOSE_EXT: dict[str, Any] = {
    "d": 4,
    "g": 1795252804452,
    "neg": -3,
    "k": False,
    "m": True,
    "n": None,
    "f": 1.5,
    "whole": 2.0,
    "s": "x",
    "obj": {"a": [1, "b"]},
}
_JAVA_EXT = {
    "d": "4",
    "g": "1795252804452",
    "neg": "-3",
    "k": "false",
    "m": "true",
    "f": "1.5",
    "whole": "2",
    "s": "x",
    "obj": '{"a":[1,"b"]}',
}


@pytest.mark.parametrize("stype", [SerializeType.JSON, SerializeType.MSGPACK])
def test_ext_values_are_normalised_to_java_strings(stype: SerializeType) -> None:
    # ali-ons sends raw JS numbers and booleans; Java's fastjson sees their text and
    # drops nulls (docs/protocol.md).
    obj = {"code": 310, "extFields": _LOOSE_EXT, "language": "JAVA", "opaque": 3, "version": 121}
    header = json.dumps(obj).encode() if stype == 0 else msgpack.packb(obj)
    expected = RemotingCommand(
        code=310, opaque=3, ext_fields=_JAVA_EXT, version=121, serialize_type=stype
    )
    assert_decodes(raw_frame(header, serialize_type=stype), [expected])


@pytest.mark.parametrize("ext", ["", ',"extFields":null', ',"extFields":{}'])
def test_missing_or_null_ext_fields_decode_to_empty(ext: str) -> None:
    header = f'{{"code":0,"flag":1,"opaque":8{ext}}}'.encode()
    expected = RemotingCommand(code=0, opaque=8, flag=1, language="OTHER", version=0)
    assert_decodes(raw_frame(header), [expected])


def test_json_null_ints_take_their_defaults() -> None:
    header = b'{"code":3,"opaque":null,"flag":null,"version":null,"remark":null}'
    expected = RemotingCommand(code=3, language="OTHER", version=0)
    assert_decodes(raw_frame(header), [expected])


def test_json_numeric_strings_and_odd_remarks_are_coerced() -> None:
    header = b'{"code":"10","opaque":"7","flag":0,"remark":5,"language":3}'
    expected = RemotingCommand(code=10, opaque=7, remark="5", language="OTHER", version=0)
    assert_decodes(raw_frame(header), [expected])


# --- refusals: lengths (as soon as the length words arrive) -----------------------------


@pytest.mark.parametrize("total", [-(2**31), -1, 0, 3])
def test_total_length_below_four_is_refused_at_its_fourth_byte(total: int) -> None:
    assert_refuses(struct.pack(">i", total), at=4, match="smaller than the minimum 4")


def test_total_length_above_the_limit_is_refused_at_its_fourth_byte() -> None:
    assert_refuses(
        struct.pack(">i", 1025), at=4, match="exceeds the limit 1024", max_frame_size=1024
    )


def test_default_frame_limit_is_javas_16_mib() -> None:
    assert_refuses(struct.pack(">iI", 16 * 1024 * 1024 + 1, 10), at=4, match="exceeds the limit")


def test_total_length_at_the_limit_is_accepted() -> None:
    cmd = RemotingCommand(code=11, body=b"x" * 2000)
    frame = encode_command(cmd)
    assert_decodes(frame, [cmd], max_frame_size=len(frame) - 4)


def test_header_longer_than_the_frame_is_refused_after_eight_bytes() -> None:
    # Only the 8 length bytes are fed: the refusal needs nothing more.
    assert_refuses(struct.pack(">iI", 10, 7), at=8, match="exceeds frame length 10")


def test_header_above_the_limit_is_refused_after_eight_bytes() -> None:
    data = struct.pack(">iI", 100_000, 4097)
    assert_refuses(data, at=8, match="exceeds the limit 4096", max_header_size=4096)


def test_header_at_the_limit_is_accepted() -> None:
    frame = encode_command(SAMPLE)
    header_len = int.from_bytes(frame[5:8], "big")
    assert_decodes(frame, [SAMPLE], max_header_size=header_len)


@pytest.mark.parametrize("stype", [3, 0x7F, 0xFF])
def test_unknown_serialize_type_is_refused_after_eight_bytes(stype: int) -> None:
    data = struct.pack(">iI", 100, (stype << 24) | 10)
    assert_refuses(data, at=8, match=f"unknown serialize type {stype}")


def test_empty_frame_is_refused_when_complete() -> None:
    assert_refuses(struct.pack(">iI", 4, 0), at=8, match="JSON header does not parse")


# --- refusals: header contents ---------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (b"{", "JSON header does not parse"),
        (b"\xff\xfe\x00", "JSON header does not parse"),
        (b"[1, 2]", "header is not an object"),
        (b'{"opaque":1}', "'code' must be an integer"),
        (b'{"code":null}', "'code' must be an integer"),
        (b'{"code":true}', "'code' must be an integer"),
        (b'{"code":1.0}', "'code' must be an integer"),
        (b'{"code":"ten"}', "'code' is not an integer"),
        (b'{"code":2147483648}', "'code' is out of the int32 range"),
        (b'{"code":0,"opaque":-2147483649}', "'opaque' is out of the int32 range"),
        (b'{"code":0,"extFields":[1]}', "extFields must be an object"),
        (b'{"code":0,"extFields":"a"}', "extFields must be an object"),
    ],
)
def test_bad_json_headers_are_frame_errors(header: bytes, match: str) -> None:
    frame = raw_frame(header, b"body")
    assert_refuses(frame, at=len(frame), match=match)


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (b"\xc1", "msgpack header does not parse"),
        (msgpack.packb({"code": 1}) + b"\x00", "msgpack header does not parse"),
        (msgpack.packb({"code": 1, "extFields": {"a": b"\x00"}}), "type bytes is unsupported"),
        (msgpack.packb({"code": 1, "remark": b"r"}), "type bytes is unsupported"),
        (msgpack.packb({"code": 1, "extFields": {"a": {b"k": 1}}}), "type dict is unsupported"),
        (msgpack.packb([1]), "header is not an object"),
    ],
)
def test_bad_msgpack_headers_are_frame_errors(header: bytes, match: str) -> None:
    frame = raw_frame(header, serialize_type=SerializeType.MSGPACK)
    assert_refuses(frame, at=len(frame), match=match)


def test_binary_zero_remark_length_is_null_and_empty_remark_encodes_as_null() -> None:
    # RocketMQSerializable writes length 0 for a null remark and 4.9.7 reads length 0
    # back as null, so "" and None are the same on this wire.
    frame = raw_frame(binary_header(opaque=1), serialize_type=1)
    expected = RemotingCommand(code=105, opaque=1, serialize_type=SerializeType.ROCKETMQ)
    assert_decodes(frame, [expected])
    assert encode_command(replace(expected, remark="")) == frame


def test_binary_empty_ext_value_is_kept_as_empty_string() -> None:
    # Java 4.9.7 would drop it (readStr -> null); keeping "" loses nothing, because
    # typed headers treat a required field that is "" as malformed either way.
    ext = ext_entry(b"topic", b"") + ext_entry(b"k", b"v")
    frame = raw_frame(binary_header(ext=ext), serialize_type=1)
    expected = RemotingCommand(
        code=105, ext_fields={"topic": "", "k": "v"}, serialize_type=SerializeType.ROCKETMQ
    )
    assert_decodes(frame, [expected])


def test_binary_unknown_language_number_reads_as_other() -> None:
    frame = raw_frame(binary_header(language=99), serialize_type=1)
    (cmd,) = [RemotingCommand(code=105, language="OTHER", serialize_type=SerializeType.ROCKETMQ)]
    assert_decodes(frame, [cmd])


_GOOD_EXT = ext_entry(b"topic", b"T")


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (binary_header()[:20], "shorter than the minimum 21"),
        (b"", "shorter than the minimum 21"),
        (struct.pack(">hbhiii", 1, 0, 1, 0, 0, 10) + b"abc\x00\x00\x00\x00", "remark length 10"),
        (struct.pack(">hbhiii", 1, 0, 1, 0, 0, -1) + b"\x00" * 4, "remark length -1 overruns"),
        (binary_header(ext=_GOOD_EXT)[:-1], "ext length 12 does not match"),
        (binary_header(ext=_GOOD_EXT) + b"\x00", "ext length 12 does not match"),
        (binary_header()[:-4] + struct.pack(">i", -1), "ext length -1 does not match"),
        (binary_header(ext=b"\x00"), "ext entry is truncated"),
        (binary_header(ext=b"\x00\x05ab"), "key length 5 overruns"),
        (binary_header(ext=b"\xff\xffab\x00\x00\x00\x00"), "key length -1 overruns"),
        (binary_header(ext=b"\x00\x01k\x00\x00\x00\x09abc"), "value length 9 overruns"),
        (binary_header(ext=b"\x00\x01k\xff\xff\xff\xffab"), "value length -1 overruns"),
        (binary_header(ext=_GOOD_EXT + b"\x00\x01k\x00\x00"), "key length 1 overruns"),
    ],
)
def test_bad_binary_headers_are_frame_errors(header: bytes, match: str) -> None:
    frame = raw_frame(header, b"body", serialize_type=SerializeType.ROCKETMQ)
    assert_refuses(frame, at=len(frame), match=match)


# --- encoder: parts and range checks -------------------------------------------------------


def test_parts_concatenate_to_the_single_buffer_encoding() -> None:
    assert b"".join(encode_command_parts(SAMPLE)) == encode_command(SAMPLE)


@pytest.mark.parametrize("stype", list(SerializeType))
def test_extra_body_parts_count_in_the_length(stype: SerializeType) -> None:
    cmd = replace(SAMPLE, serialize_type=stype)
    extra: list[Buffer] = [b"abc", memoryview(b"0123456789")[2:7], bytearray(b"zz")]
    wire = b"".join(bytes(part) for part in encode_command_parts(cmd, extra))
    whole = replace(cmd, body=cmd.body + b"abc23456zz")
    assert wire == encode_command(whole)
    assert_decodes(wire, [whole])


def test_parts_reference_the_body_buffers_without_copying() -> None:
    body, extra = b"x" * 1000, memoryview(bytearray(500))
    parts = encode_command_parts(RemotingCommand(code=0, body=body), [extra])
    assert parts[1] is body
    assert parts[2] is extra
    bodyless = encode_command_parts(RemotingCommand(code=0), [extra])
    assert len(bodyless) == 2
    assert bodyless[1] is extra


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"code": 2**15}, "'code' = 32768 does not fit"),
        ({"code": -(2**15) - 1}, "'code' = -32769 does not fit"),
        ({"version": 2**15}, "'version' = 32768 does not fit"),
        ({"ext_fields": {"k" * 32768: "v"}}, "key length"),
    ],
)
def test_binary_encoder_refuses_values_beyond_int16(changes: dict[str, Any], match: str) -> None:
    cmd = replace(SAMPLE, serialize_type=SerializeType.ROCKETMQ, **changes)
    with pytest.raises(ValueError, match=match):
        encode_command(cmd)
    # The same values are fine where the wire type is int32 / unbounded.
    json_cmd = replace(cmd, serialize_type=SerializeType.JSON)
    assert_decodes(encode_command(json_cmd), [json_cmd])


_TOO_BIG = 2**31
_INT32_OVERFLOWS = {
    "code": replace(SAMPLE, code=_TOO_BIG),
    "opaque": replace(SAMPLE, opaque=_TOO_BIG),
    "flag": replace(SAMPLE, flag=-_TOO_BIG - 1),
}


@pytest.mark.parametrize("stype", list(SerializeType))
@pytest.mark.parametrize("field", list(_INT32_OVERFLOWS))
def test_every_encoder_refuses_values_beyond_int32(stype: SerializeType, field: str) -> None:
    with pytest.raises(ValueError, match=f"'{field}' = -?214748364[89] does not fit"):
        encode_command(replace(_INT32_OVERFLOWS[field], serialize_type=stype))


def test_encoder_refuses_a_header_beyond_the_24_bit_length_field() -> None:
    cmd = RemotingCommand(code=0, remark="r" * 0x1000000)
    with pytest.raises(ValueError, match="24-bit length field"):
        encode_command(cmd)
    with pytest.raises(ValueError, match="24-bit length field"):
        encode_command_parts(cmd)
