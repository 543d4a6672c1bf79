"""An answer a processor gives later, from a callback, without a task.

A send under SYNC_FLUSH or SYNC_MASTER is stored at once but answered only once the
disk or a slave has it. Awaiting that in the processor turns every such send into a
task with its own future and timer (:mod:`rocklet.transport.eager_start`'s fallback),
which cost the master as much CPU as storing the message. Instead the processor
returns a :class:`Deferred` right away and hands it to whatever it waits on, which
calls :meth:`Deferred.answer` when the wait ends (a batch of them per acknowledgement).

The transport counts a deferred answer as a request in flight until it is answered
(the same flow limits as a task), waits for it during a graceful stop, and writes
nothing when the connection closed meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from rocklet.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from rocklet.transport.types import Reply

__all__ = ["Deferred"]

#: What receives the answer: the transport's writer, the dispatcher's observer.
Sink = Callable[["RemotingCommand | Reply"], None]


class Deferred:
    """A request's answer, given later by :meth:`answer`. Event loop only.

    Args:
        request: The request being answered (its opaque, serialization and oneway
            flag; the answer is made with ``request.make_response``).
    """

    __slots__ = ("_answer", "_done", "_sinks", "request")

    def __init__(self, request: RemotingCommand) -> None:
        self.request = request
        self._answer: RemotingCommand | Reply | None = None
        self._sinks: list[Sink] = []
        self._done: asyncio.Future[None] | None = None

    @property
    def answered(self) -> bool:
        """Whether :meth:`answer` was called."""
        return self._answer is not None

    def answer(self, result: RemotingCommand | Reply) -> None:
        """Give the answer: it goes to every sink, in the order they were added.

        Only the first call counts (a wait may end by an acknowledgement and by a
        shutdown in the same loop pass).

        Args:
            result: The response.
        """
        if self._answer is not None:
            return
        self._answer = result
        sinks, self._sinks = self._sinks, []
        for sink in sinks:
            sink(result)
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def add_sink(self, sink: Sink) -> None:
        """Have ``sink`` receive the answer (at once if it was already given).

        Args:
            sink: Called once with the answer.
        """
        if self._answer is not None:
            sink(self._answer)
        else:
            self._sinks.append(sink)

    async def wait(self) -> None:
        """Return once answered (a graceful stop waits for answers in flight)."""
        if self._answer is not None:
            return
        if self._done is None:
            self._done = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._done)
