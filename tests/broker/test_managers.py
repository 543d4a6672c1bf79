"""Broker-side managers: offsets, groups, topics, locks, clients, long polling."""

from __future__ import annotations

import asyncio
import gc
import shutil
import weakref
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from rocklet.broker.groups import SubscriptionGroupManager
from rocklet.broker.locks import RebalanceLockManager
from rocklet.broker.long_polling import PullHoldService
from rocklet.broker.offsets import ConsumerOffsetManager
from rocklet.broker.topics import TopicConfigManager
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.route import Perm
from rocklet.protocol.bodies.subscription_group import SubscriptionGroupConfig
from rocklet.protocol.bodies.topic import TopicConfig
from rocklet.protocol.names import AUTO_CREATE_TOPIC, check_topic_name
from rocklet.transport.clock import ManualClock
from tests.conftest import GOLDEN_STORE


@pytest.fixture
def golden_config(tmp_path: Path) -> Path:
    target = tmp_path / "config"
    shutil.copytree(GOLDEN_STORE / "config", target)
    return target


def test_offsets_load_fastjson_file_written_by_rocketmq(golden_config: Path) -> None:
    offsets = ConsumerOffsetManager(golden_config / "consumerOffset.json")
    offsets.load()
    assert offsets.offsets_of("GoldenGroup", "GoldenTopic") == {0: 501, 1: 500, 2: 500, 3: 500}
    assert offsets.query("GoldenGroup", "%RETRY%GoldenGroup", 0) == 0
    assert offsets.query("GoldenGroup", "GoldenTopic", 9) is None
    assert sorted(offsets.topics_of("GoldenGroup")) == ["%RETRY%GoldenGroup", "GoldenTopic"]


async def test_offsets_persist_roundtrip_keeps_backup(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    offsets = ConsumerOffsetManager(path)
    offsets.commit("G", "T", 0, 5)
    assert not path.exists()  # a commit alone is written lazily
    await offsets.durable()
    assert offsets.writer.writes == 1
    await offsets.durable()
    assert offsets.writer.writes == 1  # nothing changed since
    offsets.commit("G", "T", 0, 7)
    await offsets.writer.flush()
    assert offsets.writer.writes == 2
    assert path.with_name("consumerOffset.json.bak").exists()
    reloaded = ConsumerOffsetManager(path)
    reloaded.load()
    assert reloaded.query("G", "T", 0) == 7
    # A torn main file falls back to the backup (the previous version).
    path.write_text('{"offsetTable":{"T@G":{0:')
    fallback = ConsumerOffsetManager(path)
    fallback.load()
    assert fallback.query("G", "T", 0) == 5


def test_offsets_remove_group_and_topic(tmp_path: Path) -> None:
    offsets = ConsumerOffsetManager(tmp_path / "o.json")
    offsets.commit("G1", "T1", 0, 1)
    offsets.commit("G2", "T1", 0, 2)
    offsets.commit("G1", "T2", 1, 3)
    offsets.remove_group("G1")
    assert offsets.groups_of("T1") == ["G2"]
    offsets.remove_topic("T1")
    assert list(offsets.entries()) == []


def test_groups_load_and_auto_create(golden_config: Path) -> None:
    clock = ManualClock()
    groups = SubscriptionGroupManager(golden_config / "subscriptionGroup.json", clock)
    groups.load()
    golden = groups.find("GoldenGroup", create=False)
    assert golden is not None and golden.retry_max_times == 16
    created = groups.find("NewGroup")
    assert created == SubscriptionGroupConfig("NewGroup")
    strict = SubscriptionGroupManager(golden_config / "x.json", clock, auto_create=False)
    assert strict.find("Unknown") is None
    before = groups.data_version.counter
    assert groups.delete("NewGroup") and not groups.delete("NewGroup")
    assert groups.data_version.counter == before + 1


async def test_topics_auto_create_from_template(tmp_path: Path) -> None:
    changes: list[int] = []
    topics = TopicConfigManager(
        tmp_path / "topics.json",
        ManualClock(),
        cluster_name="C",
        broker_name="b",
        on_change=lambda: changes.append(1),
    )
    template = topics.find(AUTO_CREATE_TOPIC)
    assert template is not None and template.perm & Perm.INHERIT
    created = topics.create_for_send("NewTopic", AUTO_CREATE_TOPIC, 4)
    assert created == TopicConfig("NewTopic", 4, 4, perm=Perm.READ | Perm.WRITE)
    assert changes == [1]
    # More queues than the template has are capped at the template's count.
    big = topics.create_for_send("Big", AUTO_CREATE_TOPIC, 1000)
    assert big is not None and big.write_queue_nums == 8
    # A template without INHERIT (or unknown) does not create.
    assert topics.create_for_send("Nope", "NewTopic", 4) is None
    assert topics.create_for_send("Nope", "Missing", 4) is None
    assert set(topics.unsaved) == {"NewTopic", "Big"}
    await topics.saved("NewTopic", "Big")
    assert not topics.unsaved
    reloaded = TopicConfigManager(
        tmp_path / "topics.json", ManualClock(), cluster_name="C", broker_name="b"
    )
    reloaded.load()
    assert reloaded.find("NewTopic") == created
    assert reloaded.data_version == topics.data_version


def test_topics_without_auto_create_drop_template(golden_config: Path) -> None:
    topics = TopicConfigManager(
        golden_config / "topics.json",
        ManualClock(),
        cluster_name="DefaultCluster",
        broker_name="broker-a",
        auto_create=False,
    )
    topics.load()
    assert topics.find(AUTO_CREATE_TOPIC) is None
    golden = topics.find("GoldenTopic")
    assert golden is not None and golden.read_queue_nums == 4
    assert topics.create_for_send("Fresh", AUTO_CREATE_TOPIC, 4) is None


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("TopicTest", True),
        ("%RETRY%g", True),
        ("a|b-c_d", True),
        ("", False),
        ("bad topic", False),
        ("x" * 127, True),
        ("x" * 128, False),
        ("t/é", False),
    ],
)
def test_topic_name_validation(name: str, ok: bool) -> None:
    assert (check_topic_name(name) is None) is ok


