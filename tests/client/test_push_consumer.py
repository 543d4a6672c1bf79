"""PushConsumer against a real broker: delivery, filtering, batches, offsets, running info."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import shutil
import threading
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from rocklet.client.admin import Admin
from rocklet.client.consume_result import ConsumeResult
from rocklet.client.errors import ClientStateError
from rocklet.client.instance import ClientInstance
from rocklet.client.message import MessageExt
from rocklet.client.push_consumer import ConsumerStatus, PushConsumer
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.command import RemotingCommand
from tests.client.consumers import Collector, produce
from tests.cluster import running_cluster


async def test_concurrent_consumer_gets_every_matching_message(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        bodies = [f"m{i}".encode() for i in range(200)]
        await produce(cluster.namesrv_addr, "T", bodies, tags=lambda i: "A" if i % 2 else "B")
        collector = Collector()
        consumer = PushConsumer("CG", cluster.namesrv_addr, consume_from="first")
        async with consumer.subscribe("T", "A || C", collector):  # starts it
            assert consumer.status is ConsumerStatus.RUNNING
            assert {mq.queue_id for mq in consumer.assignment() if mq.topic == "T"} == {0, 1, 2, 3}
            await collector.wait_bodies(100)
        assert consumer.status.value == ConsumerStatus.CLOSED.value
        # Only tag A arrives (the broker filters by hash, the client by string).
        assert collector.bodies == set(bodies[1::2])
        msg = collector.messages[0]
        assert (msg.topic, msg.tags, msg.broker_name) == ("T", "A", "broker-a")
        assert msg.store_host == ("127.0.0.1", cluster.broker.port)
        assert msg.reconsume_times == 0 and msg.msg_id and msg.store_timestamp > 0
        per_queue: dict[int, list[int]] = {}
        for m in collector.messages:
            per_queue.setdefault(m.queue_id, []).append(m.queue_offset)
        assert all(offsets == sorted(offsets) for offsets in per_queue.values())


class _PullRecorder(ClientInstance):
    """A client instance that notes, in its log, each PULL_MESSAGE it sends."""

    def __init__(self, namesrv: str) -> None:
        super().__init__(namesrv)
        #: ``(event, topic, queue id)``: "pull" here, "listener" from the test's listener.
        self.log: list[tuple[str, str, int]] = []
        self.pulled = asyncio.Event()

    async def invoke(
        self, addr: str, cmd: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        if cmd.code == RequestCode.PULL_MESSAGE:
            fields = cmd.ext_fields
            self.log.append(("pull", fields["topic"], int(fields["queueId"])))
            self.pulled.set()
        return await super().invoke(addr, cmd, timeout_s)

    async def wait_pulls(self, wanted: dict[tuple[str, int], int]) -> None:
        """Wait until the log holds at least ``wanted[(topic, queue)]`` pulls of each."""

        def count(key: tuple[str, int]) -> int:
            return sum(1 for event in self.log if event == ("pull", *key))

        async with asyncio.timeout(30):
            while any(count(key) < n for key, n in wanted.items()):
                self.pulled.clear()
                await self.pulled.wait()

    def events(self, queue_id: int) -> list[str]:
        """What happened to queue ``queue_id`` of topic T, in order."""
        return [event for event, topic, q in self.log if (topic, q) == ("T", queue_id)]


@contextlib.asynccontextmanager
async def _recorded_consumer(
    namesrv: str, **options: Any
) -> AsyncIterator[tuple[_PullRecorder, PushConsumer, Collector]]:
    """A push consumer of topic T whose pulls and listener calls share one log."""
    collector = Collector()
    async with _PullRecorder(namesrv) as instance:

        async def listener(msgs: list[MessageExt]) -> ConsumeResult:
            instance.log.append(("listener", msgs[0].topic, msgs[0].queue_id))
            return await collector(msgs)

        consumer = PushConsumer("CG", namesrv, consume_from="first", instance=instance, **options)
        async with consumer.subscribe("T", "*", listener):
            yield instance, consumer, collector


async def test_the_listener_has_a_pull_s_messages_before_the_next_pull_is_made(
    tmp_path: Path,
) -> None:
    """Found messages reach the listener first; the queue's next pull is made after.

    The next pull is written at about the same time either way; built first, it
    would sit on every delivery's path (the end-to-end latency).
    """
    async with running_cluster(tmp_path) as cluster:
        await produce(cluster.namesrv_addr, "T", [b"warm-up"])
        async with _recorded_consumer(cluster.namesrv_addr) as (instance, consumer, collector):
            await collector.wait_bodies(1)
            # Every queue's first pull, and the warm-up queue's second: all parked.
            wanted = {(mq.topic, mq.queue_id): 1 for mq in consumer.assignment()}
            wanted[("T", collector.messages[0].queue_id)] = 2
            await instance.wait_pulls(wanted)
            instance.log.clear()
            await produce(cluster.namesrv_addr, "T", [b"timed"])
            await collector.wait_bodies(2)
            queue = collector.messages[-1].queue_id
            await instance.wait_pulls({("T", queue): 1})
        assert instance.events(queue)[:2] == ["listener", "pull"]


async def test_with_a_backlog_the_next_pull_is_made_before_the_listener_runs(
    tmp_path: Path,
) -> None:
    """A pull that left messages behind is followed by the next one at once.

    The backlog's next batch is what keeps a draining consumer busy; only a pull that
    caught up, whose successor will be parked at the broker, lets the listener go first.
    """
    async with running_cluster(tmp_path) as cluster:
        await produce(cluster.namesrv_addr, "T", [f"b{i}".encode() for i in range(40)])
        options = {"pull_batch_size": 2, "consume_batch_size": 2}
        async with _recorded_consumer(cluster.namesrv_addr, **options) as (instance, _, collector):
            await collector.wait_bodies(40)
        # A queue's first pull found 2 of its messages and left the rest: the second pull
        # precedes the listener. (The 40 sends race the topic's creation, so how they
        # spread over the queues varies; a queue that got only 2 is caught up at once.)
        counts = collections.Counter(m.queue_id for m in collector.messages)
        backlogged = [q for q, n in counts.items() if n > 2]
        assert backlogged, counts
        for queue in backlogged:
            events = instance.events(queue)
            assert events[:3] == ["pull", "pull", "listener"], (queue, counts, events)


async def test_plain_listener_runs_in_threads_with_batches(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        bodies = [f"b{i}".encode() for i in range(120)]
        await produce(cluster.namesrv_addr, "T", bodies)
        seen: list[MessageExt] = []
        threads: set[str] = set()
        sizes: list[int] = []
        lock = threading.Lock()
        done = threading.Event()

        def listener(msgs: list[MessageExt]) -> ConsumeResult:
            with lock:
                threads.add(threading.current_thread().name)
                sizes.append(len(msgs))
                seen.extend(msgs)
                if len({m.body for m in seen}) == len(bodies):
                    done.set()
            return ConsumeResult.SUCCESS

        consumer = PushConsumer(
            "CG", cluster.namesrv_addr, consume_from="first", consume_batch_size=8
        )
        consumer.subscribe("T", "*", listener)
        async with consumer:
            await _wait_thread_event(done)
            info = await consumer.running_info()
        assert threading.main_thread().name not in threads
        assert max(sizes) <= 8 and max(sizes) > 1
        assert info.properties["consumeMessageBatchMaxSize"] == "8"
        assert {mq.topic for mq in info.mq_table} == {"T", "%RETRY%CG"}
        assert info.status_table["T"].consume_failed_msgs == 0
        assert {s.topic for s in info.subscription_set} == {"T", "%RETRY%CG"}


def _replace_dir_with_file(path: Path) -> None:
    # The consumer commits from a worker thread meanwhile and may recreate the
    # directory between our two steps: try again until the file is in place.
    for _ in range(1000):
        try:
            shutil.rmtree(path, ignore_errors=True)
            path.write_text("not a directory")
            return
        except OSError:
            continue
    raise AssertionError(f"could not replace {path} with a file")


def _has_body(collector: Collector, body: bytes) -> bool:
    return body in collector.bodies


async def _wait_thread_event(event: threading.Event, timeout_s: float = 30.0) -> None:
    assert await asyncio.to_thread(event.wait, timeout_s), "listener never saw everything"


async def test_offsets_committed_at_shutdown_are_where_the_next_member_starts(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path) as cluster:
        first = [f"a{i}".encode() for i in range(60)]
        await produce(cluster.namesrv_addr, "T", first)
        collector = Collector()
        consumer = PushConsumer("CG", cluster.namesrv_addr, consume_from="first")
        async with consumer.subscribe("T", "*", collector):  # starts it
            await collector.wait_bodies(len(first))
        # Shutdown unregistered the member and committed where each queue stopped.
        assert cluster.broker.ctx.clients.consumer_group("CG") is None
        offsets = cluster.broker.ctx.offsets
        assert sum(offsets.offsets_of("CG", "T").values()) == len(first)

        second = [f"b{i}".encode() for i in range(40)]
        await produce(cluster.namesrv_addr, "T", second)
        again = Collector()
        consumer = PushConsumer("CG", cluster.namesrv_addr, consume_from="first")
        async with consumer.subscribe("T", "*", again):  # starts it
            await again.wait_bodies(len(second))
        assert again.bodies == set(second)  # nothing of the first run came back


async def test_lifecycle_errors(tmp_path: Path) -> None:
    consumer = PushConsumer("CG", "127.0.0.1:1")
    with pytest.raises(ClientStateError):
        await consumer.start()  # nothing subscribed
    with pytest.raises(ValueError):
        PushConsumer("CG", consume_batch_size=0)
    with pytest.raises(ValueError):
        PushConsumer("CG", allocate="nope")
    with pytest.raises(ValueError, match="consume_from"):
        PushConsumer("CG", consume_from="earliest")
    with pytest.raises(TypeError):
        PushConsumer("CG", consume_batch=8)  # a misspelt option fails at once
    configured = PushConsumer("CG", orderly=True, consume_batch_size=4).config
    assert (configured.group, configured.orderly, configured.consume_batch_size) == ("CG", True, 4)
    with pytest.raises(AttributeError):
        configured.orderly = False  # type: ignore[misc]  # settings are frozen
    await consumer.shutdown()
    await consumer.shutdown()  # idempotent
    with pytest.raises(ClientStateError):
        consumer.subscribe("T", "*", Collector())


async def test_admin_sees_running_info_and_resets_offsets(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        bodies = [f"r{i}".encode() for i in range(30)]
        await produce(cluster.namesrv_addr, "T", bodies)
        collector = Collector()
        consumer = PushConsumer("CG", cluster.namesrv_addr, consume_from="first")
        consumer.subscribe("T", "*", collector)
        async with consumer, Admin(cluster.namesrv_addr, instance_name="admin") as admin:
            await collector.wait_for(lambda c: len(c.messages) >= len(bodies))
            assert consumer.client_id is not None
            # GET_CONSUMER_RUNNING_INFO: admin -> broker -> this consumer -> back.
            info = await admin.consumer_running_info("CG", consumer.client_id)
            snap = info.mq_table[MessageQueue("T", "broker-a", 0)]
            assert snap.cached_msg_count == 0 and not snap.dropped
            committed = sum(p.commit_offset for mq, p in info.mq_table.items() if mq.topic == "T")
            assert committed == len(bodies)
            assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"

            # INVOKE_BROKER_TO_RESET_OFFSET: the broker tells the consumer to rewind.
            table = await admin.reset_offset_by_time("CG", "T", 0)
            assert set(table.values()) == {0}
            await collector.wait_for(lambda c: len(c.messages) >= 2 * len(bodies))
        again = collector.messages[len(bodies) :]
        assert sorted(m.body for m in again) == sorted(bodies)


async def test_background_failures_reach_on_error_or_the_next_call(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        await produce(cluster.namesrv_addr, "T", [b"x"])
        seen: list[BaseException] = []
        failed = asyncio.Event()

        def on_error(exc: BaseException) -> None:
            seen.append(exc)
            failed.set()

        for n, callback in enumerate((on_error, None)):
            offsets_dir = tmp_path / f"offsets{n}"
            collector = Collector()
            consumer = PushConsumer(
                "BG",
                cluster.namesrv_addr,
                broadcasting=True,
                consume_from="first",
                offsets_dir=offsets_dir,
                persist_interval_s=0.05,
                on_error=callback,
            )
            consumer.subscribe("T", "*", collector)
            await consumer.start()
            await collector.wait_bodies(1)
            # Break the offset store under the running consumer: a file where its
            # directory should be makes every later commit fail.
            _replace_dir_with_file(offsets_dir)
            # A new message moves an offset, so the next commit has to write the file.
            late = f"y{n}".encode()
            await produce(cluster.namesrv_addr, "T", [late])
            await collector.wait_for(partial(_has_body, body=late))
            if callback is not None:
                await asyncio.wait_for(failed.wait(), 30)
                await consumer.shutdown()  # reported already: shutdown does not raise
                assert isinstance(seen[0], OSError)
            else:
                # No callback: the first unreported failure is raised by the next call.
                with pytest.raises(OSError):
                    await consumer.shutdown()
                assert consumer.status.value == ConsumerStatus.CLOSED.value
