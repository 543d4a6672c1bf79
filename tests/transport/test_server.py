"""The remoting server over real sockets: dispatch rules, isolation, flow control, stop."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from rocklet.protocol import (
    FLAG_ONEWAY,
    FrameDecoder,
    MessageFormatError,
    RemotingCommand,
    SerializeType,
)
from rocklet.protocol.frame import encode_command
from rocklet.protocol.headers import Header, wire
from rocklet.transport import ProcessorRegistry, RemotingServer, RequestContext
from rocklet.transport.connection import HandlerResult

ECHO = 1000
PARKED = 1001
ONEWAY = 1002
NEEDS_TOPIC = 1003
BAD_MESSAGE = 1004
BOOM = 1005
BIG = 1006
CHECK_PAUSED = 1007
TIMEOUT = 5.0
BIG_BODY = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class TopicHeader(Header):
    topic: str = wire("topic")


class Env:
    def __init__(self) -> None:
        self.parked = asyncio.Event()
        self.release = asyncio.Event()
        self.oneway: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        self.paused_seen: asyncio.Future[tuple[bool, int]] = (
            asyncio.get_running_loop().create_future()
        )

    def registry(self) -> ProcessorRegistry:
        async def echo(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
            return cmd.make_response(0, body=cmd.body, ext_fields={"echo": "1"})

        async def parked(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
            self.parked.set()
            await self.release.wait()
            return cmd.make_response(0, body=b"parked done")

        async def oneway(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
            await self.oneway.put(cmd)
            return cmd.make_response(0, body=b"never sent")

        async def needs_topic(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
            header = TopicHeader.from_ext_fields(cmd.ext_fields)
            return cmd.make_response(0, remark=header.topic)

        async def bad_message(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
            raise MessageFormatError("the message body is not a stored message")

        async def boom(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
            raise RuntimeError("boom")

        async def big(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
            return cmd.make_response(0, body=bytes(BIG_BODY))

        async def check_paused(ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
            conn = ctx.connection
            if not self.paused_seen.done():
                self.paused_seen.set_result((conn.reading_paused, conn.pause_count))
            return cmd.make_response(0)

        registry = ProcessorRegistry()
        registry.register_all(
            {
                ECHO: echo,
                PARKED: parked,
                ONEWAY: oneway,
                NEEDS_TOPIC: needs_topic,
                BAD_MESSAGE: bad_message,
                BOOM: boom,
                BIG: big,
                CHECK_PAUSED: check_paused,
            }
        )
        return registry


class RawClient:
    """A client on a plain socket, so the test controls every byte."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, port: int, *, rcvbuf: int | None = None) -> RawClient:
        sock = socket.socket()
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        except OSError:
            sock.close()
            raise
        reader, writer = await asyncio.open_connection(sock=sock, limit=2 * BIG_BODY)
        return cls(reader, writer)

    def send(self, *cmds: RemotingCommand) -> None:
        self.writer.write(b"".join(encode_command(c) for c in cmds))

    def send_raw(self, data: bytes) -> None:
        self.writer.write(data)

    async def read(self) -> RemotingCommand:
        async def one() -> RemotingCommand:
            prefix = await self.reader.readexactly(4)
            (length,) = struct.unpack(">i", prefix)
            decoder = FrameDecoder()
            decoder.feed(prefix + await self.reader.readexactly(length))
            cmd = decoder.next_command()
            assert cmd is not None
            return cmd

        return await asyncio.wait_for(one(), TIMEOUT)

    async def at_eof(self) -> bool:
        return await asyncio.wait_for(self.reader.read(1), TIMEOUT) == b""

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    yield Env()


@pytest.fixture
async def server(env: Env) -> AsyncIterator[RemotingServer]:
    srv = RemotingServer("127.0.0.1", 0, env.registry(), name="test")
    await srv.start()
    try:
        yield srv
    finally:
        env.release.set()
        await srv.stop(grace_s=TIMEOUT)


@pytest.fixture
async def client(server: RemotingServer) -> AsyncIterator[RawClient]:
    c = await RawClient.connect(server.port)
    try:
        yield c
    finally:
        await c.close()


