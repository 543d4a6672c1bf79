"""Text without a UTF-8 form in a header: decoded, refused by the typed header, re-encodable.

Three ways a peer puts such text in an intact frame: bytes that are not UTF-8 in a
ROCKETMQ binary or msgpack string, such bytes inside a JSON string, and a JSON
``\\ud800`` escape. Each must decode (the frame is intact, so the request deserves an
answer), reach the typed header as a lone surrogate and be refused there with the
field named; and every answer that echoes such text must still encode in all three
serializations (a failing encode would drop the connection instead of answering).
"""

from __future__ import annotations

import dataclasses
import json
import struct

import msgpack
import pytest

from rocklet.protocol import (
    FrameDecoder,
    HeaderError,
    RemotingCommand,
    RequestCode,
    SerializeType,
    encode_command,
)
from rocklet.protocol.bodies.cluster import TopicList
from rocklet.protocol.header_codec import decode_header, encode_header
from rocklet.protocol.headers import GetRouteInfoRequestHeader

BAD_BYTES = b"Topic\xff\xfe"
AS_DECODED = "Topic\udcff\udcfe"


def binary_header(ext: dict[bytes, bytes], remark: bytes = b"") -> bytes:
    entries = b"".join(
        struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext.items()
    )
    fixed = struct.pack(">hbhii", RequestCode.GET_ROUTEINFO_BY_TOPIC, 0, 401, 5, 0)
    return (
        fixed + struct.pack(">i", len(remark)) + remark + struct.pack(">i", len(entries)) + entries
    )


def decoded_topic(stype: SerializeType, header: bytes) -> str:
    cmd = decode_header(stype, header, b"")
    assert cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC and cmd.opaque == 5
    return cmd.ext_fields["topic"]


def test_binary_bytes_that_are_not_utf8_become_surrogates() -> None:
    header = binary_header({b"topic": BAD_BYTES}, remark=b"r\xc3")
    assert decoded_topic(SerializeType.ROCKETMQ, header) == AS_DECODED
    assert decode_header(SerializeType.ROCKETMQ, header, b"").remark == "r\udcc3"


def test_msgpack_strings_that_are_not_utf8_become_surrogates() -> None:
    header = msgpack.packb(
        {"code": 105, "opaque": 5, "flag": 0, "version": 401, "language": "PYTHON"},
        use_bin_type=True,
    )
    # A map with one more entry, extFields, whose value is a str8 holding bad bytes.
    raw = b"\x86" + header[1:] + b"\xa9extFields\x81\xa5topic\xd9" + bytes([len(BAD_BYTES)])
    assert decoded_topic(SerializeType.MSGPACK, raw + BAD_BYTES) == AS_DECODED


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b'"topic":"Topic\xff\xfe"', AS_DECODED),  # raw bytes inside a JSON string
        (b'"topic":"Topic\\ud800"', "Topic\ud800"),  # an escape of a lone surrogate
        (b'"topic":"Topic\\udcff\\udcfe"', AS_DECODED),
    ],
)
def test_json_headers_keep_such_text_as_surrogates(text: bytes, expected: str) -> None:
    header = b'{"code":105,"opaque":5,"flag":0,"version":401,"extFields":{' + text + b"}}"
    assert decoded_topic(SerializeType.JSON, header) == expected


@pytest.mark.parametrize("stype", list(SerializeType))
def test_the_typed_header_refuses_it_naming_the_field(stype: SerializeType) -> None:
    request = RemotingCommand(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=5, ext_fields={"topic": AS_DECODED}
    )
    decoder = FrameDecoder()
    decoder.feed(encode_command(dataclasses.replace(request, serialize_type=stype)))
    cmd = decoder.next_command()
    assert cmd is not None
    with pytest.raises(HeaderError, match=r"<topic> is not valid UTF-8 text: 'Topic\\udcff"):
        GetRouteInfoRequestHeader.from_ext_fields(cmd.ext_fields)


@pytest.mark.parametrize("stype", list(SerializeType))
@pytest.mark.parametrize("text", [AS_DECODED, "lone \ud800 surrogate", "\udfff"])
def test_answers_echoing_such_text_still_encode(stype: SerializeType, text: str) -> None:
    answer = RemotingCommand(
        17,
        opaque=5,
        flag=1,
        remark=f"no topic {text}",
        ext_fields={text: text},
        serialize_type=stype,
    )
    decoder = FrameDecoder()
    decoder.feed(encode_command(answer))
    back = decoder.next_command()
    assert back is not None and back.code == 17 and back.opaque == 5
    assert back.remark is not None and back.remark.startswith("no topic ")
    if stype == SerializeType.JSON:
        assert back.remark == answer.remark  # \\u escapes carry it exactly
    else:
        assert len(encode_header(back)) > 0  # and what came back encodes again


def test_json_that_is_not_a_header_still_closes() -> None:
    for data in (b"\xff\xfe\xfd", b'{"code":10,"opaque":1,"extFields":{"a":"\xff"}', b"\xff{"):
        with pytest.raises(Exception) as raised:
            decode_header(SerializeType.JSON, data, b"")
        assert type(raised.value).__name__ == "FrameError"
    # A UTF-16 header (BOM) still decodes as before: only bad UTF-8 takes the new path.
    utf16 = json.dumps({"code": 105, "opaque": 5, "extFields": {"topic": "T"}}).encode("utf-16")
    assert decode_header(SerializeType.JSON, utf16, b"").ext_fields == {"topic": "T"}


def test_json_bodies_write_a_lone_surrogate_as_its_escape() -> None:
    # No input reaches a table with one any more; an answer still never fails on it.
    body = TopicList(("Fine", "bad\ud800")).to_json()
    assert b'"bad\\ud800"' in body and b'"Fine"' in body
    assert json.loads(body)["topicList"] == ["Fine", "bad\ud800"]
