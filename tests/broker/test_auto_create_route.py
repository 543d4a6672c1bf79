"""A topic a send auto-creates is routed by the name server before the send is answered."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocklet.broker.registration import NamesrvRegistrar
from rocklet.protocol.codes import ResponseCode
from tests.broker.test_send_pull import connect, cpp_send
from tests.cluster import running_cluster
from tests.compat.harness import route_of

#: How long the injected slow name server takes to take a registration.
SLOW_S = 0.3


async def test_the_first_send_to_a_new_topic_answers_after_its_route_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # RocketMQ 4.9.4 registers the new topic after answering: about one immediate
    # route lookup in four fails there. With registrations made slow on purpose,
    # every lookup right after the answer must still find the route.
    register_all = NamesrvRegistrar.register_all

    async def slow_register_all(self: NamesrvRegistrar) -> int:
        await asyncio.sleep(SLOW_S)  # the fault: a name server slow to answer
        return await register_all(self)

    monkeypatch.setattr(NamesrvRegistrar, "register_all", slow_register_all)
    async with running_cluster(tmp_path) as cluster, await connect(cluster) as conn:
        for n in range(3):
            topic = f"Fresh{n}"
            answer = await conn.request(cpp_send(topic, b"first"), 10)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            route = await route_of(cluster.namesrv_addr, topic)
            assert route is not None, f"{topic}: no route right after the first send"
            assert [q.write_queue_nums for q in route.queue_datas] == [4]
