"""Replay the official clients' captured requests against Rocklet; compare the answers.

``captures/real-broker/*.pcap`` recorded each client talking to Apache RocketMQ 4.9.4.
Every request a client sent is sent again, unchanged (same code, header fields, body,
language, version and serialization), on its own connection to a real Rocklet name
server or broker, in the order the capture shows across all connections: before a
request goes out, every answer the capture shows arriving earlier is awaited. Each
answer must match the real broker's: the same code, serialization (ROCKETMQ binary for
the Java client), language and version, the same extFields keys with equal values (the
offset msgId only in shape: it names another host and commit-log position), the same
remark, and an equivalent body (routes compared as routes, pulled records field by
field). Requests the real broker left unanswered (long-polling pulls) stay unanswered.

Intended differences (see ``_DIFFERENCES``):

* REGISTER_BROKER frames are the real broker's own registration, not the client's: not
  replayed (Rocklet's broker registers itself).
* Rocklet registers a topic created by a send or a heartbeat with the name server just
  after answering, where Java registers before answering; a route request the capture
  shows answered SUCCESS is therefore asked again until the route is there.
* How many NOTIFY_CONSUMER_IDS_CHANGED requests a group change causes: the real broker
  sent two for two concurrent C++ heartbeats (a race in ``ConsumerManager``); only
  "at least one, to that connection, naming the group" is required.

The ali-ons capture is not replayed: its topic already held ~36,700 messages per queue
on the real broker, so offsets and pull answers cannot be reproduced from a fresh store.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dpkt
import pytest

from rocklet.protocol.bodies.route import TopicRouteData
from rocklet.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper
from rocklet.protocol.codes import RequestCode, ResponseCode, SerializeType
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import StoredMessage, iter_messages
from rocklet.transport.connection import Connection, HandlerResult
from rocklet.transport.dial import open_connection
from tests.cluster import Cluster, running_cluster
from tests.conftest import CAPTURES
from tests.protocol.helpers import decode_all, frame_ends
from tests.protocol.pcap_streams import Endpoint, connections, read_segments

REAL_BROKER = "127.0.0.1:10911"
SERVER_ROLES = {9876: "namesrv", 10911: "broker"}
ANSWER_TIMEOUT_S = 10.0
_SEQ_MOD = 1 << 32
_OFFSET_MSG_ID = re.compile(r"^[0-9A-F]{32}(,[0-9A-F]{32})*$")
#: Where Rocklet answers differently on purpose: name -> why it does not matter.
_DIFFERENCES: Mapping[str, str] = {
    "pull remark FOUND": (
        "Java names the store status FOUND in a SUCCESS pull's remark; no client reads it"
    ),
    "quoted broker ids": (
        "the real name server writes fastjson's unquoted brokerAddrs keys ({0:...}) for "
        "clients older than 4.9.4; Rocklet writes standard JSON unless "
        "unquotedRouteKeysForOldClients is set, and the C++ client reads both"
    ),
}


def _remark_difference(request: RemotingCommand, want: str | None, got: str | None) -> str:
    if request.code == RequestCode.PULL_MESSAGE and (want, got) == ("FOUND", None):
        return "pull remark FOUND"
    return f"remark {got!r}, want {want!r}"


# --- the capture as a timeline ---------------------------------------------------------------


@dataclass(frozen=True)
class Frame:
    """One captured frame and when its last byte was seen."""

    conn: int
    ts: float
    from_client: bool
    cmd: RemotingCommand


@dataclass
class Capture:
    """Client connections (index -> server role) and all their frames by time."""

    roles: dict[int, str] = field(default_factory=dict)
    frames: list[Frame] = field(default_factory=list)


def _segment_times(path: Path) -> dict[tuple[Endpoint, Endpoint], list[tuple[float, int, int]]]:
    """Per direction: ``(capture time, sequence number, payload length)`` of each segment.

    A SYN is listed with length -1 so the stream's first byte can be located.
    """
    out: dict[tuple[Endpoint, Endpoint], list[tuple[float, int, int]]] = {}
    with path.open("rb") as fh:
        pcapng = fh.read(4) == b"\x0a\x0d\x0d\x0a"
        fh.seek(0)
        reader: Any = dpkt.pcapng.Reader(fh) if pcapng else dpkt.pcap.Reader(fh)
        for ts, raw in reader:
            ip = dpkt.ethernet.Ethernet(raw).data
            tcp = ip.data
            if not isinstance(tcp, dpkt.tcp.TCP):
                continue
            src = Endpoint(".".join(map(str, ip.src)), int(tcp.sport))
            dst = Endpoint(".".join(map(str, ip.dst)), int(tcp.dport))
            length = -1 if tcp.flags & dpkt.tcp.TH_SYN else len(tcp.data)
            out.setdefault((src, dst), []).append((float(ts), int(tcp.seq), length))
    return out


def _frame_times(segments: list[tuple[float, int, int]], ends: list[int]) -> list[float]:
    """When the last byte of each frame (given its end offset) was first captured."""
    syn = [seq for _ts, seq, length in segments if length < 0]
    data = [(ts, seq, length) for ts, seq, length in segments if length > 0]
    isn = (syn[0] + 1) % _SEQ_MOD if syn else min(seq for _ts, seq, _n in data)
    spans = [(ts, (seq - isn) % _SEQ_MOD, length) for ts, seq, length in data]
    return [min(ts for ts, start, n in spans if start < end <= start + n) for end in ends]


def load_capture(name: str) -> Capture:
    """Every frame of a capture's client connections, ordered by capture time."""
    path = CAPTURES / "real-broker" / f"{name}.pcap"
    times = _segment_times(path)
    capture = Capture()
    for index, conn in enumerate(connections(read_segments(path))):
        capture.roles[index] = SERVER_ROLES[conn.server.port]
        for from_client, data, key in (
            (True, conn.to_server, (conn.client, conn.server)),
            (False, conn.to_client, (conn.server, conn.client)),
        ):
            if not data:
                continue
            stamps = _frame_times(times[key], frame_ends(data))
            for ts, cmd in zip(stamps, decode_all(data), strict=True):
                capture.frames.append(Frame(index, ts, from_client, cmd))
    capture.frames.sort(key=lambda f: f.ts)
    return capture


