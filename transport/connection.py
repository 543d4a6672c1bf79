"""The one asyncio transport for remoting connections, both outgoing and accepted.

A :class:`Connection` is an asyncio protocol around the sans-IO
:class:`~rocklet.protocol.frame.FrameDecoder`, read as a ``BufferedProtocol``: the
socket writes straight into the decoder's buffer (a scratch buffer shared by the
thread's connections when nothing is pending), with no bytes object per read. It is used
by the SDK (connections to name servers and brokers), by the broker for its own outgoing
requests (registration with name servers, broker-to-client requests such as
NOTIFY_CONSUMER_IDS_CHANGED) and by the remoting server for every accepted socket.

What it does, and why:

- Correlation lives in the connection, not in the command: it allocates opaques and
  keeps ``opaque -> Future``; answers may come in any order, and each request has its
  own timeout that removes its entry (:mod:`rocklet.transport.outbound`).
- Requests coming *from* the peer go to a handler, each in its own owned task, so a
  held long-poll pull never blocks the next request on the same connection (Java runs
  each request on an executor for the same reason); their tasks, counts and refusals
  live in :mod:`rocklet.transport.inbound`.
- Writes can be coalesced (``coalesce_writes``): every frame written while one read is
  decoded, or during one event-loop pass, leaves in one ``writelines`` at the end of
  the pass (so the answer to a send and that of the pull it woke leave together). One
  send syscall per answer was the largest single cost of a pipelining broker (it wakes
  the peer, which preempts us inside the syscall on a small machine).
- Flow control: when the transport's write buffer passes its high-water mark we stop
  reading that connection until it drains, so a client that never reads cannot make
  us buffer responses without bound. A server's connections also stop reading while
  too many of their requests are being handled, handle a bounded number of requests
  per read callback (the rest of a big pipelined read waits for the next event-loop
  pass, so other sockets are served in between) and answer SYSTEM_BUSY when the whole
  server is over a limit (:mod:`rocklet.transport.flow`).
- A broken frame closes only this connection: after a bad length there is no frame
  boundary left to trust (Java's ``NettyDecoder`` closes the channel too).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Container, Sequence
from typing import Final, cast

from rocklet.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from rocklet.protocol.errors import FrameError
from rocklet.protocol.frame import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameDecoder,
    encode_command_into,
    encode_command_parts,
)
from rocklet.transport.errors import ConnectionClosedError, RequestTimeoutError
from rocklet.transport.flow import (
    NO_LIMIT,
    UNLIMITED,
    FlowLimits,
    ServerLoad,
    writelines_pause_check,
)
from rocklet.transport.inbound import InboundRequests, Parked
from rocklet.transport.log_limit import LimitedWarnings
from rocklet.transport.logs import get_logger
from rocklet.transport.outbound import OutboundRequests
from rocklet.transport.read_scratch import thread_scratch
from rocklet.transport.types import (
    Buffer,
    CloseCallback,
    ConnectionStatus,
    HandlerResult,
    NowHandler,
    Reply,
    RequestHandler,
)

__all__ = [
    "Buffer",
    "Connection",
    "ConnectionStatus",
    "HandlerResult",
    "Reply",
    "RequestHandler",
]

_log = get_logger(__name__)
#: Any client can send garbage on connection after connection: a few lines a minute.
_BROKEN_FRAMES = LimitedWarnings(_log, "connections closed for broken frames without a log line")


#: How long close() lets queued bytes drain before it aborts the socket.
DEFAULT_LINGER_S: Final = 1.0
#: A coalescing connection writes at once when this many bytes wait (the transport's
#: default high-water mark): a big answer is not held back, and flow control sees the
#: bytes as early as without coalescing.
_COALESCE_LIMIT: Final = 64 * 1024
#: Why reading is paused (bits of ``Connection._holds``): the peer does not read our
#: writes, or too many of its requests are being handled.
_HOLD_WRITE: Final = 1
_HOLD_BUSY: Final = 2


class Connection(asyncio.BufferedProtocol):
    """One remoting connection: send requests, answer the peer's requests.

    Create one with :func:`open_connection`, or let the remoting server create one per
    accepted socket. All methods must be called from the event loop's thread.

    Args:
        handler: Handles requests the peer sends; ``None`` answers each with
            REQUEST_CODE_NOT_SUPPORTED.
        max_frame_size: Largest accepted frame (Java's 16 MiB by default).
        high_water: Write-buffer size, in bytes, above which reading pauses (the
            transport's default, 64 KiB, when ``None``).
        linger_s: How long :meth:`close` waits for queued bytes to be sent.
        coalesce_writes: Gather the frames written while one read is decoded or
            during one event-loop iteration into one ``writelines`` call (many
            pipelined requests or answers then cost one send syscall, not one each).
        eager_codes: Request codes whose handler starts inline, in the read callback,
            and gets a task only if it suspends. Such handlers must not need
            :func:`asyncio.current_task` (nor :func:`asyncio.timeout`) before their
            first ``await`` that really waits. A live container: codes added later
            count.
        late_codes: Request codes handled after the other requests of the same read
            (in the order they came). For requests that usually wait anyway, such as
            a long-polling pull that finds nothing: a send that came in the same read
            is then stored and answered first instead of queueing behind it, and a
            pull for the queue it wrote finds the message at once. Requests on one
            connection are independent (answers match by opaque), so any order is
            valid; only these codes move, and only later. A live container.
        limits: Work taken in before pushing back (a server's connections; the
            default sets no limit).
        load: The server-wide count of handlers in flight this connection adds to,
            and where over-limit requests are shed; ``None``: none.
        handle_now: Tried first for ``eager_codes``: answers a request without
            suspending, or returns :data:`~rocklet.transport.types.LATER` for
            ``handler`` to take it (no coroutine at all for the usual send or pull).
    """

    def __init__(
        self,
        *,
        handler: RequestHandler | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        high_water: int | None = None,
        linger_s: float = DEFAULT_LINGER_S,
        coalesce_writes: bool = False,
        eager_codes: Container[int] = frozenset(),
        late_codes: Container[int] = frozenset(),
        limits: FlowLimits = UNLIMITED,
        load: ServerLoad | None = None,
        handle_now: NowHandler | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._coalesce = coalesce_writes
        self._outbox: list[Buffer] = []
        self._outbox_bytes = 0
        self._flush_at = _COALESCE_LIMIT if high_water is None else min(high_water, _COALESCE_LIMIT)
        self._flush_scheduled = False
        self._receiving = False
        self._decoder = FrameDecoder(max_frame_size=max_frame_size, scratch=thread_scratch())
        self._high_water = high_water
        self._linger_s = linger_s
        self._transport: asyncio.Transport | None = None
        self._status = ConnectionStatus.CONNECTING
        self._peer: tuple[str, int] | None = None
        self._requests = OutboundRequests(self._loop, self._closed_error, lambda: self.peer_address)
        self._close_cause: BaseException | None = None
        self._lost: asyncio.Future[None] = self._loop.create_future()
        self._writable = asyncio.Event()
        self._writable.set()
        self._recheck_pause: Callable[[], None] | None = None
        self._pause_count = 0
        # Flow control (rocklet.transport.flow). Reading is on iff no hold bit is set
        # and no backlog turn is scheduled; _reading mirrors what the transport does.
        self._holds = 0
        self._backlog = False
        self._reading = True
        self._requests_per_turn = limits.requests_per_turn or NO_LIMIT
        self._late_codes = late_codes
        self._inbound = InboundRequests(
            self,
            handler,
            eager_codes,
            limits,
            load,
            write=self._write,
            pause=self._hold_busy,
            resume=self._release_busy,
            handle_now=handle_now,
        )
        self._hung_up_unanswered = False
        self._close_callbacks: list[CloseCallback] = []
        #: Free slot for whoever owns the connection (the broker keeps client ids here).
        self.attributes: dict[str, object] = {}

    # -- public state -------------------------------------------------------------

    @property
    def status(self) -> ConnectionStatus:
        """Where the connection is in its lifecycle."""
        return self._status

    @property
    def is_open(self) -> bool:
        """Whether requests can be sent."""
        return self._status is ConnectionStatus.OPEN

    @property
    def peer(self) -> tuple[str, int] | None:
        """The other side's ``(host, port)``, once connected."""
        return self._peer

    @property
    def peer_address(self) -> str | None:
        """The other side as ``"host:port"``, once connected."""
        return None if self._peer is None else f"{self._peer[0]}:{self._peer[1]}"

    @property
    def transport(self) -> asyncio.Transport | None:
        """The socket's transport, once connected."""
        return self._transport

    @property
    def pending_requests(self) -> int:
        """Requests sent and still waiting for their answer."""
        return len(self._requests)

    @property
    def handlers_in_flight(self) -> int:
        """Requests from the peer being handled (in a task, parked or not, or deferred)."""
        return len(self._inbound.tasks) + len(self._inbound.deferred)

    @property
    def parked_handlers(self) -> int:
        """Requests from the peer parked on purpose (:meth:`parked`), e.g. held pulls."""
        return self._inbound.parked_count

    @property
    def busy_count(self) -> int:
        """How many times reading was paused for too many requests in flight (a metric)."""
        return self._inbound.busy_count

    @property
    def reading_paused(self) -> bool:
        """Whether the socket is not being read (flow control: see :class:`Connection`).

        The peer is not taking our writes, too many of its requests are being handled,
        or frames already read wait for their turn. Asks the transport itself, so it
        reports what really happens on the socket.
        """
        transport = self._transport
        if transport is None or transport.is_closing():
            return False
        return not transport.is_reading()

    @property
    def pause_count(self) -> int:
        """How many times reading was paused because the peer did not read (a metric)."""
        return self._pause_count

    @property
    def write_buffer_size(self) -> int:
        """Bytes queued in the transport and not yet handed to the kernel."""
        queued = self._outbox_bytes
        return queued + (0 if self._transport is None else self._transport.get_write_buffer_size())

    # -- sending ------------------------------------------------------------------

    async def request(self, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a request and wait for its answer.

        Args:
            cmd: The request; its opaque and flag are replaced, so build it without.
            timeout_s: Seconds to wait for the answer, including time spent waiting
                for a congested connection to drain.

        Returns:
            The answer (any response code; interpreting it is the caller's job).

        Raises:
            RequestTimeoutError: No answer in time; the request may still have run.
            ConnectionClosedError: The connection is or became closed.
        """
        loop = self._loop
        deadline = loop.time() + timeout_s
        self._ensure_open()
        if not self._writable.is_set():
            await self._wait_writable_within(cmd.code, timeout_s)
        # Not asyncio.timeout() nor a loop timer per request: this runs for every send
        # and pull, and a timer costs several times a slot (transport/deadlines.py).
        opaque, fut = self._requests.wait_for(deadline)
        try:
            self._write(_with(cmd, opaque, cmd.flag & ~(FLAG_RESPONSE | FLAG_ONEWAY)))
            return await fut
        except TimeoutError:
            raise RequestTimeoutError(
                code=cmd.code, opaque=opaque, timeout_s=timeout_s, peer=self.peer_address
            ) from None
        finally:
            self._requests.forget(opaque, fut)

    async def send_oneway(self, cmd: RemotingCommand, timeout_s: float | None = None) -> None:
        """Send a request that expects no answer (flag bit 2 set).

        Args:
            cmd: The request; its opaque and flag are replaced.
            timeout_s: Seconds to wait for a congested connection to drain; ``None``
                waits as long as the connection lives.

        Raises:
            RequestTimeoutError: The connection stayed congested past ``timeout_s``.
            ConnectionClosedError: The connection is closed.
        """
        self._ensure_open()
        if not self._writable.is_set():
            await self._wait_writable_within(cmd.code, timeout_s)
        # Java assigns oneway requests an opaque too; nobody waits on it.
        self._write(
            _with(cmd, self._requests.allocate(), (cmd.flag & ~FLAG_RESPONSE) | FLAG_ONEWAY)
        )

    async def wait_writable(self) -> None:
        """Return once the connection accepts writes (it is open and not congested).

        Raises:
            ConnectionClosedError: The connection is or became closed.
        """
        self._ensure_open()
        if not self._writable.is_set():
            await self._writable.wait()
            self._ensure_open()

    async def _wait_writable_within(self, code: int, timeout_s: float | None) -> None:
        # wait_for, not asyncio.timeout(): this may run in an eager handler's first
        # step, outside any task (see eager_codes).
        try:
            await asyncio.wait_for(self.wait_writable(), timeout_s)
        except TimeoutError:
            raise RequestTimeoutError(
                code=code, opaque=-1, timeout_s=timeout_s or 0.0, peer=self.peer_address
            ) from None

    def refuse_requests(self, code: int, remark: str) -> None:
        """Answer every request arriving from now on with ``code`` instead of handling it.

        The remoting server calls this during a graceful stop, so in-flight requests
        can finish while new ones are turned away.

        Args:
            code: Response code for refused requests (e.g. SYSTEM_BUSY).
            remark: Remark for refused requests.
        """
        self._inbound.refuse(code, remark)

    # -- lifecycle ----------------------------------------------------------------

    def add_close_callback(self, callback: CloseCallback) -> None:
        """Call ``callback(connection)`` once the connection is closed.

        Args:
            callback: A plain function; exceptions from it are logged.
        """
        if self._status is ConnectionStatus.CLOSED:
            self._loop.call_soon(callback, self)
        else:
            self._close_callbacks.append(callback)

    async def wait_handlers(self, timeout_s: float) -> bool:
        """Wait for the requests being handled right now to finish.

        Args:
            timeout_s: Longest wait in seconds.

        Returns:
            ``True`` when all finished, ``False`` when some were still running.
        """
        current = asyncio.current_task()
        waits: set[asyncio.Future[None]] = {t for t in self._inbound.tasks if t is not current}
        # Deferred answers (sends waiting for the disk or a slave) are in flight too.
        waits.update(asyncio.ensure_future(d.wait()) for d in self._inbound.deferred)
        if not waits:
            return True
        _done, running = await asyncio.wait(waits, timeout=timeout_s)
        for wait in running:
            if wait not in self._inbound.tasks:
                wait.cancel()  # our own helper task, not a handler
        return not running

    async def wait_closed(self) -> None:
        """Return once the socket is gone."""
        await asyncio.shield(self._lost)

    async def close(self) -> None:
        """Close the connection; safe to call any number of times.

        Stops sending, cancels and awaits the handler tasks, fails every pending
        request with :class:`ConnectionClosedError`, lets queued bytes drain for up to
        ``linger_s`` and then aborts the socket.
        """
        if self._status in (ConnectionStatus.CONNECTING, ConnectionStatus.OPEN):
            self._status = ConnectionStatus.CLOSING
            if self._transport is not None:
                self._flush()
                self._transport.close()
        self._requests.fail_all()
        tasks = self._inbound.cancel_all(keep=asyncio.current_task())
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._transport is None:
            self._finish(None)
            return
        _done, lingering = await asyncio.wait({self._lost}, timeout=self._linger_s)
        if lingering:
            self._transport.abort()
            await asyncio.shield(self._lost)

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- asyncio protocol -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Attach the socket (called by asyncio)."""
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self._peer = (str(peer[0]), int(peer[1]))
        if self._high_water is not None:
            self._transport.set_write_buffer_limits(high=self._high_water)
        self._recheck_pause = writelines_pause_check(self._transport)
        if self._status is ConnectionStatus.CONNECTING:
            self._status = ConnectionStatus.OPEN

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the next read goes (called by asyncio)."""
        return self._decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        """Decode the frames a read completed and route them (called by asyncio)."""
        decoder = self._decoder
        decoder.buffer_updated(nbytes)
        try:
            if self._status is ConnectionStatus.OPEN:
                self._turn()
        finally:
            decoder.settle()  # before any other read: the scratch buffer is shared

    def data_received(self, data: bytes) -> None:
        """Decode frames and route them (for callers that hand over bytes)."""
        if self._status is not ConnectionStatus.OPEN:
            return
        self._decoder.feed(data)
        self._turn()

    def pause_writing(self) -> None:
        """Stop reading until the write buffer drains (called by asyncio)."""
        self._writable.clear()
        if not self._holds & _HOLD_WRITE:
            self._pause_count += 1
            _log.debug("reading paused: peer is slow to read", peer=self.peer_address)
            self._hold(_HOLD_WRITE)

    def resume_writing(self) -> None:
        """Resume reading once the write buffer drained (called by asyncio)."""
        self._writable.set()
        self._release(_HOLD_WRITE)

    def connection_lost(self, exc: Exception | None) -> None:
        """Fail what is pending and run close callbacks (called by asyncio)."""
        self._finish(exc)

    def parked(self) -> Parked:
        """Context manager a handler waits in when its wait is the point, not work.

        A long-polling pull parks until a message arrives; a push consumer holds one
        per queue on one connection, so parked requests count neither towards the
        connection's in-flight limit nor towards the server's load.

        Returns:
            The context manager (use ``with``; it may be entered before the handler's
            first real wait, in an eager handler's inline step).
        """
        return self._inbound.parked()

    # -- flow control -------------------------------------------------------------

    def _turn(self) -> None:
        """Handle the whole frames received, up to one turn's worth of requests.

        What is left waits for a later event-loop pass (a backlog turn), with reading
        paused meanwhile, so one connection's pipelined read cannot hold the loop.
        """
        decoder = self._decoder
        on_request = self._inbound.on_request
        on_response = self._requests.answer
        late_codes = self._late_codes
        late: list[RemotingCommand] = []
        budget = self._requests_per_turn
        # Answers written during the turn leave together, right after it.
        self._receiving = True
        try:
            while True:
                try:
                    cmd = decoder.next_command()
                except FrameError as exc:
                    _BROKEN_FRAMES.warn(
                        "closing connection: broken frame", peer=self.peer_address, error=str(exc)
                    )
                    self._abort(exc)
                    return
                if cmd is None:
                    break
                if cmd.flag & FLAG_RESPONSE:
                    on_response(cmd)
                elif cmd.code in late_codes:
                    late.append(cmd)
                else:
                    on_request(cmd)
                budget -= 1
                if not budget:
                    if decoder.buffered:
                        self._backlog = True
                        self._loop.call_soon(self._next_turn)
                        self._update_reading()
                    break
            for cmd in late:
                on_request(cmd)
        finally:
            self._receiving = False
        if self._outbox and not self._flush_scheduled:
            # Not now but at the end of this loop pass: a request often wakes work whose
            # answer goes to the same peer (a send wakes that client's parked pull; the
            # woken pull answers in the next callback), and one write then carries both.
            # That halves a send-and-consume client's wake-ups and the broker's writes.
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _next_turn(self) -> None:
        """A backlog turn: go on with frames left by an earlier one (a loop callback)."""
        self._backlog = False
        if self._status is ConnectionStatus.OPEN and not self._holds:
            self._turn()
        self._update_reading()

    def _hold(self, reason: int) -> None:
        self._holds |= reason
        self._update_reading()

    def _release(self, reason: int) -> None:
        if not self._holds & reason:
            return
        self._holds &= ~reason
        if not self._holds and not self._backlog and self._decoder.buffered:
            # Frames read before the hold still wait: one turn for them before reading
            # more (it finds nothing to do when only part of a frame is there).
            self._backlog = True
            self._loop.call_soon(self._next_turn)
        self._update_reading()

    def _hold_busy(self) -> None:
        self._hold(_HOLD_BUSY)

    def _release_busy(self) -> None:
        self._release(_HOLD_BUSY)

    def _update_reading(self) -> None:
        """Make the transport read iff nothing holds it and no backlog turn is due."""
        want = not self._holds and not self._backlog
        if want is self._reading:
            return
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        self._reading = want
        if want:
            transport.resume_reading()
        else:
            transport.pause_reading()

    # -- internals ----------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._status is not ConnectionStatus.OPEN:
            raise self._closed_error()

    def _closed_error(self) -> ConnectionClosedError:
        message = f"connection to {self.peer_address} is closed"
        if self._status is not ConnectionStatus.OPEN and self._hung_up_unanswered:
            transport = self._transport
            if transport is not None and transport.get_extra_info("ssl_object") is not None:
                # TLS 1.3 completes the client's handshake before the server checks
                # the client's certificate, so a refused one shows only as a hang-up.
                cause = self._close_cause
                why = f": {cause.reason or cause}" if isinstance(cause, ssl.SSLError) else ""
                message += (
                    f" (the peer hung up without answering any request{why}; a server "
                    "that requires a client certificate does this to a TLS client "
                    "without one it trusts)"
                )
            else:
                message += (
                    " (the peer hung up without answering any request; a server that "
                    "requires TLS does this to plain connections)"
                )
        err = ConnectionClosedError(message, peer=self.peer_address)
        err.__cause__ = self._close_cause
        return err

    def _write(self, cmd: RemotingCommand, extra_body: Sequence[Buffer] = ()) -> None:
        if self._status is not ConnectionStatus.OPEN:
            raise self._closed_error()
        transport = self._transport
        assert transport is not None  # OPEN implies connection_made ran
        if not self._coalesce:
            transport.writelines(encode_command_parts(cmd, extra_body))
            if self._recheck_pause is not None:
                self._recheck_pause()
            return
        self._outbox_bytes += encode_command_into(self._outbox, cmd, extra_body)
        if self._outbox_bytes >= self._flush_at:
            self._flush()
        # A read's answers, and those of other writers (tasks, timers), share one flush
        # at the end of this loop iteration (a read schedules it once decoded).
        elif not self._flush_scheduled and not self._receiving:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        outbox = self._outbox
        if not outbox:
            return
        self._outbox = []
        self._outbox_bytes = 0
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.writelines(outbox)
            if self._recheck_pause is not None:
                self._recheck_pause()

    def _abort(self, cause: BaseException) -> None:
        self._close_cause = cause
        self._status = ConnectionStatus.CLOSING
        self._requests.fail_all()
        if self._transport is not None:
            self._transport.abort()

    def _finish(self, cause: BaseException | None) -> None:
        if self._status is ConnectionStatus.CLOSED:
            return
        # The peer closed (we did not) while every request ever sent still waits: it
        # answered nothing. Worked out here, not counted per answer, to keep reads lean.
        self._hung_up_unanswered = (
            self._status is ConnectionStatus.OPEN
            and (cause is None or isinstance(cause, ConnectionResetError))
            and self._requests.none_answered
        )
        self._status = ConnectionStatus.CLOSED
        if cause is not None and self._close_cause is None:
            self._close_cause = cause
        self._writable.set()  # wake writers so they see the closed state
        self._requests.fail_all()
        self._inbound.cancel_all()
        if not self._lost.done():
            self._lost.set_result(None)
        callbacks, self._close_callbacks = self._close_callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                _log.exception("close callback failed", peer=self.peer_address)


def _with(cmd: RemotingCommand, opaque: int, flag: int) -> RemotingCommand:
    # Positional construction: a cheaper path than dataclasses.replace on the hot path.
    return RemotingCommand(
        cmd.code,
        opaque,
        flag,
        cmd.remark,
        cmd.ext_fields,
        cmd.body,
        cmd.language,
        cmd.version,
        cmd.serialize_type,
    )
