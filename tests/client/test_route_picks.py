"""Which broker of a group the route cache hands out, with the master there and gone.

The name server answers are built here (no network): what matters is the cache's
choice, as Java's ``findBrokerAddressInSubscribe`` / ``findBrokerAddressInAdmin`` make
it, and that the newest answer for a group wins over other topics' older ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from rocklet.client.routes import RouteCache
from rocklet.protocol.bodies.route import BrokerData, QueueData, TopicRouteData

MASTER, SLAVE = "10.0.0.1:10911", "10.0.0.2:10911"


def route(addrs: dict[int, str]) -> TopicRouteData:
    return TopicRouteData(
        queue_datas=(QueueData("b", 4, 4),),
        broker_datas=(BrokerData("c", "b", addrs),),
    )


def cache() -> RouteCache:
    def spawn(coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        return asyncio.create_task(coro, name=name)

    async def no_fetch(topic: str) -> TopicRouteData | None:
        raise AssertionError(f"unexpected fetch of {topic}")

    return RouteCache(no_fetch, spawn)


async def test_pulls_go_to_the_suggested_id_else_the_lowest() -> None:
    routes = cache()
    routes.store("T", route({0: MASTER, 1: SLAVE}))
    assert routes.subscribe_addr("b", 0) == (MASTER, 0)
    assert routes.subscribe_addr("b", 1) == (SLAVE, 1)
    assert routes.subscribe_addr("b", 7) == (MASTER, 0)
    # An address that just failed is passed over while the group has another.
    assert routes.subscribe_addr("b", 0, avoid=MASTER) == (SLAVE, 1)
    assert routes.admin_addr("b") == MASTER
    assert routes.broker_addrs() == [MASTER]
    assert routes.broker_addrs(slaves=True) == [MASTER, SLAVE]

    routes.store("T", route({1: SLAVE}))  # the name server dropped the master
    assert routes.subscribe_addr("b", 0) == (SLAVE, 1)
    assert routes.subscribe_addr("b", 0, avoid=SLAVE) == (SLAVE, 1)  # nothing else
    assert routes.admin_addr("b") == SLAVE
    assert routes.master_addr("b") is None
    assert routes.subscribe_addr("other", 0) is None


async def test_the_newest_answer_wins_over_other_topics_older_routes() -> None:
    routes = cache()
    routes.store("T", route({0: MASTER, 1: SLAVE}))
    routes.store("%RETRY%G", route({1: SLAVE}))  # fetched while the master was gone
    assert routes.master_addr("b") is None
    routes.store("T", route({0: "10.0.0.1:20911", 1: SLAVE}))  # it is back, new port
    assert routes.master_addr("b") == "10.0.0.1:20911"
    # An unchanged answer is still the newest word on its brokers.
    routes.store("%RETRY%G", route({1: SLAVE}))
    assert routes.master_addr("b") is None
