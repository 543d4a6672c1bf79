"""Trace records as Java's 4.9 client writes them, read back field by field."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.protocol.trace import TraceRecord, decode_trace_body

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
        keys="k1 k2", request_id="req-1",
    )  # fmt: skip
    assert (end.type, end.group, end.transaction_state, end.tags) == (
        "EndTransaction", "TPG", "COMMIT_MESSAGE", "null",
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
