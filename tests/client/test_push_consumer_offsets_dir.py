"""``offsets_dir`` given as a string: a broadcasting PushConsumer keeps its offsets there."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocklet.client.offset_store import LocalFileOffsetStore
from rocklet.client.push_config import PushConsumerConfig
from rocklet.client.push_consumer import ConsumerStatus, PushConsumer
from rocklet.protocol.bodies.queue import MessageQueue
from tests.client.consumers import Collector, produce
from tests.cluster import running_cluster


def test_offsets_dir_takes_a_string_or_a_path_and_nothing_else(tmp_path: Path) -> None:
    as_text = PushConsumerConfig("G", offsets_dir=str(tmp_path / "o"))
    assert as_text.offsets_path == tmp_path / "o"
    assert PushConsumerConfig("G", offsets_dir=tmp_path / "o").offsets_path == tmp_path / "o"
    for wrong in (b"/tmp/o", 5):
        with pytest.raises(TypeError, match="offsets_dir"):
            PushConsumer("G", broadcasting=True, offsets_dir=wrong)


async def test_local_file_store_takes_a_string_directory(tmp_path: Path) -> None:
    mq = MessageQueue("T", "broker-a", 0)
    store = LocalFileOffsetStore("G", str(tmp_path / "offsets"))
    store.update(mq, 9)
    await store.persist([mq])
    assert store.path == tmp_path / "offsets" / "G.json"
    again = LocalFileOffsetStore("G", str(tmp_path / "offsets"))
    await again.load()
    assert again.read_memory(mq) == 9


async def test_broadcasting_consumer_with_a_string_offsets_dir(tmp_path: Path) -> None:
    offsets_dir = tmp_path / "offsets"
    async with running_cluster(tmp_path / "store") as cluster:
        bodies = [f"b{i}".encode() for i in range(20)]
        await produce(cluster.namesrv_addr, "T", bodies)
        collector = Collector()
        consumer = PushConsumer(
            "BC_STR",
            cluster.namesrv_addr,
            broadcasting=True,
            consume_from="first",
            offsets_dir=str(offsets_dir),  # as a user writes it
        )
        async with consumer.subscribe("T", "*", collector):
            await collector.wait_bodies(len(bodies))
        assert consumer.status is ConsumerStatus.CLOSED
    # Shutdown wrote every queue's position to <offsets_dir>/<group>.json.
    store = LocalFileOffsetStore("BC_STR", offsets_dir)
    await store.load()
    assert sum(store.snapshot().values()) == len(bodies)
