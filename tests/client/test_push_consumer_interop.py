"""Interop: the official C++ client (rocketmq 0.4.4, a subprocess) produces, the SDK consumes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rocklet.client.pull_consumer import PullConsumer, PullStatus
from rocklet.client.push_consumer import PushConsumer
from tests.client.consumers import Collector
from tests.cluster import running_cluster
from tests.compat.harness import driver_pool

pytestmark = pytest.mark.compat


def big_body() -> str:
    # Over the 4 KiB threshold above which the C++ producer zlib-compresses (sysFlag bit 0).
    return "".join(chr(ord("a") + i % 26) for i in range(6000))


async def test_cpp_produced_messages_reach_the_sdk_consumers(tmp_path: Path) -> None:
    async with running_cluster(tmp_path / "store") as cluster:
        sends: list[dict[str, Any]] = [
            {"mode": "sync", "tags": "TagA" if i % 2 else "TagB", "keys": f"k{i}", "body": f"s{i}"}
            for i in range(10)
        ]
        sends.append({"mode": "orderly", "shard": 2, "tags": "TagA", "keys": "ord", "body": "o"})
        sends.append(
            {
                "mode": "batch",
                "messages": [{"tags": "TagA", "keys": f"b{i}", "body": f"b{i}"} for i in range(3)],
            }
        )
        sends.append(
            {
                "mode": "sync",
                "tags": "TagA",
                "keys": "big",
                "body": big_body(),
                "props": {"color": "blue"},
            }
        )
        async with driver_pool(tmp_path / "home", cluster.namesrv_addr) as drivers:
            sent = await drivers.produce("cpp-producer", "Interop", sends)
        assert len(sent) == len(sends)

        wanted = {f"s{i}".encode() for i in range(1, 10, 2)} | {b"o", b"b0", b"b1", b"b2"}
        wanted.add(big_body().encode())
        collector = Collector()
        consumer = PushConsumer("SDK-CG", cluster.namesrv_addr, consume_from="first")
        async with consumer.subscribe("Interop", "TagA", collector):  # starts it
            await collector.wait_bodies(len(wanted))
        assert collector.bodies == wanted
        by_key = {m.keys[0]: m for m in collector.messages}
        big = by_key["big"]
        assert big.sys_flag & 1  # stored compressed by the C++ client, inflated by the SDK
        assert big.properties["color"] == "blue" and big.tags == "TagA"
        assert by_key["ord"].queue_id == 2
        # The C++ wheel's UNIQ_KEY is the msg_id users see, as in the C++ and Java clients.
        singles = [by_key[k] for k in ("k1", "k3", "ord", "big")]
        assert all(m.msg_id == m.properties["UNIQ_KEY"] for m in singles)

        async with PullConsumer("SDK-PULL", cluster.namesrv_addr) as puller:
            total = 0
            for mq in await puller.fetch_queues("Interop"):
                result = await puller.pull(mq, 0, 32, expression="TagB")
                assert result.status is not PullStatus.OFFSET_ILLEGAL
                total += len(result.messages)
            assert total == 5
