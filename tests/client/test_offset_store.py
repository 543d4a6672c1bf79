"""Offset stores: the broker-backed one against a real broker, the local file one on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocklet.client.instance import ClientInstance
from rocklet.client.offset_store import LocalFileOffsetStore, RemoteOffsetStore
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.errors import BodyError
from tests.client.consumers import produce
from tests.cluster import running_cluster

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)


def test_memory_offsets_only_move_forward_unless_told() -> None:
    store = LocalFileOffsetStore("G", Path("/nonexistent"))
    store.update(MQ0, 10)
    store.update(MQ0, 5)  # a late, smaller commit from an out-of-order listener
    assert store.read_memory(MQ0) == 10
    store.update(MQ0, 5, increase_only=False)  # a reset
    assert store.read_memory(MQ0) == 5
    store.update(MQ0, -1)  # "nothing to commit" is never stored
    assert store.snapshot() == {MQ0: 5}
    store.remove(MQ0)
    assert store.read_memory(MQ0) is None


async def test_local_file_store_round_trips_atomically(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("G", tmp_path / "offsets")
    await store.load()  # no file yet: nothing
    assert await store.read_store(MQ0) is None
    store.update(MQ0, 42)
    store.update(MQ1, 7)
    await store.persist([MQ0, MQ1])
    assert [p.name for p in (tmp_path / "offsets").iterdir()] == ["G.json"]  # no temp left
    # Java's OffsetSerializeWrapper: MessageQueue objects as (unquoted) map keys.
    text = store.path.read_text()
    assert text.startswith('{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:42')

    reloaded = LocalFileOffsetStore("G", tmp_path / "offsets")
    await reloaded.load()
    assert await reloaded.read_store(MQ0) == 42
    assert reloaded.read_memory(MQ1) == 7
    # Persisting one queue keeps the others already in the file.
    reloaded.update(MQ0, 50)
    await reloaded.persist([MQ0])
    again = LocalFileOffsetStore("G", tmp_path / "offsets")
    await again.load()
    assert again.snapshot() == {MQ0: 50, MQ1: 7}


async def test_local_file_store_refuses_a_corrupt_file(tmp_path: Path) -> None:
    (tmp_path / "G.json").write_text(json.dumps({"offsetTable": [{"topic": "T"}]}))
    with pytest.raises(BodyError):
        await LocalFileOffsetStore("G", tmp_path).load()


async def test_remote_store_commits_to_and_reads_from_the_broker(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        await produce(cluster.namesrv_addr, "T", [b"x"] * 8)
        async with ClientInstance(cluster.namesrv_addr) as instance:
            await instance.topic_route("T")
            store = RemoteOffsetStore("G", instance)
            store.update(MQ0, 2)
            store.update(MQ1, 1)
            await store.persist([MQ0, MQ1, MessageQueue("T", "broker-a", 2)])  # 2 has none
            assert cluster.broker.ctx.offsets.offsets_of("G", "T") == {0: 2, 1: 1}

            fresh = RemoteOffsetStore("G", instance)
            assert await fresh.read_store(MQ0) == 2
            assert fresh.read_memory(MQ0) == 2
            # A queue the group never committed: the broker's answer decides (Java's
            # broker says 0 while the queue's first message is still in memory).
            assert await fresh.read_store(MessageQueue("T", "broker-a", 3)) in (None, 0)