async def test_start_binds_a_free_port_and_stop_is_idempotent(env: Env) -> None:
    srv = RemotingServer("127.0.0.1", 0, env.registry())
    assert srv.port == 0
    await srv.start()
    assert srv.port > 0 and srv.is_serving
    with pytest.raises(RuntimeError):
        await srv.start()
    await srv.stop()
    await srv.stop()
    assert not srv.is_serving
    with pytest.raises(OSError):
        await RawClient.connect(srv.port)


async def test_unknown_code_is_answered_with_3_and_java_remark(client: RawClient) -> None:
    client.send(RemotingCommand(code=9999, opaque=7))
    answer = await client.read()
    assert (answer.code, answer.opaque, answer.flag) == (3, 7, 1)
    assert answer.remark == " request type 9999 not supported"


@pytest.mark.parametrize(
    "stype", [SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK]
)
async def test_answer_uses_the_request_serialization(
    client: RawClient, stype: SerializeType
) -> None:
    client.send(RemotingCommand(code=ECHO, opaque=11, body=b"x", serialize_type=stype))
    raw_prefix = await asyncio.wait_for(client.reader.readexactly(8), TIMEOUT)
    total, word = struct.unpack(">ii", raw_prefix)
    assert word >> 24 == stype
    decoder = FrameDecoder()
    decoder.feed(raw_prefix + await client.reader.readexactly(total - 4))
    answer = decoder.next_command()
    assert answer is not None
    assert answer.serialize_type == stype
    assert (answer.code, answer.opaque, answer.flag, answer.body) == (0, 11, 1, b"x")
    assert dict(answer.ext_fields) == {"echo": "1"}
    assert (answer.language, answer.version) == ("JAVA", 401)


async def test_oneway_request_runs_but_is_not_answered(client: RawClient, env: Env) -> None:
    client.send(
        RemotingCommand(code=ONEWAY, opaque=1, flag=FLAG_ONEWAY, body=b"o"),
        RemotingCommand(code=ECHO, opaque=2, body=b"e"),
    )
    first = await client.read()
    assert (first.opaque, first.body) == (2, b"e")
    seen = await asyncio.wait_for(env.oneway.get(), TIMEOUT)
    assert seen.body == b"o"
    # And nothing else follows: the next answer is for the next request.
    client.send(RemotingCommand(code=ECHO, opaque=3))
    assert (await client.read()).opaque == 3


async def test_parked_processor_does_not_block_the_next_request(
    client: RawClient, env: Env
) -> None:
    client.send(RemotingCommand(code=PARKED, opaque=1))
    await asyncio.wait_for(env.parked.wait(), TIMEOUT)
    client.send(RemotingCommand(code=ECHO, opaque=2, body=b"quick"))
    quick = await client.read()
    assert (quick.opaque, quick.body) == (2, b"quick")
    env.release.set()
    slow = await client.read()
    assert (slow.opaque, slow.body) == (1, b"parked done")


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">i", -5),  # negative total length
        struct.pack(">i", 2),  # smaller than the length word itself
        struct.pack(">i", 17 * 1024 * 1024),  # over Java's 16 MiB frame limit
        struct.pack(">ii", 20, 50) + bytes(16),  # header longer than the frame
        struct.pack(">ii", 9, 5) + b"{nope",  # header that is not JSON
    ],
)
async def test_broken_frame_closes_only_that_connection(
    server: RemotingServer, client: RawClient, garbage: bytes
) -> None:
    bad = await RawClient.connect(server.port)
    bad.send_raw(garbage)
    assert await bad.at_eof()
    await bad.close()
    client.send(RemotingCommand(code=ECHO, opaque=5))
    assert (await client.read()).opaque == 5
    assert len(server.connections) == 1


async def test_half_frame_staller_does_not_affect_others(
    server: RemotingServer, client: RawClient
) -> None:
    staller = await RawClient.connect(server.port)
    frame = encode_command(RemotingCommand(code=ECHO, opaque=9, body=b"late"))
    staller.send_raw(frame[:6])
    client.send(RemotingCommand(code=ECHO, opaque=1))
    assert (await client.read()).opaque == 1
    staller.send_raw(frame[6:])
    answer = await staller.read()
    assert (answer.opaque, answer.body) == (9, b"late")
    await staller.close()


