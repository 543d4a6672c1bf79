"""Golden data: frames the official clients and a real RocketMQ 4.9.4 broker sent.

Two sources (``docs/captures/README.md``):

* ``captures/*.jsonl``: every request the C++ client (wheel ``rocketmq==0.4.4``) sent
  to a recording server, with the JSON type of each extFields value. Each request is
  rebuilt as the client framed it (jsoncpp: sorted keys, numbers kept as numbers, a
  trailing newline) and must decode to the recorded fields, as Java strings.
* ``captures/real-broker/*.pcap``: three clients against Apache RocketMQ 4.9.4, in
  both directions, JSON and ROCKETMQ binary. Every frame of every TCP stream must
  decode and agree with the ``*.decoded.txt`` listing; pull responses carry stored
  records that must decode with valid CRCs.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocklet.protocol import LanguageCode, RemotingCommand, RequestCode, ResponseCode, SerializeType
from rocklet.protocol.message import StoredMessage, iter_messages, pack_host
from rocklet.protocol.message_id import make_offset_msg_id
from tests.conftest import CAPTURES
from tests.protocol.helpers import assert_decodes, decode_all, raw_frame
from tests.protocol.listing import ListedFrame, Listing, parse_listing
from tests.protocol.pcap_streams import Connection, connections, read_segments, reassemble

JSONL_FILES = sorted(CAPTURES.glob("*.jsonl"))
PCAP_NAMES = ["cpp-client-smoke", "java-client-smoke", "ali-ons-smoke"]
SERVER_ROLES = {9876: "namesrv", 10911: "broker"}
#: extFields the C++ client sends as JSON numbers (docs/protocol.md).
CPP_NUMERIC_FIELDS = {
    "queueId",
    "sysFlag",
    "flag",
    "defaultTopicQueueNums",
    "maxMsgNums",
    "delayLevel",
    "readQueueNums",
    "writeQueueNums",
    "perm",
}


# --- C++ request captures (jsonl) ---------------------------------------------------------


def _requests(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [event for event in map(json.loads, lines) if event["event"] == "request"]


def _recorded_body(event: dict[str, Any]) -> bytes:
    body = event["body"].encode("utf-8")
    if len(body) == event["body_len"] and "\ufffd" not in event["body"]:
        return bytes(body)
    # The recorder logged bodies as text, which loses compressed bytes. Only a body the
    # client zlib-compressed (sysFlag bit 0) may be lossy; stand in bytes of its length.
    assert event["extFields"]["sysFlag"] == ["int", 1]
    return b"\x00" * int(event["body_len"])


def _java_text(kind: str, value: Any) -> str:
    # What Java's fastjson makes of the value when it fills a Map<String, String>.
    if kind == "int":
        assert isinstance(value, int) and not isinstance(value, bool)
        return str(value)
    assert kind == "str" and isinstance(value, str)
    return value


def _as_sent(event: dict[str, Any]) -> tuple[bytes, RemotingCommand]:
    header = event["header"]
    ext_sent = {key: value for key, (_kind, value) in event["extFields"].items()}
    document = {**header, "extFields": ext_sent}
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    body = _recorded_body(event)
    frame = raw_frame((text + "\n").encode(), body, serialize_type=event["serialize"])
    expected = RemotingCommand(
        code=header["code"],
        opaque=header["opaque"],
        flag=header["flag"],
        remark=header["remark"],
        ext_fields={k: _java_text(kind, v) for k, (kind, v) in event["extFields"].items()},
        body=body,
        language=header["language"],
        version=header["version"],
    )
    return frame, expected


@pytest.mark.parametrize("path", JSONL_FILES, ids=lambda p: p.stem)
def test_recorded_cpp_requests_decode_to_their_fields(path: Path) -> None:
    by_connection: dict[tuple[str, str], list[tuple[bytes, RemotingCommand]]] = {}
    for event in _requests(path):
        by_connection.setdefault((event["server"], event["peer"]), []).append(_as_sent(event))
    assert by_connection
    for frames in by_connection.values():
        # One connection's requests back to back, as they arrived on the socket.
        assert_decodes(b"".join(f for f, _ in frames), [cmd for _, cmd in frames])


def test_cpp_requests_look_as_the_reference_says() -> None:
    events = [event for path in JSONL_FILES for event in _requests(path)]
    assert len(events) == 136
    numeric = {k for e in events for k, (kind, _) in e["extFields"].items() if kind == "int"}
    assert numeric <= CPP_NUMERIC_FIELDS
    assert {"queueId", "sysFlag", "maxMsgNums", "delayLevel"} <= numeric
    headers = {
        (e["header"]["language"], e["header"]["version"], e["header"]["remark"]) for e in events
    }
    assert headers == {("CPP", 63, "")}
    assert {e["header"]["flag"] for e in events} == {0}, "C++ never puts the oneway bit on the wire"


def test_cpp_numeric_ext_fields_reach_headers_as_decimal_strings() -> None:
    (send,) = [e for e in _requests(CAPTURES / "capture.jsonl") if e["header"]["opaque"] == 4]
    frame, expected = _as_sent(send)
    assert b'"queueId":2,' in frame
    assert b'"sysFlag":1,' in frame
    assert frame.endswith(b"}\n" + b"\x00" * 28), "jsoncpp's newline, then the body"
    assert (expected.ext_fields["queueId"], expected.ext_fields["sysFlag"]) == ("2", "1")
    assert expected.ext_fields["bornTimestamp"] == "1795252771171"
    assert_decodes(frame, [expected])


# --- real broker pcaps ------------------------------------------------------------------------


def _capture(name: str) -> tuple[list[Connection], Listing]:
    folder = CAPTURES / "real-broker"
    conns = connections(read_segments(folder / f"{name}.pcap"))
    return conns, parse_listing(folder / f"{name}.decoded.txt")


def _directions(conn: Connection) -> Iterator[tuple[str, bytes]]:
    yield "c2s", conn.to_server
    yield "s2c", conn.to_client


def _listed_language(cmd: RemotingCommand) -> str:
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        return str(LanguageCode[cmd.language].value)
    return cmd.language


def _java_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _body_forms(body: bytes) -> tuple[str, str]:
    return body.decode("utf-8", "replace"), body.hex()


def _assert_matches_listing(cmd: RemotingCommand, listed: ListedFrame) -> None:
    got = (cmd.code, cmd.opaque, cmd.flag, cmd.version, cmd.remark, cmd.serialize_type.name)
    want = (listed.code, listed.opaque, listed.flag, listed.version, listed.remark, listed.ser)
    assert got == want
    assert ("RESP" if cmd.is_response else "REQ") == listed.kind
    assert _listed_language(cmd) == listed.lang
    want_ext = {k: _java_value(v) for k, v in listed.ext.items() if v is not None}
    assert dict(cmd.ext_fields) == want_ext
    assert len(cmd.body) == listed.body_len
    preview = listed.body_preview
    assert any(form.startswith(preview) for form in _body_forms(cmd.body)), preview[:60]


@pytest.mark.parametrize("name", PCAP_NAMES)
def test_every_pcap_frame_decodes_and_matches_the_listing(name: str) -> None:
    conns, listing = _capture(name)
    seen: dict[tuple[int, str], list[RemotingCommand]] = {}
    for conn in conns:
        assert listing.servers[conn.client.port] == SERVER_ROLES[conn.server.port]
        for direction, data in _directions(conn):
            if data:
                seen[(conn.client.port, direction)] = decode_all(data)
    assert seen.keys() == listing.streams.keys()
    for key, cmds in seen.items():
        listed = listing.streams[key]
        assert len(cmds) == len(listed), key
        for cmd, frame in zip(cmds, listed, strict=True):
            _assert_matches_listing(cmd, frame)


@pytest.mark.parametrize("name", PCAP_NAMES)
def test_pcap_streams_decode_however_they_are_chunked(name: str) -> None:
    conns, _ = _capture(name)
    for conn in conns:
        for _direction, data in _directions(conn):
            assert_decodes(data, decode_all(data))


@pytest.mark.parametrize("name", PCAP_NAMES)
def test_pcap_frame_counts_match_the_listing_summary(name: str) -> None:
    conns, listing = _capture(name)
    counts: Counter[tuple[Any, ...]] = Counter()
    for conn in conns:
        server = SERVER_ROLES[conn.server.port]
        for direction, data in _directions(conn):
            for cmd in decode_all(data):
                kind = "RESP" if cmd.is_response else "REQ"
                ser = cmd.serialize_type.name
                key = (server, direction, kind, cmd.code, ser, _listed_language(cmd), cmd.version)
                counts[key] += 1
    assert counts == listing.summary


def test_java_client_speaks_rocketmq_binary_and_the_broker_answers_in_kind() -> None:
    conns, _ = _capture("java-client-smoke")
    broker = next(c for c in conns if c.server.port == 10911)
    requests, responses = decode_all(broker.to_server), decode_all(broker.to_client)
    first = requests[0]
    assert (first.code, first.opaque, first.serialize_type) == (310, 4, SerializeType.ROCKETMQ)
    assert (first.language, first.version, first.remark) == ("JAVA", 401, None)
    assert first.ext_fields["b"] == "AnchorJava"
    assert first.ext_fields["k"] == "false"
    assert len(first.body) == 64
    reply = next(r for r in responses if r.opaque == first.opaque)
    assert reply.serialize_type == SerializeType.ROCKETMQ
    assert reply.ext_fields["queueId"] == "0"
    assert len(reply.ext_fields["msgId"]) == 32


def test_cpp_client_sees_route_refusal_then_tbw102() -> None:
    conns, _ = _capture("cpp-client-smoke")
    first_ns = next(c for c in conns if c.server.port == 9876)
    requests, responses = decode_all(first_ns.to_server), decode_all(first_ns.to_client)
    assert [(r.code, r.opaque, r.ext_fields["topic"]) for r in requests] == [
        (105, 0, "AnchorSmoke"),
        (105, 1, "TBW102"),
    ]
    assert [(r.code, r.opaque) for r in responses] == [(17, 0), (0, 1)]
    assert responses[0].remark is not None
    assert responses[0].remark.startswith("No topic route info in name server")
    assert b'"brokerAddrs":{0:"127.0.0.1:10911"}' in responses[1].body


# --- stored records inside pull responses -------------------------------------------------


def _exchanges(conn: Connection) -> Iterator[tuple[RemotingCommand, RemotingCommand]]:
    requests = {c.opaque: c for c in decode_all(conn.to_server) if not c.is_response}
    for reply in decode_all(conn.to_client):
        if reply.is_response and reply.opaque in requests:
            yield requests[reply.opaque], reply


def _offset_msg_id(msg: StoredMessage) -> str:
    return make_offset_msg_id(pack_host(*msg.store_host), msg.physical_offset)


@pytest.mark.parametrize(
    ("name", "pulled_count"),
    [("cpp-client-smoke", 8), ("java-client-smoke", 20), ("ali-ons-smoke", 269)],
)
def test_pull_response_bodies_hold_valid_stored_records(name: str, pulled_count: int) -> None:
    conns, _ = _capture(name)
    sent_ids: set[str] = set()
    pulled: list[StoredMessage] = []
    for conn in conns:
        for request, reply in _exchanges(conn):
            if request.code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
                sent_ids.add(reply.ext_fields["msgId"])
            elif request.code == RequestCode.PULL_MESSAGE and reply.code == ResponseCode.SUCCESS:
                pulled += _check_pull(request, reply)
    assert len(pulled) == pulled_count
    # Every record pulled is one the producer was told it had sent: the offset msgId
    # rebuilt from STOREHOST and PHYSICALOFFSET matches the send response's msgId.
    assert {_offset_msg_id(m) for m in pulled} <= sent_ids


def _check_pull(request: RemotingCommand, reply: RemotingCommand) -> list[StoredMessage]:
    msgs = list(iter_messages(reply.body))
    assert msgs
    assert all(m.crc_ok() for m in msgs)
    ext = request.ext_fields
    topic = ext.get("topic", ext.get("b"))
    assert {m.topic for m in msgs} == {topic}
    assert {m.queue_id for m in msgs} == {int(ext["queueId"])}
    offsets = [m.queue_offset for m in msgs]
    assert offsets == list(range(int(ext["queueOffset"]), int(ext["queueOffset"]) + len(msgs)))
    assert int(reply.ext_fields["nextBeginOffset"]) == offsets[-1] + 1
    assert all(m.store_host == ("127.0.0.1", 10911) for m in msgs)
    return msgs


# --- the reassembler itself ----------------------------------------------------------------


def test_reassembly_orders_segments_and_drops_retransmitted_bytes() -> None:
    isn = 2**32 - 3  # the sequence space wraps inside the stream
    payload = bytes(range(40))
    segs = [(isn + start, payload[start:end]) for start, end in [(0, 10), (10, 25), (25, 40)]]
    shuffled = [segs[2], segs[0], (isn + 5, payload[5:15]), segs[1], segs[0], (isn + 40, b"")]
    wrapped = [((seq % 2**32), data) for seq, data in shuffled]
    assert reassemble(wrapped, isn) == payload


def test_reassembly_without_a_syn_starts_at_the_lowest_sequence_number() -> None:
    assert reassemble([(107, b"def"), (104, b"abc"), (110, b"")]) == b"abcdef"
    assert reassemble([]) == b""


def test_reassembly_refuses_a_gap() -> None:
    with pytest.raises(ValueError, match="gap at relative offset 3"):
        reassemble([(100, b"abc"), (104, b"e")], 100)
