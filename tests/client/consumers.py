"""Helpers for the consumer tests: produce with the SDK, collect what listeners see."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer

__all__ = ["Collector", "produce", "wait_until"]

WAIT_S = 30.0  # generous: two cores shared with other test runs


async def produce(
    namesrv: str,
    topic: str,
    bodies: Sequence[bytes],
    *,
    tags: Callable[[int], str | None] = lambda _i: None,
    group: str = "test-producer",
    keys: Callable[[int], str] | None = None,
) -> None:
    """Send one message per body, many in flight at once."""
    async with Producer(group, namesrv) as producer:
        for start in range(0, len(bodies), 200):
            await asyncio.gather(
                *(
                    producer.send(Message(topic, body, tags=tags(i), keys=keys(i) if keys else ()))
                    for i, body in enumerate(bodies[start : start + 200], start)
                )
            )


class Collector:
    """An async listener that records every message and wakes waiters on progress."""

    def __init__(self, result: ConsumeResult = ConsumeResult.SUCCESS) -> None:
        self.messages: list[MessageExt] = []
        self.bodies: set[bytes] = set()
        self.batches: list[int] = []
        self.result = result
        self._changed = asyncio.Condition()

    async def __call__(self, msgs: list[MessageExt]) -> ConsumeResult:
        self.messages.extend(msgs)
        self.bodies.update(m.body for m in msgs)
        self.batches.append(len(msgs))
        async with self._changed:
            self._changed.notify_all()
        return self.result

    async def wait_for(
        self, predicate: Callable[[Collector], bool], timeout_s: float = WAIT_S
    ) -> None:
        """Wait until ``predicate(self)`` holds (checked after each batch)."""
        async with asyncio.timeout(timeout_s), self._changed:
            await self._changed.wait_for(lambda: predicate(self))

    async def wait_bodies(self, count: int, timeout_s: float = WAIT_S) -> None:
        """Wait until ``count`` distinct bodies were received."""
        await self.wait_for(lambda c: len(c.bodies) >= count, timeout_s)


async def wait_until(
    condition: asyncio.Condition, predicate: Callable[[], bool], timeout_s: float = WAIT_S
) -> None:
    """Wait on ``condition`` until ``predicate()`` holds."""
    async with asyncio.timeout(timeout_s), condition:
        await condition.wait_for(predicate)