async def test_header_error_is_answered_with_system_error_and_the_reason(
    client: RawClient,
) -> None:
    client.send(
        RemotingCommand(code=NEEDS_TOPIC, opaque=1),
        RemotingCommand(code=NEEDS_TOPIC, opaque=2, ext_fields={"topic": "T"}),
    )
    answers = {a.opaque: a for a in [await client.read(), await client.read()]}
    assert (answers[1].code, answers[1].remark) == (1, "the custom field <topic> is null")
    assert (answers[2].code, answers[2].remark) == (0, "T")


async def test_message_format_error_is_answered_with_its_code(client: RawClient) -> None:
    client.send(RemotingCommand(code=BAD_MESSAGE, opaque=1))
    answer = await client.read()
    assert (answer.code, answer.remark) == (13, "the message body is not a stored message")


async def test_processor_exception_is_system_error_and_the_server_lives(
    server: RemotingServer, client: RawClient
) -> None:
    client.send(RemotingCommand(code=BOOM, opaque=1))
    answer = await client.read()
    assert answer.code == 1
    assert answer.remark is not None and "boom" in answer.remark
    client.send(RemotingCommand(code=ECHO, opaque=2))
    assert (await client.read()).code == 0
    other = await RawClient.connect(server.port)
    other.send(RemotingCommand(code=ECHO, opaque=3))
    assert (await other.read()).opaque == 3
    await other.close()


async def test_graceful_stop_lets_in_flight_requests_finish(
    server: RemotingServer, client: RawClient, env: Env
) -> None:
    client.send(RemotingCommand(code=PARKED, opaque=1))
    await asyncio.wait_for(env.parked.wait(), TIMEOUT)
    stop = asyncio.create_task(server.stop(grace_s=TIMEOUT))
    # The stop task's first step (stop accepting, refuse new requests) runs before the
    # loop next polls sockets, so this request is read after it.
    client.send(RemotingCommand(code=ECHO, opaque=2))
    refused = await client.read()
    assert (refused.opaque, refused.code, refused.remark) == (2, 2, "server is shutting down")
    assert not stop.done() and not server.is_serving
    env.release.set()
    finished = await client.read()
    assert (finished.opaque, finished.code, finished.body) == (1, 0, b"parked done")
    await asyncio.wait_for(stop, TIMEOUT)
    assert await client.at_eof()
    assert server.connections == frozenset()


async def test_stop_cancels_requests_still_running_after_the_grace(
    server: RemotingServer, client: RawClient, env: Env
) -> None:
    client.send(RemotingCommand(code=PARKED, opaque=1))
    await asyncio.wait_for(env.parked.wait(), TIMEOUT)
    await asyncio.wait_for(server.stop(grace_s=0.01), TIMEOUT)
    assert await client.at_eof()


async def test_slow_reader_makes_the_server_pause_reading(server: RemotingServer, env: Env) -> None:
    slow = await RawClient.connect(server.port, rcvbuf=4096)
    bigs = [RemotingCommand(code=BIG, opaque=i) for i in range(3)]
    slow.send(*bigs, RemotingCommand(code=CHECK_PAUSED, opaque=99))
    paused, pause_count = await asyncio.wait_for(env.paused_seen, TIMEOUT)
    assert paused and pause_count >= 1
    (conn,) = server.connections
    assert conn.reading_paused and conn.write_buffer_size > 0
    # Reading everything drains the buffer and the server reads again.
    sock = slow.writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024 * 1024)  # drain faster
    answers = [await slow.read() for _ in range(4)]
    assert [a.opaque for a in answers] == [0, 1, 2, 99]
    assert all(len(a.body) == BIG_BODY for a in answers[:3])
    slow.send(RemotingCommand(code=ECHO, opaque=100))
    assert (await slow.read()).opaque == 100
    assert not conn.reading_paused and conn.pause_count >= 1
    await slow.close()