# --- replaying ---------------------------------------------------------------------------------


@dataclass
class Replay:
    """What happened when a capture was replayed."""

    compared: int = 0
    reasked_routes: int = 0
    pushed: dict[int, list[RemotingCommand]] = field(default_factory=dict)
    unanswered: dict[tuple[int, int], asyncio.Task[RemotingCommand]] = field(default_factory=dict)
    tasks: list[asyncio.Task[RemotingCommand]] = field(default_factory=list)
    differences: set[str] = field(default_factory=set)


def _is_broker_registration(capture: Capture, index: int) -> bool:
    requests = [f.cmd for f in capture.frames if f.conn == index and f.from_client]
    return bool(requests) and all(c.code == RequestCode.REGISTER_BROKER for c in requests)


async def _open(cluster: Cluster, role: str, pushed: list[RemotingCommand]) -> Connection:
    async def record(_conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        pushed.append(cmd)  # broker-initiated requests (NOTIFY_CONSUMER_IDS_CHANGED)
        return None

    port = cluster.namesrv.port if role == "namesrv" else cluster.broker.port
    return await open_connection("127.0.0.1", port, handler=record)


@asynccontextmanager
async def replaying(capture: Capture, cluster: Cluster) -> AsyncIterator[Replay]:
    """Replay a capture; on exit close the connections and reap every request task."""
    result = Replay()
    async with AsyncExitStack() as stack:
        try:
            await _replay(capture, cluster, stack, result)
            yield result
        finally:
            await stack.aclose()  # fails the requests still waiting (held pulls)
            await asyncio.gather(*result.tasks, return_exceptions=True)


async def _replay(
    capture: Capture, cluster: Cluster, stack: AsyncExitStack, result: Replay
) -> None:
    conns: dict[int, Connection] = {}
    for index, role in capture.roles.items():
        if not _is_broker_registration(capture, index):
            result.pushed[index] = []
            conns[index] = await stack.enter_async_context(
                await _open(cluster, role, result.pushed[index])
            )
    sent: dict[tuple[int, int], tuple[RemotingCommand, asyncio.Task[RemotingCommand]]] = {}
    for frame in capture.frames:
        conn = conns.get(frame.conn)
        if conn is None:
            continue
        key = (frame.conn, frame.cmd.opaque)
        if frame.from_client:
            assert not frame.cmd.is_response, "clients answered nothing in these captures"
            if frame.cmd.is_oneway:
                await conn.send_oneway(frame.cmd)
            else:
                task = asyncio.create_task(conn.request(frame.cmd, ANSWER_TIMEOUT_S + 20))
                result.tasks.append(task)
                sent[key] = (frame.cmd, task)
        elif frame.cmd.is_response:
            request, task = sent.pop(key)
            answer = await asyncio.wait_for(asyncio.shield(task), ANSWER_TIMEOUT_S)
            if request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
                answer = await _route_when_registered(conn, request, answer, frame.cmd, result)
            _compare(request, frame.cmd, answer, cluster.broker.addr, result)
            result.compared += 1
    result.unanswered = {key: task for key, (_req, task) in sent.items()}


async def _route_when_registered(
    conn: Connection,
    request: RemotingCommand,
    answer: RemotingCommand,
    want: RemotingCommand,
    result: Replay,
) -> RemotingCommand:
    # Rocklet registers new topics with the name server right after the send or heartbeat
    # that created them; the real broker did so before answering (module docstring).
    async def ask_until_routed() -> RemotingCommand:
        latest = answer
        while latest.code == ResponseCode.TOPIC_NOT_EXIST:
            result.reasked_routes += 1
            latest = await conn.request(request, ANSWER_TIMEOUT_S)
        return latest

    if want.code != ResponseCode.SUCCESS:
        return answer
    return await asyncio.wait_for(ask_until_routed(), ANSWER_TIMEOUT_S)


# --- comparing answers ---------------------------------------------------------------------------


def _compare(
    request: RemotingCommand,
    want: RemotingCommand,
    got: RemotingCommand,
    our_broker: str,
    result: Replay,
) -> None:
    what = f"{RequestCode(request.code).name} (captured opaque {want.opaque})"
    assert got.code == want.code, f"{what}: code {got.code} {got.remark!r}, want {want.code}"
    assert got.serialize_type == want.serialize_type, what
    assert (got.language, got.version) == (want.language, want.version), what
    assert got.ext_fields.keys() == want.ext_fields.keys(), f"{what}: {dict(got.ext_fields)}"
    for name, value in want.ext_fields.items():
        if name == "msgId":  # another host and commit-log position, same form
            assert _OFFSET_MSG_ID.match(got.ext_fields[name]), (what, got.ext_fields[name])
        else:
            assert got.ext_fields[name] == value, f"{what}: {name}={got.ext_fields[name]!r}"
    if got.remark != want.remark:
        difference = _remark_difference(request, want.remark, got.remark)
        assert difference in _DIFFERENCES, f"{what}: {difference}"
        result.differences.add(difference)
    if not want.body:
        assert not got.body, f"{what}: unexpected body {got.body[:80]!r}"
    elif request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
        if _compare_routes(want.body, got.body, our_broker, what):
            result.differences.add("quoted broker ids")
    else:
        _compare_documents(request, want, got, what)


def _compare_documents(
    request: RemotingCommand, want: RemotingCommand, got: RemotingCommand, what: str
) -> None:
    if request.code == RequestCode.PULL_MESSAGE:
        _compare_records(list(iter_messages(want.body)), list(iter_messages(got.body)), what)
    else:  # JSON documents, e.g. the consumer id list
        assert json.loads(got.body) == json.loads(want.body), what


def _compare_routes(want_body: bytes, got_body: bytes, our_broker: str, what: str) -> bool:
    """Compare two route bodies; returns whether only Rocklet quoted the broker ids."""
    want, got = TopicRouteData.from_json(want_body), TopicRouteData.from_json(got_body)
    assert got.queue_datas == want.queue_datas, what
    assert got.order_topic_conf == want.order_topic_conf, what
    assert [(b.cluster, b.broker_name) for b in got.broker_datas] == [
        (b.cluster, b.broker_name) for b in want.broker_datas
    ], what
    assert [dict(b.broker_addrs) for b in got.broker_datas] == [
        {k: our_broker if v == REAL_BROKER else v for k, v in b.broker_addrs.items()}
        for b in want.broker_datas
    ], what
    unquoted = b'"brokerAddrs":{0:' in want_body, b'"brokerAddrs":{0:' in got_body
    assert unquoted in ((False, False), (True, True), (True, False)), what
    return unquoted == (True, False)


def _record_view(msg: StoredMessage) -> tuple[object, ...]:
    # Everything a client can see except where and when it was stored and the ports.
    return (
        msg.topic,
        msg.queue_id,
        msg.queue_offset,
        msg.flag,
        msg.sys_flag,
        msg.born_timestamp,
        msg.born_host[0],
        msg.reconsume_times,
        msg.prepared_transaction_offset,
        msg.body_crc,
        msg.body,
        msg.properties,
        msg.size,
    )


def _compare_records(want: list[StoredMessage], got: list[StoredMessage], what: str) -> None:
    assert [_record_view(m) for m in got] == [_record_view(m) for m in want], what
    assert all(m.crc_ok() for m in got), what


# --- tests ------------------------------------------------------------------------------------


@pytest.fixture
async def java_cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    # The real broker already had AnchorJava (4 queues): its first route request succeeded.
    topics = TopicConfigSerializeWrapper({"AnchorJava": TopicConfig("AnchorJava", 4, 4)})
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "topics.json").write_bytes(topics.to_json())
    async with running_cluster(tmp_path) as cluster:
        yield cluster