def test_locks_are_exclusive_until_expiry() -> None:
    clock = ManualClock()
    locks = RebalanceLockManager(clock, max_live_ms=60_000)
    q0, q1 = MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)
    assert locks.try_lock("G", [q0, q1], "c1") == {q0, q1}
    assert locks.try_lock("G", [q0, q1], "c2") == set()
    assert locks.try_lock("OtherGroup", [q0], "c2") == {q0}
    locks.unlock("G", [q1], "c2")  # not the holder: no effect
    assert locks.holder("G", q1) == "c1"
    locks.unlock("G", [q1], "c1")
    assert locks.try_lock("G", [q1], "c2") == {q1}
    clock.advance(60_001)
    assert locks.holder("G", q0) is None
    assert locks.try_lock("G", [q0], "c2") == {q0}


async def test_long_poll_wakes_on_arrival_and_filters_tags() -> None:
    holds = PullHoldService()
    waiter = asyncio.create_task(holds.wait("T", 0, 5, timeout_s=30, tag_codes={111}))
    other = asyncio.create_task(holds.wait("T", 1, 0, timeout_s=30))
    await asyncio.sleep(0)  # one loop turn: both tasks run up to their park
    assert holds.held == 2
    holds.notify("T", 0, 5, 111)  # max offset not past the pull's offset yet
    holds.notify("T", 0, 6, 222)  # a message the subscription does not want
    await asyncio.sleep(0)
    assert not waiter.done()
    holds.notify("T", 0, 7, 111)
    assert await asyncio.wait_for(waiter, 5) is True
    assert holds.held == 1
    holds.close()
    assert await asyncio.wait_for(other, 5) is False
    assert holds.held == 0


async def test_long_poll_run_wakes_as_its_messages_would_one_by_one() -> None:
    """One notify_run for messages at offsets 4..7 wakes the pulls that notify would."""
    holds = PullHoldService()
    parked = {
        "past the run": holds.wait("T", 0, 8, timeout_s=30),
        "tag only before its offset": holds.wait("T", 0, 6, timeout_s=30, tag_codes={111}),
        "tag at its offset": holds.wait("T", 0, 5, timeout_s=30, tag_codes={333}),
        "no filter": holds.wait("T", 0, 7, timeout_s=30),
        "other queue": holds.wait("T", 1, 0, timeout_s=30),
    }
    tasks = {name: asyncio.create_task(wait) for name, wait in parked.items()}
    await asyncio.wait_for(holds.wait_parked(len(tasks)), 5)

    async def woken(*names: str) -> list[bool]:
        return await asyncio.wait_for(asyncio.gather(*(tasks[n] for n in names)), 5)

    holds.notify_run("T", 0, 4, [111, 333, 222, 222])  # offsets 4, 5, 6, 7
    assert await woken("tag at its offset", "no filter") == [True, True]
    # A pull woken by the same call would have run before this task resumed.
    assert {name for name, task in tasks.items() if task.done()} == {
        "tag at its offset",
        "no filter",
    }
    holds.notify_run("T", 0, 8, [111])  # offset 8
    assert await woken("tag only before its offset", "past the run") == [True, True]
    holds.close()
    assert await asyncio.wait_for(tasks["other queue"], 5) is False


