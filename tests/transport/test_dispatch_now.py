"""Synchronous processor twins (``register(..., now=...)``) through a real server.

A code with a ``now`` twin is answered by it without any coroutine; the twin hands a
request to the asynchronous processor by returning LATER. Either way the gate, the
observer and the mapping of errors to answers behave as for any other processor.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from rocklet.protocol import RemotingCommand
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.errors import ProtocolError
from rocklet.transport import ProcessorRegistry, RemotingServer, RequestContext
from rocklet.transport.connection import Connection, HandlerResult
from rocklet.transport.deferred import Deferred
from rocklet.transport.dial import open_connection
from rocklet.transport.types import LATER, Later

TIMEOUT = 5.0
ANSWERS = 3000
HANDS_OVER = 3001
REFUSES = 3002
BREAKS = 3003
DEFERS = 3004
GATED = 3005


class Env:
    """What the processors record for the test."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.observed: list[tuple[int, int | None]] = []
        self.deferred: list[Deferred] = []
        self.deferring = asyncio.Event()


def build_registry(env: Env) -> ProcessorRegistry:
    def now(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult | Later:
        env.calls.append(("now", cmd.code))
        if cmd.code == HANDS_OVER:
            return LATER
        if cmd.code == REFUSES:
            raise ProtocolError("bad header", response_code=ResponseCode.MESSAGE_ILLEGAL)
        if cmd.code == BREAKS:
            raise RuntimeError("broken")
        if cmd.code == DEFERS:
            deferred = Deferred(cmd)
            env.deferred.append(deferred)
            env.deferring.set()
            return deferred
        # The twin runs in the read callback: no task is current.
        body = b"inline" if asyncio.current_task() is None else b"in a task"
        return cmd.make_response(0, body=body)

    async def later(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        env.calls.append(("async", cmd.code))
        await asyncio.sleep(0)
        return cmd.make_response(0, body=b"async")

    registry = ProcessorRegistry()
    for code in (ANSWERS, HANDS_OVER, REFUSES, BREAKS, DEFERS, GATED):
        registry.register(code, later, now=now)
    registry.gate = lambda _conn, cmd: (
        cmd.make_response(ResponseCode.NO_PERMISSION, remark="gated") if cmd.code == GATED else None
    )
    registry.observer = lambda code, answered, _s: env.observed.append((code, answered))
    return registry


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    yield Env()


@pytest.fixture
async def conn(env: Env) -> AsyncIterator[Connection]:
    srv = RemotingServer("127.0.0.1", 0, build_registry(env))
    await srv.start()
    c = await open_connection("127.0.0.1", srv.port)
    try:
        yield c
    finally:
        await c.close()
        await srv.stop(grace_s=TIMEOUT)


async def test_the_twin_answers_inline_and_the_processor_is_not_run(
    conn: Connection, env: Env
) -> None:
    answer = await conn.request(RemotingCommand(ANSWERS), TIMEOUT)
    assert (answer.code, answer.body) == (0, b"inline")
    assert env.calls == [("now", ANSWERS)]
    assert env.observed == [(ANSWERS, 0)]


async def test_later_hands_the_request_to_the_processor_observed_once(
    conn: Connection, env: Env
) -> None:
    answer = await conn.request(RemotingCommand(HANDS_OVER), TIMEOUT)
    assert answer.body == b"async"
    assert env.calls == [("now", HANDS_OVER), ("async", HANDS_OVER)]
    assert env.observed == [(HANDS_OVER, 0)]


async def test_errors_in_the_twin_are_answered_as_java_does(conn: Connection, env: Env) -> None:
    refused = await conn.request(RemotingCommand(REFUSES), TIMEOUT)
    broken = await conn.request(RemotingCommand(BREAKS), TIMEOUT)
    assert (refused.code, refused.remark) == (ResponseCode.MESSAGE_ILLEGAL, "bad header")
    assert (broken.code, broken.remark) == (ResponseCode.SYSTEM_ERROR, "RuntimeError: broken")
    assert conn.is_open  # the connection survives both
    assert env.observed == [
        (REFUSES, ResponseCode.MESSAGE_ILLEGAL),
        (BREAKS, ResponseCode.SYSTEM_ERROR),
    ]


async def test_the_gate_refuses_before_the_twin(conn: Connection, env: Env) -> None:
    answer = await conn.request(RemotingCommand(GATED), TIMEOUT)
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "gated")
    assert env.calls == []
    assert env.observed == [(GATED, ResponseCode.NO_PERMISSION)]


async def test_a_deferred_answer_from_the_twin_is_written_when_given(
    conn: Connection, env: Env
) -> None:
    pending = asyncio.ensure_future(conn.request(RemotingCommand(DEFERS), TIMEOUT))
    await asyncio.wait_for(env.deferring.wait(), TIMEOUT)
    assert not pending.done() and env.observed == []
    (deferred,) = env.deferred
    deferred.answer(deferred.request.make_response(0, body=b"given"))
    answer = await pending
    assert answer.body == b"given"
    assert env.observed == [(DEFERS, 0)]