def _push_view(cmd: RemotingCommand) -> tuple[object, ...]:
    return (
        cmd.code,
        cmd.flag,
        cmd.serialize_type,
        cmd.language,
        cmd.version,
        cmd.remark,
        tuple(sorted(cmd.ext_fields.items())),
        cmd.body,
    )


def assert_same_pushes(capture: Capture, result: Replay) -> None:
    """The broker sent each connection the requests the real broker sent it.

    Compared as sets: how many NOTIFY_CONSUMER_IDS_CHANGED one change causes is racy in
    the real broker (module docstring).
    """
    want = {
        index: {
            _push_view(f.cmd)
            for f in capture.frames
            if f.conn == index and not f.from_client and not f.cmd.is_response
        }
        for index in result.pushed
    }
    got = {index: {_push_view(c) for c in pushed} for index, pushed in result.pushed.items()}
    assert got == want


def _frames_of(capture: Capture, code: int) -> list[Frame]:
    return [f for f in capture.frames if f.from_client and f.cmd.code == code]


async def test_java_binary_client_gets_the_real_brokers_answers(java_cluster: Cluster) -> None:
    capture = load_capture("java-client-smoke")
    sent = {f.cmd.serialize_type for f in capture.frames if f.from_client}
    assert sent == {SerializeType.ROCKETMQ, SerializeType.JSON}  # JSON: REGISTER_BROKER only
    async with replaying(capture, java_cluster) as result:
        assert result.compared == 42
        # The four pulls at the end of each queue were held by the real broker and are
        # held here too, although later requests on that connection were answered.
        held = sorted(result.unanswered)
        assert [opaque for _conn, opaque in held] == [35, 36, 37, 38]
        assert not any(task.done() for task in result.unanswered.values())
        assert_same_pushes(capture, result)
        (notify,) = result.pushed[held[0][0]]
        assert notify.ext_fields == {"consumerGroup": "CID_java_smoke"}
    assert all(isinstance(t.exception(), Exception) for t in result.unanswered.values())
    # The oneway UPDATE_CONSUMER_OFFSETs (nothing to compare) were applied.
    offsets = java_cluster.broker.ctx.offsets.offsets_of("CID_java_smoke", "AnchorJava")
    assert offsets == dict.fromkeys(range(4), 5)
    assert result.differences == set(_DIFFERENCES) - {"quoted broker ids"}


