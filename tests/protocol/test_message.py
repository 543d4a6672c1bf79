"""Stored-record codec, checked against a store written by real RocketMQ 4.9.4."""

from __future__ import annotations

import json
import shutil
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol import MessageFormatError
from rocklet.protocol.message import (
    BLANK_MAGIC,
    MESSAGE_MAGIC,
    PHYSICAL_OFFSET_POS,
    QUEUE_OFFSET_POS,
    RECORD_OVERHEAD,
    STORE_TIMESTAMP_POS,
    StoredMessage,
    SysFlag,
    body_crc,
    decode_message,
    encode_message,
    iter_messages,
    java_string_hash,
    pack_host,
    record_size,
    unpack_host,
)
from tests.conftest import GOLDEN_STORE

SEGMENT_SIZE = 1024 * 1024
CQ_FILE_SIZE = 6000  # consume-queue files of 300 entries (rocketmq-4.9.4-store.broker.conf)
MANIFEST = GOLDEN_STORE.parent / "rocketmq-4.9.4-store.manifest.json"


@dataclass(frozen=True)
class GoldenRecord:
    """One record of the golden commitlog and the bytes it was decoded from."""

    offset: int
    raw: bytes
    msg: StoredMessage


@pytest.fixture(scope="module")
def golden_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the golden store (the original must never be opened)."""
    target = tmp_path_factory.mktemp("golden") / "store"
    shutil.copytree(GOLDEN_STORE / "commitlog", target / "commitlog")
    shutil.copytree(GOLDEN_STORE / "consumequeue", target / "consumequeue")
    return target


def _walk_commitlog(store: Path) -> Iterator[GoldenRecord | int]:
    """Yield records in order, and the offset of each blank filler."""
    for segment in sorted((store / "commitlog").iterdir()):
        data, base = segment.read_bytes(), int(segment.name)
        assert len(data) == SEGMENT_SIZE
        pos = 0
        while pos + 8 <= len(data):
            size, magic = struct.unpack_from(">ii", data, pos)
            if size == 0:  # the unwritten tail of the last segment
                assert not data[pos:].strip(b"\x00")
                break
            if magic == BLANK_MAGIC:
                # The filler's size runs exactly to the segment end (docs/store-format.md).
                assert pos + size == len(data)
                yield base + pos
                break
            yield GoldenRecord(base + pos, data[pos : pos + size], decode_message(data, pos))
            pos += size


@pytest.fixture(scope="module")
def golden_records(golden_copy: Path) -> list[GoldenRecord]:
    items = list(_walk_commitlog(golden_copy))
    blanks = [item for item in items if isinstance(item, int)]
    assert len(blanks) == 2, "segments 0 and 1 end with a blank filler"
    return [item for item in items if isinstance(item, GoldenRecord)]


def test_golden_commitlog_holds_2033_records_with_valid_crcs(
    golden_records: list[GoldenRecord],
) -> None:
    assert len(golden_records) == 2033
    for rec in golden_records:
        assert rec.msg.crc_ok(), rec.offset
        assert rec.msg.physical_offset == rec.offset
        assert rec.msg.size == len(rec.raw)
        assert rec.msg.store_host == ("127.0.0.1", 10911)
    topics = {rec.msg.topic for rec in golden_records}
    assert topics == {"GoldenTopic", "GoldenOrdered", "GoldenDelayed", "SCHEDULE_TOPIC_XXXX"}


def test_golden_records_re_encode_to_identical_bytes(golden_records: list[GoldenRecord]) -> None:
    for rec in golden_records:
        m = rec.msg
        encoded = encode_message(
            topic=m.topic,
            body=m.body,
            queue_id=m.queue_id,
            flag=m.flag,
            properties=m.properties,  # a dict: our encoder must write Java's form
            sys_flag=m.sys_flag,
            born_timestamp=m.born_timestamp,
            born_host=pack_host(*m.born_host),
            store_timestamp=m.store_timestamp,
            store_host=pack_host(*m.store_host),
            reconsume_times=m.reconsume_times,
            prepared_transaction_offset=m.prepared_transaction_offset,
            queue_offset=m.queue_offset,
            physical_offset=m.physical_offset,
        )
        assert bytes(encoded) == rec.raw, rec.offset


def test_golden_topic_matches_the_manifest(golden_records: list[GoldenRecord]) -> None:
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    golden = [r.msg for r in golden_records if r.msg.topic == "GoldenTopic"]
    assert len(golden) == len(manifest) == 2001
    # The producer sent synchronously, so commitlog order is send order.
    for msg, entry in zip(golden, manifest, strict=True):
        assert msg.uniq_key == entry["msg_id"]
        assert msg.queue_offset == entry["queue_offset"]
        assert msg.tags == entry["tags"]
    for seq, msg in enumerate(golden[:-1]):
        assert msg.body == f"golden-{seq:05d}-".encode() + b"x" * 1000
        assert msg.properties["seq"] == str(seq)
        assert msg.keys == [f"order-{seq}", f"user-{seq % 7}"]
    assert golden[-1].keys == ["ключ"]
    assert golden[-1].tags == "Täg"


def test_java_string_hash_matches_the_consume_queue_tag_codes(
    golden_copy: Path, golden_records: list[GoldenRecord]
) -> None:
    # Each consume-queue entry holds (commit offset, size, Java hashCode of TAGS),
    # computed by the real broker: a golden table for java_string_hash.
    checked = 0
    for rec in golden_records:
        m = rec.msg
        if m.topic != "GoldenTopic":
            continue
        pos = m.queue_offset * 20
        name = f"{pos - pos % CQ_FILE_SIZE:020d}"
        cq = (golden_copy / "consumequeue" / m.topic / str(m.queue_id) / name).read_bytes()
        offset, size, tags_code = struct.unpack_from(">qiq", cq, pos % CQ_FILE_SIZE)
        assert (offset, size) == (m.physical_offset, m.size)
        assert m.tags is not None
        assert tags_code == java_string_hash(m.tags)
        checked += 1
    assert checked == 2001


# --- the record layout ---------------------------------------------------------------


def _sample(**changes: object) -> bytearray:
    fields: dict[str, object] = {
        "topic": "T",
        "body": b"hello",
        "queue_id": 3,
        "flag": 7,
        "properties": {"TAGS": "a", "KEYS": "k1 k2"},
        "born_timestamp": 1000,
        "born_host": pack_host("10.0.0.2", 50000),
        "store_timestamp": 2000,
        "store_host": pack_host("127.0.0.1", 10911),
        "reconsume_times": 1,
        "prepared_transaction_offset": 9,
        "queue_offset": 5,
        "physical_offset": 4096,
    }
    fields.update(changes)
    return encode_message(**fields)  # type: ignore[arg-type]


def test_record_layout_by_offset() -> None:
    raw = _sample()
    props = b"TAGS\x01a\x02KEYS\x01k1 k2"
    assert len(raw) == record_size(5, 1, len(props)) == RECORD_OVERHEAD + 5 + 1 + len(props)
    size, magic, crc, qid, flag, qoff, poff = struct.unpack_from(">iiiiiqq", raw)
    assert (size, magic, crc, qid, flag) == (len(raw), MESSAGE_MAGIC, body_crc(b"hello"), 3, 7)
    assert struct.unpack_from(">q", raw, QUEUE_OFFSET_POS) == (qoff,) == (5,)
    assert struct.unpack_from(">q", raw, PHYSICAL_OFFSET_POS) == (poff,) == (4096,)
    assert struct.unpack_from(">q", raw, STORE_TIMESTAMP_POS) == (2000,)
    assert raw[48:56] == bytes([10, 0, 0, 2]) + struct.pack(">i", 50000)
    assert raw[84:] == b"\x00\x00\x00\x05hello\x01T" + struct.pack(">h", len(props)) + props
    msg = decode_message(raw)
    assert (msg.tags, msg.keys, msg.reconsume_times, msg.prepared_transaction_offset) == (
        "a",
        ["k1", "k2"],
        1,
        9,
    )


def test_body_crc_is_crc32_masked_positive() -> None:
    assert body_crc(b"") == 0
    assert body_crc(b"123456789") == 0xCBF43926 & 0x7FFFFFFF


def test_encoder_clears_the_ipv6_host_flags() -> None:
    # C++ and ali-ons ignore these bits and would misparse every later field.
    msg = decode_message(_sample(sys_flag=SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6 | 0x4))
    assert msg.sys_flag == 0x4


def test_ipv6_host_records_from_java_still_decode() -> None:
    v4 = bytes(_sample())
    born6 = bytes(16) + struct.pack(">i", 1234)
    store6 = bytes(15) + b"\x01" + struct.pack(">i", 10911)
    raw = bytearray(v4[:48] + born6 + v4[56:64] + store6 + v4[72:])
    struct.pack_into(">i", raw, 0, len(raw))
    struct.pack_into(">i", raw, 36, SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6)
    msg = decode_message(raw)
    assert (msg.born_host, msg.store_host, msg.body, msg.topic) == (
        ("::", 1234),
        ("::1", 10911),
        b"hello",
        "T",
    )


def test_iter_messages_walks_back_to_back_records_and_refuses_a_cut_tail() -> None:
    records = [_sample(queue_offset=i, body=bytes([i]) * i) for i in range(5)]
    joined = b"".join(records)
    assert [m.queue_offset for m in iter_messages(joined)] == [0, 1, 2, 3, 4]
    with pytest.raises(MessageFormatError):
        list(iter_messages(joined[:-1]))


def test_compressed_bodies_inflate_and_crc_covers_the_stored_bytes() -> None:
    payload = b"x" * 5000
    packed = zlib.compress(payload, 5)
    for sys_flag in (SysFlag.COMPRESSED, SysFlag.COMPRESSED | 0x300):
        msg = decode_message(_sample(body=packed, sys_flag=sys_flag))
        assert msg.body == packed and msg.payload() == payload
        assert msg.body_crc == body_crc(packed)
    assert decode_message(_sample(body=packed)).payload() == packed  # flag off: as stored


@pytest.mark.parametrize(
    ("sys_flag", "match"),
    [
        (0x101, "unsupported compression type 0x100"),
        (0x201, "unsupported compression type 0x200"),
        (0x1, "does not inflate"),
    ],
)
def test_uninflatable_bodies_are_message_format_errors(sys_flag: int, match: str) -> None:
    msg = decode_message(_sample(body=b"not zlib", sys_flag=sys_flag))
    with pytest.raises(MessageFormatError, match=match):
        msg.payload()


def _patched(offset: int, fmt: str, value: int) -> bytearray:
    raw = _sample()
    struct.pack_into(fmt, raw, offset, value)
    return raw


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (bytes(_sample())[:47], "truncated in its fixed fields"),
        (_patched(4, ">i", BLANK_MAGIC), "bad magic 0xcbd43194"),
        (_patched(0, ">i", RECORD_OVERHEAD - 1), "does not fit the buffer"),
        (_patched(0, ">i", 10_000), "does not fit the buffer"),
        (_patched(84, ">i", -1), "body length -1 overruns"),
        (_patched(84, ">i", 1000), "body length 1000 overruns"),
        (_patched(93, ">B", 0x80), "topic length -128 overruns"),
        (_patched(93, ">B", 100), "topic length 100 overruns"),
        (_patched(95, ">h", -1), "properties length -1"),
        (_patched(95, ">h", 3), "properties length 3 does not end the record"),
    ],
)
def test_malformed_records_are_message_format_errors(raw: bytes, match: str) -> None:
    with pytest.raises(MessageFormatError, match=match):
        decode_message(raw)


def test_encoder_refuses_oversized_fields() -> None:
    with pytest.raises(MessageFormatError, match="topic is 128 bytes"):
        _sample(topic="t" * 128)
    assert decode_message(_sample(topic="é" * 63 + "t")).topic == "é" * 63 + "t"  # 127 bytes
    with pytest.raises(MessageFormatError, match="properties are 32768 bytes"):
        _sample(properties=b"p" * 32768)
    with pytest.raises(ValueError, match="8-byte fields"):
        _sample(born_host=bytes(20))


def test_hosts_pack_strictly_and_unpack_both_families() -> None:
    assert pack_host("127.0.0.1", 10911) == bytes.fromhex("7F00000100002A9F")
    assert unpack_host(bytes.fromhex("7F00000100002A9F")) == ("127.0.0.1", 10911)
    assert unpack_host(bytes(15) + b"\x01" + struct.pack(">i", 80)) == ("::1", 80)
    for loose in ("127.1", "localhost", "1.2.3.4.5", "::1"):
        with pytest.raises(ValueError):
            pack_host(loose, 1)
    with pytest.raises(MessageFormatError, match="host field of 7 bytes"):
        unpack_host(bytes(7))


# --- Hypothesis: decode_message never fails with anything but MessageFormatError ----------

_VALID = bytes(_sample(sys_flag=SysFlag.COMPRESSED))


def _decode_or_refuse(data: bytes) -> None:
    try:
        msg = decode_message(data)
    except MessageFormatError:
        return
    assert msg.size <= len(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_decode_or_raise_message_format_error(data: bytes) -> None:
    _decode_or_refuse(data)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(_VALID) - 1))
def test_every_truncation_of_a_record_is_refused(cut: int) -> None:
    with pytest.raises(MessageFormatError):
        decode_message(_VALID[:cut])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), max_size=6))
def test_mutated_records_decode_or_raise_message_format_error(
    edits: list[tuple[int, int]],
) -> None:
    raw = bytearray(_VALID)
    for pos, value in edits:
        raw[pos] = value
    _decode_or_refuse(bytes(raw))
