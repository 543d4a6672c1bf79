"""The blocking facade, driven from a plain thread against a real broker.

The broker runs on the test's event loop, so each scenario runs in a worker thread
(``asyncio.to_thread``), the way a non-async program would call the SDK.
"""

from __future__ import annotations

import asyncio
import gc
import queue
import threading
from pathlib import Path
from typing import Any

import pytest

from rocklet.client import sync
from rocklet.client.consume_result import ConsumeResult
from rocklet.client.errors import InvalidMessageError
from rocklet.client.message import Message, MessageExt, SendStatus
from rocklet.protocol.bodies.queue import MessageQueue
from tests.client.producer_support import WAIT_S, long_poll, stored_all
from tests.cluster import running_cluster


def produce_and_administer(namesrv: str) -> dict[str, Any]:
    with sync.Admin(namesrv) as admin, sync.Producer("PG_SYNC", namesrv) as producer:
        admin.create_topic("SyncT", queue_nums=2)
        single = producer.send(Message("SyncT", b"one", keys="k1"))
        batch = producer.send([Message("SyncT", b"b%d" % i) for i in range(3)])
        ordered = [producer.send_orderly(Message("SyncT", b"o%d" % i), "same") for i in range(3)]
        producer.send_oneway(Message("SyncT", b"oneway"))
        with pytest.raises(InvalidMessageError):
            producer.send(Message("", b"x"))
        found = admin.query_by_key("SyncT", "k1")
        viewed = admin.view_message(single.offset_msg_id)
        return {
            "single": single,
            "batch": batch,
            "queues": {r.message_queue.queue_id for r in ordered},
            "found": [m.body for m in found],
            "viewed": viewed.body,
            "topics": admin.list_topics(),
        }


async def test_blocking_producer_and_admin(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        out = await asyncio.to_thread(produce_and_administer, cluster.namesrv_addr)
        assert out["single"].status is SendStatus.SEND_OK
        assert len(out["batch"].msg_id.split(",")) == 3
        assert len(out["queues"]) == 1
        assert out["found"] == [b"one"] and out["viewed"] == b"one"
        assert "SyncT" in out["topics"]
        assert len(stored_all(cluster.broker, "SyncT", 2)) >= 7


def transact(namesrv: str) -> tuple[Any, list[str]]:
    threads: list[str] = []

    def local(msg: Message, arg: Any) -> sync.LocalTransactionState:
        threads.append(threading.current_thread().name)
        return sync.LocalTransactionState.COMMIT

    with sync.TransactionProducer(
        "PG_SYNC_TX", namesrv, check_listener=lambda m: sync.LocalTransactionState.ROLLBACK
    ) as producer:
        return producer.send_in_transaction(Message("SyncTx", b"tx"), local, None), threads


async def test_blocking_transaction_producer(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        outcome, threads = await asyncio.to_thread(transact, cluster.namesrv_addr)
        assert outcome.local_state is sync.LocalTransactionState.COMMIT and threads
        # The commit is a oneway END_TRANSACTION: wait for the broker to deliver it.
        mq = outcome.send_result.message_queue
        (got,) = await long_poll(cluster.broker.port, "SyncTx", mq.queue_id)
        assert got.body == b"tx"


def consume(namesrv: str, expected: int) -> list[bytes]:
    got: queue.Queue[bytes] = queue.Queue()

    def listener(msgs: list[MessageExt]) -> ConsumeResult:
        for msg in msgs:
            got.put(msg.body)
        return ConsumeResult.SUCCESS

    with sync.Producer("PG_SYNC_C", namesrv) as producer:
        for i in range(expected):
            producer.send(Message("SyncPush", b"p%d" % i))
    consumer = sync.PushConsumer("CG_SYNC", namesrv, consume_from="first")
    with consumer.subscribe("SyncPush", "*", listener):  # entering starts it
        bodies = [got.get(timeout=WAIT_S) for _ in range(expected)]
        consumer.check_errors()
        return bodies


async def test_blocking_push_consumer_with_a_plain_listener(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        bodies = await asyncio.to_thread(consume, cluster.namesrv_addr, 5)
        assert sorted(bodies) == [b"p%d" % i for i in range(5)]


def pull_both_ways(namesrv: str) -> tuple[list[bytes], list[bytes]]:
    with sync.Admin(namesrv) as admin, sync.Producer("PG_SYNC_P", namesrv) as producer:
        admin.create_topic("SyncPull", queue_nums=1)
        for i in range(4):
            producer.send(Message("SyncPull", b"m%d" % i))
    mq = MessageQueue("SyncPull", "broker-a", 0)
    with sync.PullConsumer("CG_SYNC_PULL", namesrv) as puller:
        pulled = [m.body for m in puller.pull(mq, 0, 32).messages]
    lite = sync.LitePullConsumer("CG_SYNC_LITE", namesrv, consume_from="first")
    lite.assign([mq])
    with lite:
        polled: list[bytes] = []
        while len(polled) < 4:
            polled += [m.body for m in lite.poll(int(WAIT_S * 1000))]
    return pulled, polled


async def test_blocking_pull_and_lite_pull_consumers(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        pulled, polled = await asyncio.to_thread(pull_both_ways, cluster.namesrv_addr)
        assert pulled == polled == [b"m%d" % i for i in range(4)]


def test_the_loop_thread_stops_with_the_last_object() -> None:
    admin = sync.Admin("127.0.0.1:1")
    producer = sync.Producer("PG_LIFE", "127.0.0.1:1")
    assert "rocklet-sync-loop" in {t.name for t in threading.enumerate()}
    producer.close()
    assert "rocklet-sync-loop" in {t.name for t in threading.enumerate()}
    admin.close()
    admin.close()
    assert "rocklet-sync-loop" not in {t.name for t in threading.enumerate()}


def _sync_loop_thread() -> threading.Thread:
    runtime = sync._Runtime._current
    assert runtime is not None
    return runtime._thread


def drop_unclosed(namesrv: str, kind: str) -> tuple[list[str], bool]:
    """Make a started facade object, drop it unclosed; the warnings, and the loop's end."""
    with pytest.warns(ResourceWarning) as caught:
        if kind == "producer":
            obj: Any = sync.Producer("PG_DROPPED", namesrv)
            obj.start()
            obj.send(Message("Dropped", b"x"))
        elif kind == "push":
            obj = sync.PushConsumer("CG_DROPPED", namesrv).subscribe(
                "Dropped", "*", lambda m: ConsumeResult.SUCCESS
            )
            obj.start()
        elif kind == "lite":
            obj = sync.LitePullConsumer("CG_LITE_DROPPED", namesrv)
            obj.subscribe("Dropped", "*")
            obj.start()
        else:
            obj = sync.Admin(namesrv)
            obj.start()
        thread = _sync_loop_thread()
        del obj
        gc.collect()
    thread.join(WAIT_S)
    return [str(w.message) for w in caught], thread.is_alive()


@pytest.mark.parametrize("kind", ["producer", "push", "lite", "admin"])
async def test_a_facade_dropped_unclosed_warns_and_closes(tmp_path: Path, kind: str) -> None:
    # Dropped unclosed, a started object used to keep its connections, heartbeats and
    # the loop thread for the life of the process, without a word.
    async with running_cluster(tmp_path) as cluster:
        said, alive = await asyncio.to_thread(drop_unclosed, cluster.namesrv_addr, kind)
        assert len(said) == 1 and said[0].startswith("unclosed ") and "closing it now" in said[0]
        assert not alive
        if kind == "push":
            # It left its group: the broker no longer lists it.
            assert cluster.broker.ctx.clients.consumer_group("CG_DROPPED") is None
