"""Flow control of a remoting server: in-flight cap, turns per read, shedding, parking."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from rocklet.protocol import RemotingCommand
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.frame import encode_command
from rocklet.transport import ProcessorRegistry, RemotingServer, RequestContext
from rocklet.transport.connection import Connection, HandlerResult
from rocklet.transport.flow import OVERLOAD_REMARK, FlowLimits, ServerLoad
from tests.transport.test_connection import FakeTransport
from tests.transport.test_server import RawClient

ECHO = 1000
HOLD = 1001  # works until released: counts as in flight
PARK = 1002  # waits in Connection.parked(): does not count
TIMEOUT = 5.0


class Env:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.arrived = 0
        self.changed = asyncio.Event()

    def _arrive(self) -> None:
        self.arrived += 1
        self.changed.set()

    async def wait_arrived(self, count: int) -> None:
        async with asyncio.timeout(TIMEOUT):
            while self.arrived < count:
                self.changed.clear()
                await self.changed.wait()

    def registry(self) -> ProcessorRegistry:
        async def echo(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
            return cmd.make_response(0, body=cmd.body)

        async def hold(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
            self._arrive()
            await self.release.wait()
            return cmd.make_response(0, body=b"held")

        async def park(ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
            with ctx.connection.parked():
                self._arrive()
                await self.release.wait()
            return cmd.make_response(0, body=b"parked")

        registry = ProcessorRegistry()
        registry.register_all({ECHO: echo, HOLD: hold})
        # Eager, as the broker's pulls: it parks before it has a task.
        registry.register(PARK, park, eager=True)
        return registry


@pytest.fixture
async def env() -> Env:
    return Env()


async def serve(env: Env, limits: FlowLimits) -> AsyncIterator[RemotingServer]:
    server = RemotingServer("127.0.0.1", 0, env.registry(), limits=limits)
    await server.start()
    try:
        yield server
    finally:
        env.release.set()
        await server.stop(grace_s=TIMEOUT)


async def round_trip(port: int) -> None:
    """One answer on another connection: the server's loop has gone round meanwhile."""
    other = await RawClient.connect(port)
    other.send(RemotingCommand(code=ECHO, opaque=7, body=b"x"))
    assert (await other.read()).body == b"x"
    await other.close()


async def test_a_connection_stops_reading_at_its_in_flight_limit(env: Env) -> None:
    limits = FlowLimits(max_in_flight_per_connection=4, requests_per_turn=2)
    async for server in serve(env, limits):
        client = await RawClient.connect(server.port)
        client.send(*(RemotingCommand(code=HOLD, opaque=i) for i in range(10)))
        client.send(RemotingCommand(code=ECHO, opaque=10, body=b"last"))
        await env.wait_arrived(4)
        await round_trip(server.port)  # the loop had every chance to read on
        (conn,) = [c for c in server.connections if c.handlers_in_flight]
        assert env.arrived == 4 and conn.handlers_in_flight == 4
        assert conn.reading_paused and conn.busy_count == 1
        assert server.load.in_flight == 4
        env.release.set()
        answers = [await client.read() for _ in range(11)]
        # Nothing refused, nothing lost, answered in order of arrival.
        assert [a.opaque for a in answers] == list(range(11))
        assert all(a.code == ResponseCode.SUCCESS for a in answers)
        assert not conn.reading_paused and server.load.in_flight == 0
        await client.close()


async def test_parked_requests_do_not_count_against_the_limit(env: Env) -> None:
    limits = FlowLimits(max_in_flight_per_connection=2, requests_per_turn=2)
    async for server in serve(env, limits):
        client = await RawClient.connect(server.port)
        client.send(*(RemotingCommand(code=PARK, opaque=i) for i in range(6)))
        client.send(RemotingCommand(code=ECHO, opaque=6, body=b"through"))
        answer = await client.read()  # answered while six requests are parked
        assert (answer.opaque, answer.body) == (6, b"through")
        await env.wait_arrived(6)
        (conn,) = [c for c in server.connections if c.handlers_in_flight]
        assert conn.parked_handlers == 6 and conn.busy_count == 0
        assert server.load.in_flight == 0
        env.release.set()
        assert sorted([(await client.read()).opaque for _ in range(6)]) == list(range(6))
        await client.close()


async def test_the_server_sheds_a_code_over_its_limit_with_system_busy(env: Env) -> None:
    limits = FlowLimits(shed_limits={HOLD: 2})
    async for server in serve(env, limits):
        first = await RawClient.connect(server.port)
        first.send(*(RemotingCommand(code=HOLD, opaque=i) for i in range(2)))
        await env.wait_arrived(2)
        second = await RawClient.connect(server.port)
        second.send(RemotingCommand(code=HOLD, opaque=5), RemotingCommand(code=ECHO, opaque=6))
        busy, echoed = await second.read(), await second.read()
        assert (busy.opaque, busy.code, busy.remark) == (
            5,
            ResponseCode.SYSTEM_BUSY,
            OVERLOAD_REMARK,
        )
        assert (echoed.opaque, echoed.code) == (6, ResponseCode.SUCCESS)  # no limit for ECHO
        assert server.load.shed_count == 1 and env.arrived == 2
        env.release.set()
        assert sorted([(await first.read()).opaque for _ in range(2)]) == [0, 1]
        second.send(RemotingCommand(code=HOLD, opaque=8))  # under the limit again
        assert (await second.read()).code == ResponseCode.SUCCESS
        await first.close()
        await second.close()


async def test_one_read_is_handled_in_turns_and_reading_waits_for_the_last() -> None:
    handled: list[int] = []
    done = asyncio.Event()

    async def handler(_conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        handled.append(cmd.opaque)
        if len(handled) == 7:
            done.set()
        return None

    conn = Connection(
        handler=handler,
        eager_codes=frozenset({ECHO}),
        limits=FlowLimits(requests_per_turn=3),
    )
    transport: Any = FakeTransport(conn)
    conn.connection_made(transport)
    conn.data_received(b"".join(encode_command(RemotingCommand(ECHO, i)) for i in range(7)))
    # One turn ran inside the read callback; the rest waits, and so does the socket.
    assert handled == [0, 1, 2] and not transport.reading
    await asyncio.wait_for(done.wait(), TIMEOUT)
    assert handled == list(range(7)) and transport.reading
    await conn.close()


def test_flow_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        FlowLimits(max_in_flight_per_connection=-1)
    with pytest.raises(ValueError, match=">= 1"):
        FlowLimits(shed_limits={10: 0})
    assert ServerLoad(FlowLimits()).shed_at > 10**9  # nothing shed without limits
