"""Interop: the official C++ client (PyPI ``rocketmq`` 0.4.4) reads what the SDK produced.

The C++ client runs in a child process (tests/compat/cpp_driver.py): it is a ctypes
binding with its own threads, which must not share the test's interpreter.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

from rocklet.client.admin import Admin
from rocklet.client.message import Message
from rocklet.client.producer import Producer
from tests.cluster import running_cluster
from tests.compat.harness import driver_pool

CONSUME_TIMEOUT_S = 60.0


async def test_cpp_pull_consumer_reads_every_kind_of_sdk_send(tmp_path: Path) -> None:
    big = ("compress me " * 800).encode()  # > 4 KiB: sent zlib-compressed
    async with (
        running_cluster(tmp_path / "store") as cluster,
        Producer("PG_INTEROP", cluster.namesrv_addr) as producer,
        Admin(cluster.namesrv_addr) as admin,
    ):
        await admin.create_topic("Interop", queue_nums=4)
        await producer.send(Message("Interop", b"plain", tags="TagA", keys="k-plain"))
        await producer.send(Message("Interop", big, tags="TagB", keys="k-big"))
        await producer.send(
            [Message("Interop", b"batch%d" % i, tags="TagA", keys=f"k-b{i}") for i in range(3)]
        )
        await producer.send_orderly(Message("Interop", b"ordered", keys="k-ord"), "order-1")
        await producer.send(
            Message("Interop", b"props", keys="k-props", properties={"color": "blue"})
        )

        async with driver_pool(tmp_path / "home", cluster.namesrv_addr) as pool:
            reader = await pool.spawn("pull", "pull", topic="Interop", group="CG_INTEROP")
            summary = await reader.finish(CONSUME_TIMEOUT_S)
            consumed = reader.of("consumed")

    assert summary["consumed"] == 7, reader.diagnostics()
    by_key = {e["keys"]: e for e in consumed}
    assert Counter(e["keys"] for e in consumed) == Counter(
        ["k-plain", "k-big", "k-b0", "k-b1", "k-b2", "k-ord", "k-props"]
    )
    assert (by_key["k-plain"]["body"], by_key["k-plain"]["tags"]) == ("plain", "TagA")
    assert by_key["k-big"]["body_len"] == len(big)
    assert by_key["k-big"]["body_sha256"] == hashlib.sha256(big).hexdigest()
    assert [by_key[f"k-b{i}"]["body"] for i in range(3)] == ["batch0", "batch1", "batch2"]
    assert by_key["k-ord"]["body"] == "ordered"
    assert all(len(e["msg_id"]) == 32 for e in consumed)
