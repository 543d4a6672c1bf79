"""Deferred answers: a processor answers later from a callback, without a task.

A real remoting server on loopback; the test holds the deferred answers and gives
them when it wants, as the broker's wait FIFOs do.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from rocklet.protocol import RemotingCommand
from rocklet.protocol.codes import ResponseCode
from rocklet.transport import ProcessorRegistry, RemotingServer, RequestContext
from rocklet.transport.connection import Connection, HandlerResult
from rocklet.transport.deferred import Deferred
from rocklet.transport.dial import open_connection
from rocklet.transport.errors import ConnectionClosedError

TIMEOUT = 5.0
LATER = 2100


class Held:
    """The deferred answers the processor handed out, and what the observer saw."""

    def __init__(self) -> None:
        self.answers: list[Deferred] = []
        self.arrived = asyncio.Event()
        self.tasks: list[asyncio.Task[object] | None] = []
        self.observed: list[tuple[int, int | None]] = []

    def give(self, index: int, body: bytes) -> None:
        deferred = self.answers[index]
        deferred.answer(deferred.request.make_response(0, body=body))


@pytest.fixture
def held() -> Held:
    return Held()


@pytest.fixture
async def server(held: Held) -> AsyncIterator[RemotingServer]:
    registry = ProcessorRegistry()

    async def later(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        held.tasks.append(asyncio.current_task())
        deferred = Deferred(cmd)
        held.answers.append(deferred)
        held.arrived.set()
        return deferred

    registry.register(LATER, later, eager=True)
    registry.observer = lambda code, answer, _s: held.observed.append((code, answer))
    srv = RemotingServer("127.0.0.1", 0, registry)
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop(grace_s=0.05)


@pytest.fixture
async def conn(server: RemotingServer) -> AsyncIterator[Connection]:
    c = await open_connection("127.0.0.1", server.port)
    try:
        yield c
    finally:
        await c.close()


async def _held_count(held: Held, n: int) -> None:
    while len(held.answers) < n:
        held.arrived.clear()
        await asyncio.wait_for(held.arrived.wait(), TIMEOUT)


async def test_answers_are_written_when_given_and_counted_until_then(
    server: RemotingServer, conn: Connection, held: Held
) -> None:
    first = asyncio.ensure_future(conn.request(RemotingCommand(LATER, body=b"1"), TIMEOUT))
    second = asyncio.ensure_future(conn.request(RemotingCommand(LATER, body=b"2"), TIMEOUT))
    await _held_count(held, 2)
    # Ran inline: no task on 3.11; on 3.12+ an eager task that finished on its first
    # step (returning the Deferred), so none is left running while the answer waits.
    assert len(held.tasks) == 2
    assert all(task is None or task.done() for task in held.tasks), held.tasks
    (served,) = server.connections
    assert served.handlers_in_flight == 2
    assert held.observed == []  # observed when answered, not when deferred
    held.give(1, b"two")
    assert (await asyncio.wait_for(second, TIMEOUT)).body == b"two"
    assert not first.done() and served.handlers_in_flight == 1
    held.give(0, b"one")
    held.give(0, b"again")  # only the first answer counts
    assert (await asyncio.wait_for(first, TIMEOUT)).body == b"one"
    assert served.handlers_in_flight == 0
    assert held.observed == [(LATER, 0), (LATER, 0)]


async def test_an_answer_for_a_closed_connection_is_dropped(
    server: RemotingServer, conn: Connection, held: Held
) -> None:
    pending = asyncio.ensure_future(conn.request(RemotingCommand(LATER), TIMEOUT))
    await _held_count(held, 1)
    (served,) = server.connections
    await conn.close()
    with pytest.raises(ConnectionClosedError):
        await asyncio.wait_for(pending, TIMEOUT)
    await asyncio.wait_for(served.wait_closed(), TIMEOUT)
    held.give(0, b"too late")  # nothing to write to, and no error
    assert served.handlers_in_flight == 0


async def test_a_graceful_stop_waits_for_deferred_answers(
    server: RemotingServer, conn: Connection, held: Held
) -> None:
    pending = asyncio.ensure_future(conn.request(RemotingCommand(LATER), TIMEOUT))
    await _held_count(held, 1)
    stopping = asyncio.ensure_future(server.stop(grace_s=TIMEOUT))
    # The stop turns new requests away before it waits: a request answered busy says
    # it got that far.
    busy = await conn.request(RemotingCommand(LATER), TIMEOUT)
    assert busy.code == ResponseCode.SYSTEM_BUSY
    assert not stopping.done()  # waiting for the answer in flight
    held.give(0, b"in time")
    assert (await asyncio.wait_for(pending, TIMEOUT)).body == b"in time"
    await asyncio.wait_for(stopping, TIMEOUT)
