"""Failed messages: send-back, retry topic, dead-letter queue; flow control; broadcasting."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.message import MessageExt
from rocklet.client.pull_loop import FlowLimits
from rocklet.client.push_consumer import PushConsumer
from rocklet.protocol.bodies.consumer import ResetOffsetBody
from tests.client.consumers import WAIT_S, Collector, produce
from tests.cluster import running_cluster

#: Every delay level 1 s, so a retry comes back quickly.
FAST_LEVELS = " ".join(["1s"] * 18)


async def test_failed_messages_are_retried_then_dead_lettered(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, message_delay_level=FAST_LEVELS) as cluster:
        await produce(cluster.namesrv_addr, "T", [b"ok", b"poison"], tags=lambda _i: "A")
        deliveries: list[MessageExt] = []
        changed = asyncio.Condition()

        async def listener(msgs: list[MessageExt]) -> ConsumeResult:
            deliveries.extend(msgs)
            async with changed:
                changed.notify_all()
            return (
                ConsumeResult.RECONSUME_LATER
                if msgs[0].body == b"poison"
                else ConsumeResult.SUCCESS
            )

        dead = Collector()
        consumer = PushConsumer(
            "CG",
            cluster.namesrv_addr,
            consume_from="first",
            max_reconsume_times=2,
            rebalance_interval_s=0.5,
        )
        consumer.subscribe("T", "A", listener)
        # Another group reads the dead-letter queue, which is an ordinary topic.
        observer = PushConsumer(
            "DLQ-READER", cluster.namesrv_addr, consume_from="first", rebalance_interval_s=0.5
        )
        observer.subscribe("%DLQ%CG", "*", dead)
        async with consumer, observer:
            await dead.wait_bodies(1)

            def poison() -> list[MessageExt]:
                return [m for m in deliveries if m.body == b"poison"]

            async with asyncio.timeout(WAIT_S), changed:
                await changed.wait_for(lambda: len(poison()) >= 3)
        # The first delivery plus max_reconsume_times retries, each counted by the broker,
        # each with the original topic restored from RETRY_TOPIC.
        assert [m.reconsume_times for m in poison()] == [0, 1, 2]
        assert {m.topic for m in poison()} == {"T"}
        assert poison()[1].properties["RETRY_TOPIC"] == "T"
        assert [m.body for m in deliveries].count(b"ok") == 1
        assert dead.bodies == {b"poison"}
        assert dead.messages[0].properties["RETRY_TOPIC"] == "T"


async def test_a_slow_listener_keeps_each_queue_cache_bounded(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        bodies = [f"s{i}".encode() for i in range(800)]
        await produce(cluster.namesrv_addr, "T", bodies)
        limits = FlowLimits(max_cached_messages=40, max_cached_bytes=1 << 20, max_span=2000)
        consumer = PushConsumer(
            "CG",
            cluster.namesrv_addr,
            consume_from="first",
            consume_concurrency=1,
            flow_limits=limits,
            pull_batch_size=16,
        )
        seen = Collector()
        peak = 0

        async def slow(msgs: list[MessageExt]) -> ConsumeResult:
            nonlocal peak
            info = await consumer.running_info()
            peak = max(peak, *(p.cached_msg_count for p in info.mq_table.values()))
            await asyncio.sleep(0.001)  # the slowness under test, not synchronisation
            return await seen(msgs)

        consumer.subscribe("T", "*", slow)
        async with consumer:
            await seen.wait_bodies(len(bodies), timeout_s=60)
        # A queue stops pulling past 40 cached messages; one pull in flight may add 16.
        assert 0 < peak <= 40 + 16
        assert seen.bodies == set(bodies)


async def test_broadcasting_delivers_everything_to_every_member(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        bodies = [f"c{i}".encode() for i in range(50)]
        await produce(cluster.namesrv_addr, "T", bodies)
        members = [Collector(), Collector()]
        consumers = [
            PushConsumer(
                "BG",
                cluster.namesrv_addr,
                broadcasting=True,
                consume_from="first",
                instance_name=f"member{i}",
                offsets_dir=tmp_path / f"offsets{i}",
            )
            for i in range(2)
        ]
        for consumer, collector in zip(consumers, members, strict=True):
            consumer.subscribe("T", "*", collector)
        async with consumers[0], consumers[1]:
            for consumer in consumers:
                # No retry topic for broadcasting, and every queue for each member.
                assert [mq.queue_id for mq in consumer.assignment()] == [0, 1, 2, 3]
            for collector in members:
                await collector.wait_bodies(len(bodies))
        assert all(c.bodies == set(bodies) for c in members)
        # Offsets live in a local file per member, in Java's OffsetSerializeWrapper form.
        table = ResetOffsetBody.from_json((tmp_path / "offsets0" / "BG.json").read_bytes())
        assert sum(table.offset_table.values()) == len(bodies)

        # A restarted member resumes from its file: only new messages arrive.
        await produce(cluster.namesrv_addr, "T", [b"late"])
        again = Collector()
        consumer = PushConsumer(
            "BG",
            cluster.namesrv_addr,
            broadcasting=True,
            consume_from="first",
            instance_name="member0",
            offsets_dir=tmp_path / "offsets0",
        )
        consumer.subscribe("T", "*", again)
        async with consumer:
            await again.wait_bodies(1)
        assert again.bodies == {b"late"}


async def test_failed_broadcast_messages_are_dropped_not_retried(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        await produce(cluster.namesrv_addr, "T", [b"x", b"y"])
        failing = Collector(ConsumeResult.RECONSUME_LATER)
        consumer = PushConsumer(
            "BG",
            cluster.namesrv_addr,
            broadcasting=True,
            consume_from="first",
            offsets_dir=tmp_path / "o",
        )
        consumer.subscribe("T", "*", failing)
        async with consumer:
            await failing.wait_bodies(2)
            await consumer.shutdown()
        assert sorted(m.body for m in failing.messages) == [b"x", b"y"]
        # Nothing was sent back: the group's retry queue stayed empty.
        assert cluster.broker.ctx.store.max_offset("%RETRY%BG", 0) == 0


async def test_a_message_stuck_in_the_listener_is_sent_back_after_the_timeout(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path, message_delay_level=FAST_LEVELS) as cluster:
        await produce(cluster.namesrv_addr, "T", [b"stuck"])
        never = asyncio.Event()
        seen = Collector()

        async def listener(msgs: list[MessageExt]) -> ConsumeResult:
            if msgs[0].body == b"stuck" and msgs[0].reconsume_times == 0:
                await seen(msgs)
                await never.wait()  # a listener call that never returns
            return await seen(msgs)

        consumer = PushConsumer(
            "CG",
            cluster.namesrv_addr,
            consume_from="first",
            consume_timeout_min=0.01,
            rebalance_interval_s=0.5,
        )
        consumer.subscribe("T", "*", listener)
        async with consumer:
            # cleanExpiredMsg: after the consume timeout the message goes back to the
            # broker (delay level 3) and comes again from the retry topic.
            await seen.wait_for(lambda c: any(m.reconsume_times == 1 for m in c.messages))
            # And the stuck original no longer holds back its queue's commit offset.
            stuck = seen.messages[0]
            committed = (await consumer.running_info()).mq_table[stuck.message_queue]
            assert committed.commit_offset == stuck.queue_offset + 1
        assert [m.topic for m in seen.messages] == ["T", "T"]