async def test_long_poll_times_out() -> None:
    holds = PullHoldService()
    assert await holds.wait("T", 0, 0, timeout_s=0.01) is False
    assert holds.held == 0


async def test_a_woken_pull_leaves_nothing_of_itself_in_the_hold_service() -> None:
    """Its future and deadline go when the pull answers, not when its 30 s slot fires.

    Kept to the deadline, every parked pull's future outlived the pull by the whole hold
    time, reached the collector's oldest generation and set off its full collections.
    """
    loop = asyncio.get_running_loop()
    made: list[weakref.ref[asyncio.Future[Any]]] = []
    create_future = loop.create_future

    def tracked() -> asyncio.Future[Any]:
        future = create_future()
        made.append(weakref.ref(future))
        return future

    holds = PullHoldService()
    gc.disable()  # only reference counts free them: nothing may still hold one
    try:
        with mock.patch.object(loop, "create_future", tracked):
            for offset in range(20):
                waiter = asyncio.create_task(holds.wait("T", 0, offset, timeout_s=30))
                await asyncio.wait_for(holds.wait_parked(), 5)
                holds.notify("T", 0, offset + 1, None)
                assert await asyncio.wait_for(waiter, 5) is True
                del waiter
        alive = [future for ref in made if (future := ref()) is not None]
        # The holds' futures are the ones settled with a bool (True: woken).
        held = [f for f in alive if f.done() and isinstance(f.result(), bool)]
        assert len(made) >= 20 and held == []
        # Nor does its deadline entry wait out the 30 s (the service's own bookkeeping).
        assert holds._deadlines is not None and len(holds._deadlines) == 0
    finally:
        gc.enable()
        holds.close()


def test_cluster_and_broker_topics_follow_their_switches(tmp_path: Path) -> None:
    def perms(
        cluster_topic_enable: bool = True, broker_topic_enable: bool = True
    ) -> tuple[int, int]:
        topics = TopicConfigManager(
            tmp_path / "topics.json",
            ManualClock(),
            cluster_name="C1",
            broker_name="B1",
            cluster_topic_enable=cluster_topic_enable,
            broker_topic_enable=broker_topic_enable,
        )
        cluster, broker = topics.find("C1"), topics.find("B1")
        assert cluster is not None and broker is not None
        return cluster.perm, broker.perm

    rw_inherit = int(Perm.READ | Perm.WRITE | Perm.INHERIT)
    assert perms() == (rw_inherit, rw_inherit)
    assert perms(cluster_topic_enable=False, broker_topic_enable=False) == (
        int(Perm.INHERIT),
        int(Perm.INHERIT),
    )


async def test_offset_reset_stamps_persist_and_rule_the_slave_side(tmp_path: Path) -> None:
    clock = ManualClock()
    path = tmp_path / "consumerOffset.json"
    master = ConsumerOffsetManager(path, clock)
    master.commit("G", "T", 0, 10)
    await master.durable()
    assert "rockletResetStamps" not in path.read_text()  # RocketMQ's shape until a reset
    master.commit("G", "T", 0, 4)  # a move back: stamped
    assert master.reset_stamps() == {"T@G": {0: clock.now_ms()}}
    master.commit("G", "T", 0, 3)  # same instant: still a newer stamp
    assert master.reset_stamps() == {"T@G": {0: clock.now_ms() + 1}}
    await master.durable()
    reloaded = ConsumerOffsetManager(path, clock)  # a restarted master keeps its stamps
    reloaded.load()
    assert reloaded.reset_stamps() == master.reset_stamps()

    slave = ConsumerOffsetManager(tmp_path / "slave.json", clock)
    slave.commit("G", "T", 0, 12)
    # Newer stamp than any taken: the master's lower offset wins, once.
    assert slave.take_from_master({"T@G": {0: 3}}, master.reset_stamps()) == 0
    assert slave.query("G", "T", 0) == 3
    slave.commit("G", "T", 1, 8)
    assert slave.take_from_master({"T@G": {0: 3, 1: 2}}, master.reset_stamps()) == 1
    assert slave.query("G", "T", 1) == 8  # no stamp for queue 1: kept
    # A master without stamps (RocketMQ): its offsets overwrite, as putAll does.
    slave.take_from_master({"T@G": {0: 1}}, None)
    assert slave.query("G", "T", 0) == 1
