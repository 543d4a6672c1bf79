"""Requests a connection's peer sends: run each handler, count them, push back.

Split from :mod:`rocklet.transport.connection`, which owns the socket, the frames and
the requests *we* send; this module owns the requests the *peer* sends, from the
moment a frame is decoded to the moment its answer is written:

- each request runs its handler in its own owned task, so a held long-poll pull never
  blocks the next request on the same connection; for ``eager_codes`` (the broker's
  sends and pulls) a synchronous handler answers first if there is one (no coroutine
  at all), else the handler runs inline and gets a task only if it suspends
  (:mod:`rocklet.transport.eager_start`); one answered inline costs no accounting;
- handlers in flight are counted per connection and server-wide
  (:mod:`rocklet.transport.flow`): at the connection's cap the owner is asked to stop
  reading, and to read again once half are done; over the server's limit a request is
  answered SYSTEM_BUSY without running;
- a handler that waits on purpose (a long-polling pull) parks (:meth:`InboundRequests.parked`)
  and then counts towards neither limit;
- a handler may return a :class:`~rocklet.transport.deferred.Deferred` (a send waiting
  for the disk or a slave): it counts in flight, like a task, until answered, and its
  answer is written then unless the connection closed meanwhile;
- during a graceful stop every new request is refused with a fixed answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Container, Sequence
from typing import TYPE_CHECKING

from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.command import FLAG_ONEWAY, RemotingCommand
from rocklet.transport.deferred import Deferred
from rocklet.transport.eager_start import start_eagerly
from rocklet.transport.flow import NO_LIMIT, FlowLimits, ServerLoad
from rocklet.transport.logs import get_logger
from rocklet.transport.types import (
    LATER,
    Buffer,
    HandlerResult,
    NowHandler,
    Reply,
    RequestHandler,
)

if TYPE_CHECKING:
    from rocklet.transport.connection import Connection

__all__ = ["InboundRequests", "Parked"]

_log = get_logger(__name__)

#: Writes one frame on the connection (``Connection._write``).
Write = Callable[[RemotingCommand, Sequence[Buffer]], None]


class InboundRequests:
    """The peer's requests on one connection. Event loop only.

    Args:
        owner: The connection (for its state and peer address in logs).
        handler: Handles each request; ``None`` answers REQUEST_CODE_NOT_SUPPORTED.
        eager_codes: Request codes whose handler starts inline (a live container).
        limits: Per-connection limits.
        load: The server-wide count this adds to and sheds by; ``None``: none.
        write: Writes an answer.
        pause: Stops reading the socket (too many requests in flight).
        resume: Lets the socket be read again.
        handle_now: Answers an eager code's request without suspending, or returns
            :data:`~rocklet.transport.types.LATER` for ``handler``; it never raises.
    """

    def __init__(
        self,
        owner: Connection,
        handler: RequestHandler | None,
        eager_codes: Container[int],
        limits: FlowLimits,
        load: ServerLoad | None,
        *,
        write: Write,
        pause: Callable[[], None],
        resume: Callable[[], None],
        handle_now: NowHandler | None = None,
    ) -> None:
        self._owner = owner
        self._handle_now = handle_now
        self._handler = handler
        self._eager_codes = eager_codes
        self._load = load
        self._write = write
        self._pause = pause
        self._resume = resume
        self._loop = asyncio.get_running_loop()
        self._max_in_flight = limits.max_in_flight_per_connection or NO_LIMIT
        # Hysteresis: read again once half the cap is done, not after every answer.
        self._resume_below = max(1, self._max_in_flight // 2)
        self._refusal: tuple[int, str] | None = None
        self._busy = False
        #: Handler tasks (only those that suspended).
        self.tasks: set[asyncio.Task[None]] = set()
        #: Answers a handler deferred (:class:`Deferred`) and not given yet; they count
        #: as in flight like tasks.
        self.deferred: set[Deferred] = set()
        #: Of those, parked on purpose.
        self.parked_count = 0
        #: Times reading was paused for too many requests in flight (a metric).
        self.busy_count = 0

    def refuse(self, code: int, remark: str) -> None:
        """Answer every request from now on with ``code`` instead of handling it."""
        self._refusal = (code, remark)

    def parked(self) -> Parked:
        """Context manager a handler waits in when its wait is the point, not work."""
        return Parked(self)

    def on_request(self, cmd: RemotingCommand) -> None:
        """Start handling a request just decoded."""
        if self._refusal is not None:
            if not cmd.is_oneway:
                code, remark = self._refusal
                self._write(cmd.make_response(code, remark=remark), ())
            return
        load = self._load
        if load is not None and load.in_flight >= load.shed_at:
            busy = load.shed(cmd)
            if busy is not None:
                if not cmd.is_oneway:  # Java answers no oneway request, busy or not
                    self._write(busy, ())
                return
        if cmd.code in self._eager_codes:
            if self._handle_now is not None:
                result = self._handle_now(self._owner, cmd)
                if result is not LATER:
                    self._deliver(cmd, result)
                    return
            task = start_eagerly(self._handle(cmd), self._loop)
            if task is not None:
                self._track(task)
        else:
            self._track(self._loop.create_task(self._handle(cmd)))

    def cancel_all(self, *, keep: asyncio.Task[object] | None = None) -> list[asyncio.Task[None]]:
        """Cancel every handler but ``keep``; return those cancelled."""
        tasks = [t for t in self.tasks if t is not keep]
        for task in tasks:
            task.cancel()
        return tasks

    # -- accounting ---------------------------------------------------------------

    def _track(self, task: asyncio.Task[None]) -> None:
        tasks = self.tasks
        tasks.add(task)
        task.add_done_callback(self._untrack)
        if self._load is not None:
            self._load.in_flight += 1
        if self.in_flight >= self._max_in_flight:
            self._too_busy()

    def _untrack(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if self._load is not None:
            self._load.in_flight -= 1
        self._maybe_resume()

    @property
    def in_flight(self) -> int:
        """Requests counted against the connection's cap (parked ones are not)."""
        return len(self.tasks) + len(self.deferred) - self.parked_count

    def _defer(self, cmd: RemotingCommand, deferred: Deferred) -> None:
        """Count a deferred answer in flight until it is given, then write it."""
        pending = self.deferred
        pending.add(deferred)
        if self._load is not None:
            self._load.in_flight += 1
        if self.in_flight >= self._max_in_flight:
            self._too_busy()

        def given(result: RemotingCommand | Reply) -> None:
            pending.discard(deferred)
            if self._load is not None:
                self._load.in_flight -= 1
            self._maybe_resume()
            # A connection closed while its request waited gets nothing (the answer
            # is dropped, as a cancelled task's would be).
            if cmd.is_oneway or not self._owner.is_open:
                return
            if isinstance(result, Reply):
                self._write(result.command, result.extra_body)
            else:
                self._write(result, ())

        deferred.add_sink(given)

    def _maybe_resume(self) -> None:
        if self._busy and self.in_flight < self._resume_below:
            self._busy = False
            self._resume()

    def _too_busy(self) -> None:
        if not self._busy:
            self._busy = True
            self.busy_count += 1
            _log.debug(
                "reading paused: too many requests in flight",
                peer=self._owner.peer_address,
                in_flight=self.in_flight,
            )
            self._pause()

    async def _handle(self, cmd: RemotingCommand) -> None:
        owner = self._owner
        result: HandlerResult
        try:
            if self._handler is None:
                result = cmd.make_response(
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                    remark=f" request type {cmd.code} not supported",
                )
            else:
                result = await self._handler(owner, cmd)
        except Exception as exc:
            _log.exception("request handler failed", peer=owner.peer_address, code=cmd.code)
            result = cmd.make_response(
                ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}"
            )
        self._deliver(cmd, result)

    def _deliver(self, cmd: RemotingCommand, result: HandlerResult) -> None:
        """Write a handler's answer, or count a deferred one until it is given."""
        if isinstance(result, Deferred):
            self._defer(cmd, result)
            return
        # Java never answers a request marked oneway with a processor response (§1.4).
        # (cmd.is_oneway, without the property call: every answer passes here.)
        if result is None or cmd.flag & FLAG_ONEWAY or not self._owner.is_open:
            return
        if isinstance(result, Reply):
            self._write(result.command, result.extra_body)
        else:
            self._write(result, ())


class Parked:
    """What :meth:`InboundRequests.parked` returns: takes a handler out of the counts."""

    __slots__ = ("_inbound",)

    def __init__(self, inbound: InboundRequests) -> None:
        self._inbound = inbound

    def __enter__(self) -> None:
        inbound = self._inbound
        inbound.parked_count += 1
        if inbound._load is not None:
            inbound._load.in_flight -= 1
        inbound._maybe_resume()

    def __exit__(self, *exc_info: object) -> None:
        inbound = self._inbound
        inbound.parked_count -= 1
        if inbound._load is not None:
            inbound._load.in_flight += 1
        if inbound.in_flight >= inbound._max_in_flight:
            inbound._too_busy()
