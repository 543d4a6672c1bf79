"""The transport's fast paths: eager handlers, coalesced writes, the request timer.

Eager codes run their handler inline in the read callback and make a task only when
it suspends; these tests drive every way a handler can end (at once, after waiting,
with an error before or after waiting, cancelled while waiting) through a real
remoting server. Coalescing is checked on a fake transport, where the number of
``writelines`` calls is observable.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest

from rocklet.client.errors import ConnectionClosedError, RequestTimeoutError
from rocklet.protocol import FrameDecoder, RemotingCommand
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.frame import encode_command
from rocklet.transport import ProcessorRegistry, RemotingServer, RequestContext
from rocklet.transport.connection import Connection, HandlerResult
from rocklet.transport.dial import open_connection
from rocklet.transport.flow import FlowLimits

TIMEOUT = 5.0
AT_ONCE = 2000
WAITS = 2001
FAILS_AT_ONCE = 2002
FAILS_AFTER_WAIT = 2003
YIELDS = 2004
NOT_EAGER = 2005
SPINS = 2006


class Env:
    """What the processors share with the test."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()
        self.cleaned_up = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.tasks: list[asyncio.Task[Any] | None] = []


def build_registry(env: Env) -> ProcessorRegistry:
    async def at_once(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        env.tasks.append(asyncio.current_task())
        return cmd.make_response(0, body=b"now:" + cmd.body)

    async def waits(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        env.waiting.set()
        try:
            await env.release.wait()
        finally:
            env.cleaned_up.set()
        return cmd.make_response(0, body=b"later:" + cmd.body)

    async def fails_at_once(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        raise RuntimeError("broken before waiting")

    async def fails_after_wait(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        env.waiting.set()
        await env.release.wait()
        raise RuntimeError("broken after waiting")

    async def yields(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        await asyncio.sleep(0)  # a bare yield: the task must simply step again
        return cmd.make_response(0, body=b"yielded")

    async def spins(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        env.waiting.set()
        try:
            while True:  # noqa: ASYNC110 - never waits on a future: a cancel is thrown in
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            env.cancelled.set()
            raise

    registry = ProcessorRegistry()
    for code, processor in (
        (AT_ONCE, at_once),
        (WAITS, waits),
        (FAILS_AT_ONCE, fails_at_once),
        (FAILS_AFTER_WAIT, fails_after_wait),
        (YIELDS, yields),
        (SPINS, spins),
    ):
        registry.register(code, processor, eager=True)
    registry.register(NOT_EAGER, at_once)
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
        env.release.set()
        await srv.stop(grace_s=TIMEOUT)


@pytest.fixture
async def conn(server: RemotingServer) -> AsyncIterator[Connection]:
    c = await open_connection("127.0.0.1", server.port, coalesce_writes=True)
    try:
        yield c
    finally:
        await c.close()


async def test_eager_handler_answers_without_a_task_and_others_get_one(
    conn: Connection, env: Env
) -> None:
    eager = await conn.request(RemotingCommand(AT_ONCE, body=b"a"), TIMEOUT)
    tasked = await conn.request(RemotingCommand(NOT_EAGER, body=b"b"), TIMEOUT)
    assert (eager.code, eager.body, tasked.body) == (0, b"now:a", b"now:b")
    eager_task, plain_task = env.tasks
    assert plain_task is not None
    if sys.version_info < (3, 12):
        assert eager_task is None  # run inline, in the read callback
    else:
        assert eager_task is not None and eager_task.done()  # an eager task


async def test_suspended_handler_continues_and_does_not_block_the_connection(
    conn: Connection, env: Env
) -> None:
    parked = asyncio.create_task(conn.request(RemotingCommand(WAITS, body=b"w"), TIMEOUT))
    await asyncio.wait_for(env.waiting.wait(), TIMEOUT)
    answers = await asyncio.gather(
        *(conn.request(RemotingCommand(AT_ONCE, body=bytes([65 + i])), TIMEOUT) for i in range(5))
    )
    assert [a.body for a in answers] == [b"now:A", b"now:B", b"now:C", b"now:D", b"now:E"]
    assert not parked.done()
    env.release.set()
    assert (await asyncio.wait_for(parked, TIMEOUT)).body == b"later:w"


@pytest.mark.parametrize("code", [FAILS_AT_ONCE, FAILS_AFTER_WAIT])
async def test_errors_before_or_after_waiting_become_system_error(
    conn: Connection, env: Env, code: int
) -> None:
    env.release.set()
    answer = await conn.request(RemotingCommand(code), TIMEOUT)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark is not None and answer.remark.startswith("RuntimeError: broken")


async def test_bare_yield_in_an_eager_handler(conn: Connection) -> None:
    answer = await conn.request(RemotingCommand(YIELDS), TIMEOUT)
    assert answer.body == b"yielded"


async def test_stop_cancels_a_suspended_eager_handler(
    server: RemotingServer, conn: Connection, env: Env
) -> None:
    parked = asyncio.create_task(conn.request(RemotingCommand(WAITS), TIMEOUT))
    await asyncio.wait_for(env.waiting.wait(), TIMEOUT)
    (served,) = server.connections
    assert served.handlers_in_flight == 1
    await asyncio.wait_for(server.stop(grace_s=0.01), TIMEOUT)
    assert env.cleaned_up.is_set()  # the cancellation reached the processor's finally
    assert served.handlers_in_flight == 0
    with pytest.raises(ConnectionClosedError):
        await asyncio.wait_for(parked, TIMEOUT)


async def test_stop_throws_the_cancellation_into_a_handler_between_steps(
    server: RemotingServer, conn: Connection, env: Env
) -> None:
    parked = asyncio.create_task(conn.request(RemotingCommand(SPINS), TIMEOUT))
    await asyncio.wait_for(env.waiting.wait(), TIMEOUT)
    await asyncio.wait_for(server.stop(grace_s=0.01), TIMEOUT)
    assert env.cancelled.is_set()
    with pytest.raises(ConnectionClosedError):
        await asyncio.wait_for(parked, TIMEOUT)


async def test_request_timer_times_out_and_is_not_left_behind(server: RemotingServer) -> None:
    conn = await open_connection("127.0.0.1", server.port)
    try:
        with pytest.raises(RequestTimeoutError):
            await conn.request(RemotingCommand(WAITS), 0.05)
        assert conn.pending_requests == 0
        # The connection still works; the timed-out request's timer is gone.
        answer = await conn.request(RemotingCommand(AT_ONCE, body=b"x"), TIMEOUT)
        assert answer.body == b"now:x"
    finally:
        await conn.close()


# -- coalescing, on a fake transport --------------------------------------------------


class CountingTransport(asyncio.Transport):
    """Records every writelines call; enough of a transport for a Connection."""

    def __init__(self, protocol: Connection) -> None:
        super().__init__()
        self.protocol = protocol
        self.closing = False
        self.calls: list[int] = []
        self.decoder = FrameDecoder()
        protocol.connection_made(self)

    def writelines(self, list_of_data: Iterable[Any]) -> None:
        parts = list(list_of_data)
        for part in parts:
            self.decoder.feed(part)
        self.calls.append(len(parts))

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

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def echo(_conn: Connection, cmd: RemotingCommand) -> HandlerResult:
    return cmd.make_response(0, body=cmd.body)


async def test_answers_to_one_read_leave_in_one_write() -> None:
    conn = Connection(handler=echo, coalesce_writes=True, eager_codes={AT_ONCE})
    transport = CountingTransport(conn)
    frames = [encode_command(RemotingCommand(AT_ONCE, opaque=i, body=b"%d" % i)) for i in range(20)]
    conn.data_received(b"".join(frames))
    assert transport.calls == []  # nothing yet: the flush runs at the end of this pass
    await asyncio.sleep(0)
    assert transport.calls == [20 * 2]  # one call: header and body of each answer
    answers = list(transport.decoder.commands())
    assert [(a.opaque, a.body) for a in answers] == [(i, b"%d" % i) for i in range(20)]
    await conn.close()


async def test_an_answer_a_read_wakes_leaves_with_that_reads_own_answer() -> None:
    # The broker's case: a send wakes the same client's parked pull, whose answer is
    # made in the next callback; both answers go out in one write, so the client
    # wakes once.
    release = asyncio.Event()

    async def handler(_conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        if cmd.code == WAITS:
            await release.wait()
            return cmd.make_response(0, body=b"woken")
        release.set()
        return cmd.make_response(0, body=b"now")

    conn = Connection(handler=handler, coalesce_writes=True, eager_codes={AT_ONCE, WAITS})
    transport = CountingTransport(conn)
    conn.data_received(encode_command(RemotingCommand(WAITS, opaque=1)))
    for _ in range(3):
        await asyncio.sleep(0)
    assert transport.calls == [] and not release.is_set()  # parked, nothing written
    conn.data_received(encode_command(RemotingCommand(AT_ONCE, opaque=2)))
    for _ in range(3):
        await asyncio.sleep(0)
    assert transport.calls == [2 * 2]  # one call for both answers
    answers = list(transport.decoder.commands())
    assert [(a.opaque, a.body) for a in answers] == [(2, b"now"), (1, b"woken")]
    await conn.close()


def recording_connection(**options: Any) -> tuple[Connection, CountingTransport, list[int]]:
    """A connection whose handler notes each request's opaque as it starts."""
    handled: list[int] = []

    async def handler(_conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        handled.append(cmd.opaque)
        return cmd.make_response(0)

    conn = Connection(handler=handler, eager_codes={AT_ONCE, WAITS}, late_codes={WAITS}, **options)
    return conn, CountingTransport(conn), handled


def frames(codes: Iterable[int]) -> bytes:
    """One request per code, numbered from 0 by opaque, in one buffer."""
    return b"".join(encode_command(RemotingCommand(c, opaque=i)) for i, c in enumerate(codes))


async def test_late_codes_are_handled_after_the_rest_of_their_read() -> None:
    # The broker's pull: a consumer's next pull read together with a producer's send
    # waits until the send is stored, in the order the late requests came.
    conn, transport, handled = recording_connection(coalesce_writes=True)
    conn.data_received(frames([WAITS, AT_ONCE, WAITS, AT_ONCE, NOT_EAGER]))
    await asyncio.sleep(0)
    assert handled == [1, 3, 0, 2, 4]  # the task of the one not eager runs last
    conn.data_received(encode_command(RemotingCommand(WAITS, opaque=5)))  # alone in its read
    await asyncio.sleep(0)
    assert handled[-1] == 5
    await asyncio.sleep(0)
    assert sorted(a.opaque for a in transport.decoder.commands()) == list(range(6))
    await conn.close()


async def test_late_codes_wait_only_for_their_own_turn() -> None:
    # With a budget per turn, a late request goes at the end of the turn it was read
    # in, not after requests a later turn handles.
    conn, _, handled = recording_connection(limits=FlowLimits(requests_per_turn=2))
    conn.data_received(frames([WAITS, AT_ONCE, AT_ONCE]))
    assert handled == [1, 0]
    await asyncio.sleep(0)  # the backlog turn
    assert handled == [1, 0, 2]
    await conn.close()


async def test_writes_outside_a_read_share_one_flush_per_loop_pass() -> None:
    conn = Connection(coalesce_writes=True)
    transport = CountingTransport(conn)
    for _ in range(5):
        await conn.send_oneway(RemotingCommand(AT_ONCE, body=b"x"))
    assert transport.calls == []  # nothing yet: the flush runs at the end of this pass
    await asyncio.sleep(0)
    assert transport.calls == [10]
    await conn.close()


async def test_a_large_answer_is_written_at_once() -> None:
    big = bytes(100 * 1024)

    async def large(_conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        return cmd.make_response(0, body=big)

    conn = Connection(handler=large, coalesce_writes=True, eager_codes={AT_ONCE})
    transport = CountingTransport(conn)
    conn.data_received(
        encode_command(RemotingCommand(AT_ONCE, opaque=1))
        + encode_command(RemotingCommand(AT_ONCE, opaque=2))
    )
    # Past the coalescing limit each answer goes out as it is made.
    assert transport.calls == [2, 2]
    await conn.close()