async def test_cpp_json_client_gets_the_real_brokers_answers(tmp_path: Path) -> None:
    capture = load_capture("cpp-client-smoke")
    async with running_cluster(tmp_path) as cluster, replaying(capture, cluster) as result:
        assert result.compared == 38
        held = sorted(opaque for _conn, opaque in result.unanswered)
        assert held == [22, 23, 24, 25]
        assert not any(task.done() for task in result.unanswered.values())
        assert_same_pushes(capture, result)
        notified = {c.ext_fields["consumerGroup"] for p in result.pushed.values() for c in p}
        assert notified == {"CID_anchor_smoke", "CID_anchor_smoke_pull"}
    assert result.differences == set(_DIFFERENCES)
    # The UPDATE_CONSUMER_OFFSETs the C++ client sends with flag 0 were answered and applied.
    offsets = cluster.broker.ctx.offsets.offsets_of("CID_anchor_smoke", "AnchorSmoke")
    assert offsets == {0: 2, 1: 1, 2: 1, 3: 1}


def test_capture_timeline_puts_each_answer_after_its_request() -> None:
    for name in ("java-client-smoke", "cpp-client-smoke"):
        capture = load_capture(name)
        asked: dict[tuple[int, int], float] = {}
        for frame in capture.frames:
            key = (frame.conn, frame.cmd.opaque)
            if frame.from_client:
                asked[key] = frame.ts
            elif frame.cmd.is_response:
                assert asked[key] <= frame.ts, (name, key)
        assert len(_frames_of(capture, RequestCode.PULL_MESSAGE)) in (8, 16)
