"""Creating a benchmark's topic on a broker that may have only just started."""

from __future__ import annotations

import asyncio
import time
from typing import Final

from rocklet.client.admin import Admin
from rocklet.client.errors import ClientError, NoRouteError

__all__ = ["create_routed_topic"]

_POLL_S: Final = 0.05


async def create_routed_topic(admin: Admin, topic: str, queues: int, timeout_s: float) -> None:
    """Create ``topic`` with ``queues`` queues and wait until the name server routes them all.

    A broker whose port accepts may not have registered with its name server yet (under
    load, a second or more): until it has, its cluster is unknown and the creation is
    retried. Then the route is polled until it lists ``queues`` writable queues (the
    broker registers the new topic in the background).

    Args:
        admin: An open admin client of the system's name server.
        topic: The topic.
        queues: Its queue count.
        timeout_s: Longest wait for both steps together.

    Raises:
        TimeoutError: No broker to create it on, or no full route, within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    created: list[str] = []
    while not created:
        try:
            created = await admin.create_topic(topic, queue_nums=queues)
        except NoRouteError:
            created = []
        if not created:
            _check(deadline, timeout_s, f"no broker in the cluster to create {topic} on")
            await asyncio.sleep(_POLL_S)  # the broker registers with the name server
    while True:
        try:
            route = await admin.topic_route(topic)
        except ClientError:
            route = None
        if route is not None and sum(q.write_queue_nums for q in route.queue_datas) >= queues:
            return
        _check(deadline, timeout_s, f"no route for all {queues} queues of {topic}")
        await asyncio.sleep(_POLL_S)  # the broker registers the topic with the name server


def _check(deadline: float, timeout_s: float, what: str) -> None:
    if time.monotonic() > deadline:
        raise TimeoutError(f"{what} within {timeout_s:.0f} s")
