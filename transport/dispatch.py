"""Route each request to the processor registered for its code, and turn failures into answers.

The rules follow Java's ``NettyRemotingAbstract.processRequestCommand``:

- an unknown code is answered with REQUEST_CODE_NOT_SUPPORTED and the remark
  ``" request type N not supported"`` (docs/protocol.md);
- a header or message-format error raised by a processor is answered with the error's
  own response code and its text as the remark, as Java answers a
  ``RemotingCommandException``;
- any other exception is logged with its traceback and answered with SYSTEM_ERROR; the
  connection stays open;
- answers use the request's serialization and echo its opaque
  (:meth:`~rocklet.protocol.command.RemotingCommand.make_response`); the connection never
  answers a request marked oneway.

Processors registered with ``eager=True`` (sends, pulls) are started inline when their
request is read and get a task only if they suspend (:mod:`rocklet.transport.eager_start`).
One may also come with a synchronous twin (``now=``), run by :func:`dispatch_now` with no
coroutine at all; it returns :data:`~rocklet.transport.types.LATER` when the request
needs the asynchronous processor (which then starts over).
A processor may also return a :class:`~rocklet.transport.deferred.Deferred` and answer
later from a callback (a send waiting for the disk or a slave); the observer is then
told when it is answered.

A registry may carry an :data:`RequestObserver` (the broker's metrics): it is told
each request's code, answer code and duration, without this module knowing about
Prometheus. It may also carry a :data:`RequestGate` (the ACL check): run before every
request, as Java's server-side ``RPCHook.doBeforeRequest``, it may answer in the
processor's place.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Set

from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import ProtocolError
from rocklet.transport.connection import Connection, HandlerResult, Reply
from rocklet.transport.context import RequestContext
from rocklet.transport.deferred import Deferred
from rocklet.transport.logs import get_logger
from rocklet.transport.types import LATER, Later

__all__ = [
    "NowProcessor",
    "Processor",
    "ProcessorRegistry",
    "RequestGate",
    "RequestObserver",
    "dispatch",
    "dispatch_now",
]

_log = get_logger(__name__)

#: Handles one request code. Returns the answer, or ``None`` to send nothing.
Processor = Callable[[RequestContext, RemotingCommand], Awaitable[HandlerResult]]
#: A processor's synchronous twin: the answer, or :data:`LATER` for the processor.
NowProcessor = Callable[[RequestContext, RemotingCommand], HandlerResult | Later]
#: Told ``(request code, response code or None when nothing is sent, seconds)``.
RequestObserver = Callable[[int, int | None, float], None]
#: Runs before each request's processor; returns ``None`` to let the request through,
#: or the answer to send instead (synchronous: it runs on every request).
RequestGate = Callable[[Connection, RemotingCommand], RemotingCommand | None]


class ProcessorRegistry:
    """Request code to processor.

    Attributes:
        observer: Told about every dispatched request (``None``: nobody is).
        gate: Checks every request before its processor (``None``: no check).
    """

    def __init__(self) -> None:
        self._processors: dict[int, Processor] = {}
        self._now: dict[int, NowProcessor] = {}
        self._eager: set[int] = set()
        self._late: set[int] = set()
        self.observer: RequestObserver | None = None
        self.gate: RequestGate | None = None

    def register(
        self,
        code: int,
        processor: Processor,
        *,
        eager: bool = False,
        now: NowProcessor | None = None,
        late: bool = False,
    ) -> None:
        """Register the processor of one request code.

        Args:
            code: The request code.
            processor: Its processor.
            eager: Start the processor inline when its request is read, and make a task
                only if it suspends (hot codes that usually answer without waiting).
                It must then use neither :func:`asyncio.current_task` nor
                :func:`asyncio.timeout` before its first real wait. Default: off.
            now: The processor's synchronous twin, tried first (implies ``eager``): it
                answers without suspending or returns :data:`LATER`, having changed
                nothing, for ``processor`` to handle the request. Default: none.
            late: Handle this code's requests after the other requests of the same
                read (for requests that usually wait, like long-polling pulls, so that
                work answered at once does not queue behind them). Default: off.

        Raises:
            ValueError: The code already has a processor.
        """
        if code in self._processors:
            raise ValueError(f"request code {code} already has a processor")
        self._processors[code] = processor
        if now is not None:
            self._now[code] = now
            eager = True
        if eager:
            self._eager.add(code)
        if late:
            self._late.add(code)

    @property
    def eager_codes(self) -> Set[int]:
        """The codes registered with ``eager=True`` (a live view)."""
        return self._eager

    @property
    def late_codes(self) -> Set[int]:
        """The codes registered with ``late=True`` (a live view)."""
        return self._late

    def register_all(self, processors: Mapping[int, Processor]) -> None:
        """Register several processors at once.

        Args:
            processors: Request code to processor.

        Raises:
            ValueError: A code already has a processor.
        """
        for code, processor in processors.items():
            self.register(code, processor)

    def get(self, code: int) -> Processor | None:
        """Return the processor of a code, or ``None``.

        Args:
            code: The request code.

        Returns:
            The processor, or ``None`` when the code is not supported.
        """
        return self._processors.get(code)

    def __contains__(self, code: object) -> bool:
        return code in self._processors

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._processors))

    def __len__(self) -> int:
        return len(self._processors)


def not_supported(cmd: RemotingCommand) -> RemotingCommand:
    """Build Java's answer to an unknown request code.

    Args:
        cmd: The request.

    Returns:
        A REQUEST_CODE_NOT_SUPPORTED response with Java's remark.
    """
    return cmd.make_response(
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {cmd.code} not supported"
    )


async def dispatch(
    registry: ProcessorRegistry, connection: Connection, cmd: RemotingCommand
) -> HandlerResult:
    """Run the processor for one request and map its failures to answers.

    Args:
        registry: Where processors are looked up.
        connection: The connection the request arrived on.
        cmd: The request.

    Returns:
        The answer to write, or ``None``.
    """
    # One coroutine for lookup, call and error mapping: this runs for every request.
    observer = registry.observer
    started = time.perf_counter() if observer is not None else 0.0
    processor = registry.get(cmd.code)
    result: HandlerResult
    gate = registry.gate
    if gate is not None and (refusal := gate(connection, cmd)) is not None:
        result = _refused(connection, cmd, refusal)
    elif processor is None:
        _log.debug("request code not supported", code=cmd.code, peer=connection.peer_address)
        result = not_supported(cmd)
    else:
        try:
            result = await processor(RequestContext(connection), cmd)
        except Exception as exc:
            result = _failed(connection, cmd, exc)
    if observer is not None:
        _observe_result(observer, cmd, result, started)
    return result


def dispatch_now(
    registry: ProcessorRegistry, connection: Connection, cmd: RemotingCommand
) -> HandlerResult | Later:
    """:func:`dispatch` for a code with a synchronous twin, without a coroutine.

    Args:
        registry: Where processors are looked up.
        connection: The connection the request arrived on.
        cmd: The request.

    Returns:
        The answer to write, ``None``, or :data:`LATER` when the code has no
        synchronous twin or the twin left the request to the processor; never raises.
    """
    now = registry._now.get(cmd.code)
    if now is None:
        return LATER
    observer = registry.observer
    started = time.perf_counter() if observer is not None else 0.0
    result: HandlerResult | Later
    gate = registry.gate
    if gate is not None and (refusal := gate(connection, cmd)) is not None:
        result = _refused(connection, cmd, refusal)
    else:
        try:
            result = now(RequestContext(connection), cmd)
        except Exception as exc:
            result = _failed(connection, cmd, exc)
        if result is LATER:
            return LATER  # dispatch() runs the gate and the observer for it
    if observer is not None:
        _observe_result(observer, cmd, result, started)
    return result


def _refused(
    connection: Connection, cmd: RemotingCommand, refusal: RemotingCommand
) -> RemotingCommand:
    _log.info(
        "request refused by the gate",
        code=cmd.code,
        peer=connection.peer_address,
        remark=refusal.remark,
    )
    return refusal


def _failed(connection: Connection, cmd: RemotingCommand, exc: Exception) -> RemotingCommand:
    """The answer to a processor that raised (Java's mapping)."""
    if isinstance(exc, ProtocolError):
        code = exc.response_code if exc.response_code is not None else ResponseCode.SYSTEM_ERROR
        _log.info(
            "request rejected",
            code=cmd.code,
            response_code=int(code),
            peer=connection.peer_address,
            error=str(exc),
        )
        return cmd.make_response(code, remark=str(exc))
    # Called in the except block: the traceback is the one being handled.
    _log.exception("processor failed", code=cmd.code, peer=connection.peer_address)
    return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}")


def _observe_result(
    observer: RequestObserver, cmd: RemotingCommand, result: HandlerResult, started: float
) -> None:
    if isinstance(result, Deferred):
        # Observed when answered, so the duration includes the wait.
        result.add_sink(lambda answer: _observe(observer, cmd, answer, started))
    else:
        _observe(observer, cmd, result, started)


def _observe(
    observer: RequestObserver,
    cmd: RemotingCommand,
    result: RemotingCommand | Reply | None,
    started: float,
) -> None:
    answer = result.command if isinstance(result, Reply) else result
    code_sent = None if answer is None or cmd.is_oneway else answer.code  # oneway: none
    observer(cmd.code, code_sent, time.perf_counter() - started)
