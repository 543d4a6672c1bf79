"""Clients belong to the event loop they were started on, and closing fails waiting calls.

Against a real broker on loopback. A call from another loop (``asyncio.run`` in a
worker thread) must fail before anything is written: a request written to the owning
loop's connection from another thread used to be sent and stored while its caller got
a RuntimeError. A send waiting for its first route when the producer closes must fail
with ClientStateError, not with a cancellation its caller never asked for.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.errors import ClientStateError
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from rocklet.client.pull_consumer import LitePullConsumer, PullConsumer
from rocklet.client.push_consumer import PushConsumer
from rocklet.client.transaction import HalfMessage, LocalTransactionState, TransactionProducer
from rocklet.protocol.bodies.route import TopicRouteData
from tests.client.producer_support import WAIT_S, stored_all
from tests.cluster import running_cluster

T = TypeVar("T")
ANOTHER_LOOP = "belongs to another event loop"


async def on_another_loop(make: Callable[[], Awaitable[T]]) -> T:
    """Run ``make()`` with ``asyncio.run`` in a worker thread: on a loop of its own."""

    async def run() -> T:
        return await make()

    return await asyncio.to_thread(asyncio.run, run())


def route_fetch_started(producer: Producer) -> asyncio.Event:
    """An event set when the producer's client instance starts fetching a route.

    The fetch is a task the first send spawns, so when it runs, every send created
    before it is waiting for the route.
    """
    routes = producer.instance.routes
    started = asyncio.Event()
    fetch = routes._fetch

    async def fetch_and_tell(topic: str) -> TopicRouteData | None:
        started.set()
        return await fetch(topic)

    routes._fetch = fetch_and_tell
    return started


async def test_a_producer_refuses_calls_from_another_loop_before_sending(
    tmp_path: Path,
) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        Producer("PG", cluster.namesrv_addr) as p,
        TransactionProducer(
            "PG_TX", cluster.namesrv_addr, check_listener=lambda m: LocalTransactionState.COMMIT
        ) as tx,
    ):
        await p.send(Message("Mine", b"a route and a connection, on this loop"))
        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: p.send(Message("Mine", b"foreign")),
            lambda: p.send([Message("Mine", b"foreign batch")]),
            lambda: p.send_oneway(Message("Mine", b"foreign oneway")),
            lambda: p.send_orderly(Message("Mine", b"foreign orderly"), 1),
            lambda: p.request(Message("Mine", b"foreign request"), 1000),
            lambda: tx.send_in_transaction(
                Message("Mine", b"foreign half"), lambda m, a: LocalTransactionState.COMMIT
            ),
            lambda: tx.end(
                HalfMessage("Mine", "broker-a", 0, 0, "id"), LocalTransactionState.COMMIT
            ),
            p.close,
        ]
        for call in calls:
            with pytest.raises(ClientStateError, match=ANOTHER_LOOP):
                await on_another_loop(call)
        # On its own loop it still works, and nothing foreign was stored: sent after
        # the refused calls on the same connection, this one is stored after them.
        await p.send(Message("Mine", b"last"))
        bodies = sorted(m.body for m in stored_all(cluster.broker, "Mine"))
        assert bodies == [b"a route and a connection, on this loop", b"last"]


async def test_consumers_refuse_calls_from_another_loop(tmp_path: Path) -> None:
    async def ok(_msgs: list[MessageExt]) -> ConsumeResult:
        return ConsumeResult.SUCCESS

    async with running_cluster(tmp_path) as cluster:
        async with Producer("PG", cluster.namesrv_addr) as p:
            mq = (await p.send(Message("Pulled", b"one"))).message_queue
        push = PushConsumer("CG_PUSH", cluster.namesrv_addr).subscribe("Pulled", "*", ok)
        lite = LitePullConsumer("CG_LITE", cluster.namesrv_addr)
        lite.assign([mq])
        async with push, lite, PullConsumer("CG_PULL", cluster.namesrv_addr) as pull:
            calls: list[Callable[[], Awaitable[Any]]] = [
                push.running_info,
                push.shutdown,
                lite.poll,
                lite.commit,
                lambda: lite.seek_to_begin(mq),
                lite.shutdown,
                lambda: pull.pull(mq, 0),
                lambda: pull.fetch_queues("Pulled"),
                lambda: pull.max_offset(mq),
                lambda: pull.commit(mq, 1),
                pull.shutdown,
            ]
            for call in calls:
                with pytest.raises(ClientStateError, match=ANOTHER_LOOP):
                    await on_another_loop(call)

            async def subscribe_and_seek() -> None:  # plain methods, on another loop
                with pytest.raises(ClientStateError, match=ANOTHER_LOOP):
                    push.subscribe("More", "*", ok)
                with pytest.raises(ClientStateError, match=ANOTHER_LOOP):
                    lite.seek(mq, 0)

            await on_another_loop(subscribe_and_seek)
            assert "More" not in push._expressions
            # All still run on their own loop.
            assert (await pull.pull(mq, 0)).messages[0].body == b"one"
            lite.seek(mq, 0)
            assert [m.body for m in await lite.poll(int(WAIT_S * 1000))] == [b"one"]
            assert push.assignment()


async def test_closing_fails_sends_waiting_for_a_route_without_cancelling_them(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path) as cluster:
        p = Producer("PG", cluster.namesrv_addr)
        await p.start()
        fetching = route_fetch_started(p)
        sends = [asyncio.create_task(p.send(Message("Fresh", b"%d" % i))) for i in range(300)]
        oneway = asyncio.create_task(p.send_oneway(Message("Fresh", b"oneway")))
        given_up = asyncio.create_task(p.send(Message("Fresh", b"given up")))
        await asyncio.wait_for(fetching.wait(), WAIT_S)
        given_up.cancel()  # a caller's own cancellation stays one
        with pytest.raises(asyncio.CancelledError):
            await given_up
        await p.close()
        outcomes = await asyncio.gather(*sends, oneway, return_exceptions=True)
        assert Counter(type(o) for o in outcomes) == {ClientStateError: 301}
        assert all("the producer was closed" in str(o) for o in outcomes)
        assert not any(t.cancelled() for t in [*sends, oneway])
