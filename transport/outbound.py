"""Our requests on one connection that wait for their answers.

Correlation lives here, not in the command: each request gets an opaque, and
``opaque -> Future`` finds its answer, which may come in any order. Each request has a
deadline, kept in coarse slots (:mod:`rocklet.transport.deadlines`) rather than a loop
timer per request: this runs for every send and pull. RocketMQ's static ``requestId``
counter is the counter-example.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from rocklet.protocol.command import RemotingCommand
from rocklet.transport.deadlines import Deadlines
from rocklet.transport.logs import get_logger

__all__ = ["OutboundRequests"]

_log = get_logger(__name__)

#: Opaques stay non-negative int32 values, as the C++ client's (``& INT_MAX``).
_OPAQUE_MASK: Final = 0x7FFFFFFF


class OutboundRequests:
    """The requests a connection sent and still waits on.

    Args:
        loop: The connection's loop (futures and deadline slots live there).
        closed_error: Makes the error a request fails with when the connection closes.
        peer: Names the peer, for logs.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        closed_error: Callable[[], BaseException],
        peer: Callable[[], str | None],
    ) -> None:
        self._loop = loop
        self._closed_error = closed_error
        self._peer = peer
        self._waiting: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._deadlines: Deadlines[int] = Deadlines(loop, self._expire)
        self._next_opaque = 0

    def __len__(self) -> int:
        return len(self._waiting)

    @property
    def none_answered(self) -> bool:
        """Whether requests were sent and every one of them still waits."""
        return 0 < len(self._waiting) == self._next_opaque

    def allocate(self) -> int:
        """A free opaque (for a oneway request too: Java gives them one)."""
        opaque = self._next_opaque
        while opaque in self._waiting:  # only after 2**31 requests with one stuck
            opaque = (opaque + 1) & _OPAQUE_MASK
        self._next_opaque = (opaque + 1) & _OPAQUE_MASK
        return opaque

    def wait_for(self, deadline: float) -> tuple[int, asyncio.Future[RemotingCommand]]:
        """Take an opaque whose answer resolves the future; past ``deadline`` it fails.

        Returns:
            The opaque and the future: it gets the answer, ``TimeoutError`` at the
            deadline, or the closed error. Call :meth:`forget` once done with it.
        """
        opaque = self.allocate()
        fut: asyncio.Future[RemotingCommand] = self._loop.create_future()
        self._waiting[opaque] = fut
        self._deadlines.add(deadline, opaque)
        return opaque, fut

    def forget(self, opaque: int, fut: asyncio.Future[RemotingCommand]) -> None:
        """Drop a request's entry (answered, timed out or cancelled)."""
        # Compare identity: after an answer the opaque is free and may be reused.
        if self._waiting.get(opaque) is fut:
            del self._waiting[opaque]
            self._deadlines.discard(opaque)

    def answer(self, cmd: RemotingCommand) -> None:
        """Hand a response to the request with its opaque."""
        fut = self._waiting.pop(cmd.opaque, None)
        if fut is None:
            # Late answers to timed-out or cancelled requests land here (a consumer that
            # stops cancels its parked pulls; the broker answers them anyway). Java logs
            # and drops them too; at debug level, because they are expected.
            _log.debug(
                "dropping response with unknown opaque",
                peer=self._peer(),
                opaque=cmd.opaque,
                code=cmd.code,
            )
            return
        self._deadlines.discard(cmd.opaque)
        if not fut.done():
            fut.set_result(cmd)

    def fail_all(self) -> None:
        """Fail every waiting request with the closed error and drop its deadline."""
        waiting, self._waiting = self._waiting, {}
        self._deadlines.clear()
        for fut in waiting.values():
            if not fut.done():
                fut.set_exception(self._closed_error())

    def _expire(self, opaque: int) -> None:
        # A request's deadline passed: fail it unless its answer (or a close) came first.
        # Opaques are not reused within a timeout: they wrap after 2**31 requests.
        fut = self._waiting.get(opaque)
        if fut is not None and not fut.done():
            fut.set_exception(TimeoutError())
