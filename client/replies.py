"""Requests waiting for their reply (request-reply, RocketMQ 4.6+).

A requester registers a future under the request's correlation id before it sends;
the broker pushes the reply to this client (PUSH_REPLY_MESSAGE_TO_CLIENT, handled in
:mod:`rocklet.client.dispatch`), which completes the future. Java's
``RequestFutureHolder``, without its timeout sweeper: each requester bounds its own
wait and discards its entry.
"""

from __future__ import annotations

import asyncio

from rocklet.client.errors import ClientStateError
from rocklet.client.message import MessageExt

__all__ = ["ReplyWaiters"]


class ReplyWaiters:
    """Futures by correlation id. Event loop only."""

    def __init__(self) -> None:
        self._waiters: dict[str, asyncio.Future[MessageExt]] = {}
        self._closed = False

    def __len__(self) -> int:
        return len(self._waiters)

    def expect(self, correlation_id: str) -> asyncio.Future[MessageExt]:
        """A future completed by the reply to ``correlation_id``.

        The caller must :meth:`discard` it when it stops waiting.

        Raises:
            ClientStateError: The client instance is closed.
        """
        if self._closed:
            raise ClientStateError("client instance is closed")
        fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self._waiters[correlation_id] = fut
        return fut

    def discard(self, correlation_id: str) -> None:
        """Stop waiting for a reply (after it came, or on timeout)."""
        self._waiters.pop(correlation_id, None)

    def deliver(self, correlation_id: str, msg: MessageExt) -> bool:
        """Complete the waiter of ``correlation_id``.

        Returns:
            Whether a waiter took it (``False``: unknown or expired request).
        """
        fut = self._waiters.pop(correlation_id, None)
        if fut is None or fut.done():
            return False
        fut.set_result(msg)
        return True

    def close(self) -> None:
        """Fail every waiter (the instance is closing); later :meth:`expect` calls fail."""
        self._closed = True
        waiters, self._waiters = self._waiters, {}
        for fut in waiters.values():
            if not fut.done():
                fut.set_exception(ClientStateError("client instance closed"))
