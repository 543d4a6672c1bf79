"""Trace records as Java's 4.9 client writes them: read back field by field, and written."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol.trace import (
    ConsumeReturnType,
    TraceMessageType,
    TraceRecord,
    decode_trace_body,
    encode_trace_records,
)

F, R = "\x01", "\x02"
MSG_ID = "7F0000010B3A18B4AAC2707C5A3A0000"
OFFSET_ID = "7F00000100002A9F0000000000000C8A"


def _body(*records: list[str]) -> bytes:
    # Each record ends with the record separator, the last one too.
    return "".join(F.join(fields) + R for fields in records).encode()


PUB = ["Pub", "1764331200123", "DefaultRegion", "PG", "Orders", MSG_ID, "TagA", "k1 k2",
       "127.0.0.1:10911", "1024", "3", "0", OFFSET_ID, "true"]  # fmt: skip
SUB_BEFORE = ["SubBefore", "1764331200200", "DefaultRegion", "CG", "req-1", MSG_ID, "0", "k1 k2"]
SUB_AFTER = ["SubAfter", "req-1", MSG_ID, "7", "false", "k1 k2", "1", "1764331200207", "CG"]
END_TX = ["EndTransaction", "1764331200300", "DefaultRegion", "TPG", "Orders", MSG_ID, "null",
          "", "127.0.0.1:10911", "1", "tx-1", "COMMIT_MESSAGE", "false"]  # fmt: skip


def test_every_record_type_of_a_batch() -> None:
    pub, before, after, end = decode_trace_body(_body(PUB, SUB_BEFORE, SUB_AFTER, END_TX))
    assert pub == TraceRecord(
        "Pub", MSG_ID, group="PG", timestamp=1764331200123, cost_ms=3, success=True,
        topic="Orders", tags="TagA", keys="k1 k2", store_host="127.0.0.1:10911",
        offset_msg_id=OFFSET_ID, region="DefaultRegion", body_length=1024,
    )  # fmt: skip
    assert (before.type, before.group, before.request_id, before.retry_times) == (
        "SubBefore", "CG", "req-1", 0,
    )  # fmt: skip
    assert after == TraceRecord(
        "SubAfter", MSG_ID, group="CG", timestamp=1764331200207, cost_ms=7, success=False,
        keys="k1 k2", request_id="req-1", context_code=ConsumeReturnType.TIME_OUT,
    )  # fmt: skip
    assert (end.type, end.group, end.transaction_state, end.tags) == (
        "EndTransaction", "TPG", "COMMIT_MESSAGE", "null",
    )  # fmt: skip
    assert (end.msg_type, end.transaction_id, end.from_transaction_check) == (
        TraceMessageType.TRANS_HALF, "tx-1", False,
    )  # fmt: skip


def test_older_clients_layouts() -> None:
    # A Pub without the offset msgId (13 fields), one with the client host (15), and a
    # SubAfter from before 4.9 (no context code, time or group).
    old_pub = [*PUB[:12], "false"]
    host_pub = [*PUB, "10.0.0.7"]
    old_after = SUB_AFTER[:6]
    old, hosted, after = decode_trace_body(_body(old_pub, host_pub, old_after))
    assert (old.offset_msg_id, old.success) == ("", False)
    assert (hosted.offset_msg_id, hosted.client_host) == (OFFSET_ID, "10.0.0.7")
    assert (after.group, after.timestamp, after.cost_ms) == ("", 0, 7)


def test_malformed_records_are_skipped_not_fatal() -> None:
    bad_number = ["Pub", "soon", *PUB[2:]]
    short = SUB_BEFORE[:5]
    unknown = ["Ping", "1"]
    records = decode_trace_body(_body(bad_number, short, unknown, SUB_AFTER) + b"\xff" + R.encode())
    assert [r.type for r in records] == ["SubAfter"]
    assert decode_trace_body(b"") == []


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_decode_without_raising(body: bytes) -> None:
    assert all(isinstance(r, TraceRecord) for r in decode_trace_body(body))


# -- writing ---------------------------------------------------------------------------


def test_a_pub_record_is_written_byte_for_byte_as_java_writes_it() -> None:
    # TraceDataEncoder.encoderFromContextBean of the same send: 14 fields, the message
    # type as its ordinal, the success as Java's boolean text, the record ended by 0x02.
    record = TraceRecord(
        "Pub", MSG_ID, group="PG", timestamp=1764331200123, cost_ms=3, success=True,
        topic="Orders", tags="TagA", keys="k1 k2", store_host="127.0.0.1:10911",
        offset_msg_id=OFFSET_ID, region="DefaultRegion", body_length=1024,
    )  # fmt: skip
    assert encode_trace_records([record]) == (
        b"Pub\x011764331200123\x01DefaultRegion\x01PG\x01Orders\x01"
        + MSG_ID.encode()
        + b"\x01TagA\x01k1 k2\x01127.0.0.1:10911\x011024\x013\x010\x01"
        + OFFSET_ID.encode()
        + b"\x01true\x02"
    )
    assert encode_trace_records([record]) == _body(PUB)
    # A failed delayed send without tags or keys: Java's "null" and "false".
    delayed = TraceRecord(
        "Pub", MSG_ID, group="PG", timestamp=1, success=False, topic="Orders", tags="null",
        keys="null", msg_type=TraceMessageType.DELAY,
    )  # fmt: skip
    assert encode_trace_records([delayed]).split(b"\x01")[6:8] == [b"null", b"null"]
    assert encode_trace_records([delayed]).endswith(b"\x013\x01\x01false\x02")


def test_every_layout_java_writes_is_written_again_unchanged() -> None:
    body = _body(PUB, SUB_BEFORE, SUB_AFTER, END_TX)
    assert encode_trace_records(decode_trace_body(body)) == body


def test_fields_holding_a_separator_and_unknown_types_are_refused() -> None:
    with pytest.raises(ValueError, match="separator"):
        encode_trace_records([TraceRecord("SubBefore", MSG_ID, keys="a\x01b")])
    with pytest.raises(ValueError, match="separator"):
        encode_trace_records([TraceRecord("SubAfter", MSG_ID, group="g\x02")])
    with pytest.raises(ValueError, match="unknown"):
        encode_trace_records([TraceRecord("Ping", MSG_ID)])


_text = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"))
_ints = st.integers(-(2**63), 2**63 - 1)


def _records() -> st.SearchStrategy[TraceRecord]:
    """Records of each type holding only the fields their layout carries."""
    pub = st.builds(
        TraceRecord, st.just("Pub"), _text, group=_text, timestamp=_ints, cost_ms=_ints,
        success=st.booleans(), topic=_text, tags=_text, keys=_text, store_host=_text,
        offset_msg_id=_text, region=_text, body_length=_ints, client_host=_text,
        msg_type=st.sampled_from(list(TraceMessageType)).map(int),
    )  # fmt: skip
    before = st.builds(
        TraceRecord, st.just("SubBefore"), _text, group=_text, timestamp=_ints, region=_text,
        request_id=_text, retry_times=_ints, keys=_text,
    )  # fmt: skip
    after = st.builds(
        TraceRecord, st.just("SubAfter"), _text, group=_text, timestamp=_ints, cost_ms=_ints,
        success=st.booleans(), keys=_text, request_id=_text,
        context_code=st.sampled_from(list(ConsumeReturnType)).map(int),
    )  # fmt: skip
    end = st.builds(
        TraceRecord, st.just("EndTransaction"), _text, group=_text, timestamp=_ints,
        topic=_text, tags=_text, keys=_text, store_host=_text, region=_text,
        msg_type=_ints, transaction_id=_text, transaction_state=_text,
        from_transaction_check=st.booleans(),
    )  # fmt: skip
    return st.one_of(pub, before, after, end)


@settings(max_examples=300, deadline=None)
@given(st.lists(_records(), max_size=8))
def test_written_records_read_back_equal(records: list[TraceRecord]) -> None:
    assert decode_trace_body(encode_trace_records(records)) == records
