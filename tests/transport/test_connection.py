"""The shared asyncio transport: correlation, timeouts, close, server-initiated requests."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest

from rocklet.client.errors import ConnectError, ConnectionClosedError, RequestTimeoutError
from rocklet.protocol import FLAG_ONEWAY, FLAG_RESPONSE, FrameDecoder, FrameError, RemotingCommand
from rocklet.protocol.frame import encode_command
from rocklet.transport import ProcessorRegistry, RemotingServer, RequestContext
from rocklet.transport.connection import Connection, ConnectionStatus, HandlerResult
from rocklet.transport.dial import open_connection
from tests.logcapture import capture_sdk_logs

ECHO = 1000
PARKED = 1001
ASK_CLIENT = 1002
ONEWAY = 1003
TIMEOUT = 5.0


class Gates:
    """Processors park on a gate per request id; the test opens them in any order."""

    def __init__(self) -> None:
        self.arrived: dict[str, asyncio.Event] = {}
        self.release: dict[str, asyncio.Event] = {}

    def _get(self, table: dict[str, asyncio.Event], key: str) -> asyncio.Event:
        return table.setdefault(key, asyncio.Event())

    async def park(self, key: str) -> None:
        self._get(self.arrived, key).set()
        await self._get(self.release, key).wait()

    async def wait_arrived(self, key: str) -> None:
        await asyncio.wait_for(self._get(self.arrived, key).wait(), TIMEOUT)

    def open(self, key: str) -> None:
        self._get(self.release, key).set()

    def open_all(self) -> None:
        for event in self.release.values():
            event.set()


class Env:
    def __init__(self) -> None:
        self.gates = Gates()
        self.oneway_seen: asyncio.Queue[RemotingCommand] = asyncio.Queue()


def build_registry(env: Env) -> ProcessorRegistry:
    async def echo(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        return cmd.make_response(0, body=cmd.body, ext_fields=cmd.ext_fields)

    async def parked(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        key = cmd.ext_fields["id"]
        await env.gates.park(key)
        return cmd.make_response(0, body=key.encode())

    async def ask_client(ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        answer = await ctx.connection.request(RemotingCommand(code=40, body=b"ping"), TIMEOUT)
        return cmd.make_response(0, body=b"client said " + answer.body, remark=str(answer.code))

    async def oneway(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        await env.oneway_seen.put(cmd)
        return cmd.make_response(0, body=b"must not be sent")

    registry = ProcessorRegistry()
    registry.register_all({ECHO: echo, PARKED: parked, ASK_CLIENT: ask_client, ONEWAY: oneway})
    return registry


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    yield Env()


@pytest.fixture
async def server(env: Env) -> AsyncIterator[RemotingServer]:
    srv = RemotingServer("127.0.0.1", 0, build_registry(env))
    await srv.start()
    try:
        yield srv
    finally:
        env.gates.open_all()
        await srv.stop(grace_s=TIMEOUT)


@pytest.fixture
async def conn(server: RemotingServer) -> AsyncIterator[Connection]:
    c = await open_connection("127.0.0.1", server.port)
    try:
        yield c
    finally:
        await c.close()


def parked_cmd(key: str) -> RemotingCommand:
    return RemotingCommand(code=PARKED, ext_fields={"id": key})


async def test_request_gets_its_answer(conn: Connection) -> None:
    answer = await conn.request(RemotingCommand(code=ECHO, body=b"hi", ext_fields={"k": "v"}), 5)
    assert answer.is_response
    assert (answer.code, answer.body, dict(answer.ext_fields)) == (0, b"hi", {"k": "v"})
    assert conn.pending_requests == 0
    assert conn.status is ConnectionStatus.OPEN


async def test_answers_released_in_reverse_order_complete_the_right_requests(
    conn: Connection, env: Env
) -> None:
    keys = ["a", "b", "c", "d"]
    tasks = {k: asyncio.create_task(conn.request(parked_cmd(k), TIMEOUT)) for k in keys}
    for k in keys:
        await env.gates.wait_arrived(k)
    assert conn.pending_requests == len(keys)
    for k in reversed(keys):
        env.gates.open(k)
        answer = await asyncio.wait_for(tasks[k], TIMEOUT)
        assert answer.body == k.encode()
        assert not any(tasks[other].done() for other in keys if other < k)
    assert conn.pending_requests == 0


async def test_timeout_removes_the_pending_entry_and_a_late_answer_is_dropped(
    conn: Connection, env: Env
) -> None:
    with pytest.raises(RequestTimeoutError) as info:
        await conn.request(parked_cmd("late"), 0.05)
    assert info.value.code == PARKED
    assert isinstance(info.value, TimeoutError)
    assert conn.pending_requests == 0
    await env.gates.wait_arrived("late")
    with capture_sdk_logs() as logs:
        env.gates.open("late")
        # The late answer reaches the client before this echo's (one ordered stream).
        answer = await conn.request(RemotingCommand(code=ECHO, body=b"next"), TIMEOUT)
    assert answer.body == b"next"
    assert any(e["event"] == "dropping response with unknown opaque" for e in logs)
    assert conn.is_open


async def test_close_fails_pending_requests(conn: Connection, env: Env) -> None:
    task = asyncio.create_task(conn.request(parked_cmd("x"), TIMEOUT))
    await env.gates.wait_arrived("x")
    await conn.close()
    await conn.close()  # idempotent
    assert conn.status is ConnectionStatus.CLOSED
    with pytest.raises(ConnectionClosedError):
        await task
    with pytest.raises(ConnectionClosedError):
        await conn.request(RemotingCommand(code=ECHO), TIMEOUT)
    with pytest.raises(ConnectionClosedError):
        await conn.send_oneway(RemotingCommand(code=ECHO))


async def test_peer_closing_fails_pending_requests(server: RemotingServer, env: Env) -> None:
    c = await open_connection("127.0.0.1", server.port)
    closed = asyncio.Event()
    c.add_close_callback(lambda _c: closed.set())
    task = asyncio.create_task(c.request(parked_cmd("y"), TIMEOUT))
    await env.gates.wait_arrived("y")
    await server.stop(grace_s=0)
    with pytest.raises(ConnectionClosedError):
        await task
    await asyncio.wait_for(closed.wait(), TIMEOUT)
    assert c.status is ConnectionStatus.CLOSED
    await c.close()


async def test_server_initiated_request_reaches_the_client_handler(server: RemotingServer) -> None:
    seen: list[RemotingCommand] = []

    async def handler(_conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        seen.append(cmd)
        return cmd.make_response(0, body=b"pong")

    async with await open_connection("127.0.0.1", server.port, handler=handler) as c:
        answer = await c.request(RemotingCommand(code=ASK_CLIENT), TIMEOUT)
    assert answer.body == b"client said pong"
    assert answer.remark == "0"
    assert [(cmd.code, cmd.body, cmd.is_response) for cmd in seen] == [(40, b"ping", False)]


async def test_client_without_handler_answers_not_supported(server: RemotingServer) -> None:
    async with await open_connection("127.0.0.1", server.port) as c:
        answer = await c.request(RemotingCommand(code=ASK_CLIENT), TIMEOUT)
    assert answer.body == b"client said "
    assert answer.remark == "3"


async def test_oneway_is_delivered_with_the_flag_and_not_answered(
    conn: Connection, env: Env
) -> None:
    with capture_sdk_logs() as logs:
        await conn.send_oneway(RemotingCommand(code=ONEWAY, body=b"fire"))
        seen = await asyncio.wait_for(env.oneway_seen.get(), TIMEOUT)
        answer = await conn.request(RemotingCommand(code=ECHO, body=b"after"), TIMEOUT)
    assert seen.flag & FLAG_ONEWAY and seen.body == b"fire"
    assert answer.body == b"after"
    assert conn.pending_requests == 0
    assert not [e for e in logs if "unknown opaque" in e["event"]]


async def test_broken_frame_from_peer_fails_pending_with_the_cause() -> None:
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.write(struct.pack(">i", 1))  # total length 1 < 4: no frame can follow
        await writer.drain()
        await reader.read()  # until the client hangs up
        writer.close()

    srv = await asyncio.start_server(garbage, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        c = await open_connection("127.0.0.1", port)
        with pytest.raises(ConnectionClosedError) as info:
            await c.request(RemotingCommand(code=ECHO), TIMEOUT)
        assert isinstance(info.value.__cause__, FrameError)
        await c.close()
        assert c.status is ConnectionStatus.CLOSED
    finally:
        srv.close()
        await srv.wait_closed()


async def test_connect_refused_raises_connect_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectError) as info:
        await open_connection("127.0.0.1", port)
    assert isinstance(info.value, ConnectionClosedError)
    assert info.value.peer == f"127.0.0.1:{port}"


# -- a fake transport: deterministic order, no sockets ------------------------------


class FakeTransport(asyncio.Transport):
    def __init__(self, protocol: Connection) -> None:
        super().__init__()
        self.protocol = protocol
        self.decoder = FrameDecoder()
        self.closing = False
        self.reading = True
        self.writes = 0
        self.written = asyncio.Event()

    def writelines(self, list_of_data: Iterable[Any]) -> None:
        for part in list_of_data:
            self.decoder.feed(part)
        self.writes += 1
        self.written.set()

    async def wait_writes(self, count: int) -> None:
        while self.writes < count:
            self.written.clear()
            await asyncio.wait_for(self.written.wait(), TIMEOUT)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("10.0.0.9", 4242) if name == "peername" else default

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.abort()

    def abort(self) -> None:
        if not self.closing:
            self.closing = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def get_write_buffer_size(self) -> int:
        return 0

    def sent(self) -> list[RemotingCommand]:
        return list(self.decoder.commands())


def response_frame(opaque: int, body: bytes) -> bytes:
    return encode_command(RemotingCommand(code=0, opaque=opaque, flag=FLAG_RESPONSE, body=body))


async def test_fake_transport_reverse_order_and_unknown_opaque() -> None:
    conn = Connection()
    transport = FakeTransport(conn)
    conn.connection_made(transport)
    assert conn.peer_address == "10.0.0.9:4242"
    tasks = [
        asyncio.create_task(conn.request(RemotingCommand(code=ECHO), TIMEOUT)) for _ in range(3)
    ]
    await transport.wait_writes(3)
    sent = transport.sent()
    opaques = [cmd.opaque for cmd in sent]
    assert len(set(opaques)) == 3
    assert all(cmd.flag == 0 for cmd in sent)
    with capture_sdk_logs() as logs:
        conn.data_received(b"".join(response_frame(o, str(o).encode()) for o in reversed(opaques)))
        conn.data_received(response_frame(987654, b"stray"))
    results = await asyncio.gather(*tasks)
    assert [r.body for r in results] == [str(o).encode() for o in opaques]
    assert [e["opaque"] for e in logs if e["event"].startswith("dropping")] == [987654]
    await conn.close()


async def test_fake_transport_pause_writing_pauses_reading_and_blocks_senders() -> None:
    conn = Connection()
    transport = FakeTransport(conn)
    conn.connection_made(transport)
    conn.pause_writing()
    assert conn.reading_paused and conn.pause_count == 1 and not transport.reading
    task = asyncio.create_task(conn.send_oneway(RemotingCommand(code=ECHO)))
    _done, pending = await asyncio.wait({task}, timeout=0.05)
    assert pending and transport.sent() == []
    conn.resume_writing()
    await asyncio.wait_for(task, TIMEOUT)
    assert not conn.reading_paused and transport.reading
    assert [c.flag for c in transport.sent()] == [FLAG_ONEWAY]
    await conn.close()
