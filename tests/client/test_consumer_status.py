"""What the SDK's consumers answer the admin requests a broker relays to them.

- GET_CONSUMER_STATUS_FROM_CLIENT (221), through INVOKE_BROKER_TO_GET_CONSUMER_STATUS
  (223, :meth:`Admin.consume_status`): the offsets a push or lite pull consumer holds
  in memory for a topic; a group the client does not have answers an empty table.
- GET_CONSUMER_RUNNING_INFO (307) with ``jstackEnable``: the client's threads and
  asyncio tasks, with the stacks of a listener stuck in each; without it, no dump.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from rocklet.client.admin import Admin
from rocklet.client.consume_result import ConsumeResult
from rocklet.client.instance import ClientInstance
from rocklet.client.message import MessageExt
from rocklet.client.pull_consumer import LitePullConsumer
from rocklet.client.push_consumer import PushConsumer
from rocklet.client.stack_dump import stack_dump
from rocklet.protocol.bodies.queue import MessageQueue
from tests.client.consumers import WAIT_S, Collector, produce
from tests.client.test_instance import FakeConsumer
from tests.cluster import running_cluster

BROKER = "broker-a"


def per_queue(messages: list[MessageExt], topic: str) -> dict[MessageQueue, int]:
    """The next offset of each queue after these messages."""
    out: dict[MessageQueue, int] = {}
    for m in messages:
        mq = MessageQueue(topic, BROKER, m.queue_id)
        out[mq] = max(out.get(mq, 0), m.queue_offset + 1)
    return out


def nonzero(table: dict[MessageQueue, int]) -> dict[MessageQueue, int]:
    """A queue with no message yet shows 0 once its first pull came back empty."""
    return {mq: o for mq, o in table.items() if o}


async def test_a_push_consumer_reports_its_offsets(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        bodies = [f"s{i}".encode() for i in range(20)]
        await produce(cluster.namesrv_addr, "StatT", bodies)
        collector = Collector()
        consumer = PushConsumer("StatG", cluster.namesrv_addr, consume_from="first")
        consumer.subscribe("StatT", "*", collector)
        async with consumer, Admin(cluster.namesrv_addr, instance_name="admin") as admin:
            await collector.wait_for(lambda c: len(c.messages) >= len(bodies))
            client_id = consumer.client_id
            assert client_id is not None
            expected = per_queue(collector.messages, "StatT")
            assert sum(expected.values()) == len(bodies)

            table = await admin.consume_status("StatT", "StatG")
            assert set(table) == {client_id}
            assert nonzero(table[client_id]) == expected
            # By client id, and for a topic it holds nothing of.
            assert await admin.consume_status("StatT", "StatG", client_id) == table
            assert await admin.consume_status("StatT", "StatG", "someone-else") == {}
            retry = await admin.consume_status("%RETRY%StatG", "StatG")
            assert set(retry) == {client_id}
            assert all(mq.topic == "%RETRY%StatG" for mq in retry[client_id])


async def test_a_lite_pull_consumer_reports_what_it_polled(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        bodies = [f"l{i}".encode() for i in range(12)]
        await produce(cluster.namesrv_addr, "LiteStatT", bodies)
        consumer = LitePullConsumer("LiteStatG", cluster.namesrv_addr, consume_from="first")
        consumer.subscribe("LiteStatT", "*")
        async with consumer, Admin(cluster.namesrv_addr, instance_name="admin") as admin:
            got: list[MessageExt] = []
            async with asyncio.timeout(WAIT_S):
                while len(got) < len(bodies):
                    got.extend(await consumer.poll(timeout_ms=1000))
            # auto_commit: what poll() returned is in the offset store at once.
            table = await admin.consume_status("LiteStatT", "LiteStatG")
            assert set(table) == {consumer.instance.client_id}
            assert nonzero(table[consumer.instance.client_id]) == per_queue(got, "LiteStatT")


async def test_a_group_the_client_does_not_have_answers_an_empty_table(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        ClientInstance(cluster.namesrv_addr) as inst,
        Admin(cluster.namesrv_addr, instance_name="admin") as admin,
    ):
        await inst.topic_route("TBW102")
        inst.groups.register_consumer("GoneG", FakeConsumer("GoneG"))
        await inst.groups.send_heartbeat()
        # The broker still lists the member; the client no longer has the group.
        inst.groups.unregister_consumer("GoneG")
        assert await admin.consume_status("TBW102", "GoneG") == {inst.client_id: {}}


def listener_stuck_in_a_thread(release: threading.Event, entered: threading.Event) -> None:
    entered.set()
    release.wait(WAIT_S)


async def listener_stuck_in_a_task(release: asyncio.Event, entered: asyncio.Event) -> None:
    entered.set()
    await release.wait()


async def test_running_info_carries_the_stacks_only_when_asked(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        await produce(cluster.namesrv_addr, "DumpSync", [b"s"])
        await produce(cluster.namesrv_addr, "DumpAsync", [b"a"])
        release_thread, in_thread = threading.Event(), threading.Event()
        release_task, in_task = asyncio.Event(), asyncio.Event()

        def plain(_msgs: list[MessageExt]) -> ConsumeResult:
            listener_stuck_in_a_thread(release_thread, in_thread)
            return ConsumeResult.SUCCESS

        async def awaiting(_msgs: list[MessageExt]) -> ConsumeResult:
            await listener_stuck_in_a_task(release_task, in_task)
            return ConsumeResult.SUCCESS

        consumer = PushConsumer("DumpG", cluster.namesrv_addr, consume_from="first")
        consumer.subscribe("DumpSync", "*", plain)
        consumer.subscribe("DumpAsync", "*", awaiting)
        try:
            async with consumer, Admin(cluster.namesrv_addr, instance_name="admin") as admin:
                assert await asyncio.to_thread(in_thread.wait, WAIT_S)
                await asyncio.wait_for(in_task.wait(), WAIT_S)
                assert consumer.client_id is not None
                plain_info = await admin.consumer_running_info("DumpG", consumer.client_id)
                assert plain_info.jstack is None
                info = await admin.consumer_running_info("DumpG", consumer.client_id, jstack=True)
                release_thread.set()
                release_task.set()
        finally:
            release_thread.set()
            release_task.set()
        dump = info.jstack
        assert dump is not None
        assert dump.startswith("Python stacks of pid ")
        blocks = dump.split("\n\n")
        # The listener blocked in a worker thread, under that thread's heading.
        thread = next(b for b in blocks if "in listener_stuck_in_a_thread" in b)
        assert thread.startswith('--- thread "'), thread
        # The one awaiting in a consume task, followed down the await chain.
        task = next(b for b in blocks if "in listener_stuck_in_a_task" in b)
        assert task.startswith('--- asyncio task "rocklet-consume-'), task
        assert "in awaiting" in task and task.rstrip().endswith("awaiting _asyncio.FutureIter")


async def test_the_dump_is_bounded() -> None:
    release = asyncio.Event()
    reached: list[asyncio.Event] = []

    async def nested(depth: int, at_bottom: asyncio.Event) -> None:
        if depth:
            await nested(depth - 1, at_bottom)
        else:
            at_bottom.set()
            await release.wait()

    deep = []
    for i in range(50):
        reached.append(asyncio.Event())
        deep.append(asyncio.create_task(nested(200, reached[-1]), name=f"deep-{i}"))
    try:
        for at_bottom in reached:
            await asyncio.wait_for(at_bottom.wait(), WAIT_S)
        text = await stack_dump(max_frames=10, max_chars=20_000)
        # 201 calls of nested() and Event.wait: all but the 10 innermost left out.
        assert "192 outer frames not shown, the 10 innermost follow" in text
        assert len(text) <= 20_000 + 200
        last = text.rstrip().splitlines()[-1]
        assert last.startswith("[dump cut at 20000 characters: "), last
        assert last.endswith(" more stacks not shown]"), last
    finally:
        release.set()
        await asyncio.gather(*deep)
