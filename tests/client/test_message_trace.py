"""Message trace in the SDK (``trace=True``) against a real broker with the trace topic.

A traced producer writes a ``Pub`` record for each send, a traced push consumer a
``SubBefore`` and a ``SubAfter`` record for each message it hands to its listener (a
traced lite pull consumer both at once, for each message it prefetches);
they are found again by querying the trace topic by key, as ``queryMsgTraceById``
does. Closing a traced client sends the traces still queued, so each test reads them
right after the close, without waiting.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final, cast

import pytest

from rocklet.client import sync
from rocklet.client.admin import Admin
from rocklet.client.consume_result import ConsumeResult
from rocklet.client.lite_pull_consumer import LitePullConsumer
from rocklet.client.message import Message, MessageExt, SendResult
from rocklet.client.producer import Producer
from rocklet.client.push_consumer import PushConsumer
from rocklet.client.trace import TRACE_GROUP_PREFIX
from rocklet.client.trace_dispatch import TraceDispatcher
from rocklet.client.transaction import LocalTransactionState, TransactionProducer
from rocklet.protocol.trace import (
    DEFAULT_TRACE_TOPIC,
    ConsumeReturnType,
    TraceMessageType,
    TraceRecord,
    decode_trace_body,
)
from tests.client.consumers import WAIT_S, Collector
from tests.cluster import Cluster, running_cluster
from tests.ops.test_admin_cli import admin

TOPIC: Final = "Traced"


async def _records(
    cluster: Cluster, key: str, topic: str = DEFAULT_TRACE_TOPIC
) -> list[TraceRecord]:
    """The records found by querying the trace topic by ``key``, about that message."""
    async with Admin(cluster.namesrv_addr) as client:
        found = await client.query_by_key(topic, key)
    records = [r for m in found for r in decode_trace_body(m.body)]
    return [r for r in records if r.msg_id == key or key in r.keys.split()]


def _one(records: list[TraceRecord], kind: str) -> TraceRecord:
    (record,) = [r for r in records if r.type == kind]
    return record


async def test_a_traced_send_and_consume_leave_pub_sub_before_and_sub_after(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path, trace_topic_enable=True) as cluster:
        ns = cluster.namesrv_addr
        async with Producer("TracePG", ns, trace=True) as producer:
            sent = await producer.send(Message(TOPIC, b"hello", tags="TagA", keys=("order-1",)))
            collector = Collector()
            consumer = PushConsumer("TraceCG", ns, consume_from="first", trace=True)
            async with consumer.subscribe(TOPIC, "*", collector):
                await collector.wait_bodies(1)
            consumer_traces = consumer.trace_dispatcher
        producer_traces = producer.trace_dispatcher
        assert producer_traces is not None and consumer_traces is not None
        for traces in (producer_traces, consumer_traces):
            assert traces.sent >= 1 and (traces.failed, traces.dropped) == (0, 0)

        records = await _records(cluster, sent.msg_id)
        assert sorted(r.type for r in records) == ["Pub", "SubAfter", "SubBefore"]
        pub = _one(records, "Pub")
        assert pub == TraceRecord(
            "Pub", sent.msg_id, group="TracePG", timestamp=pub.timestamp, cost_ms=pub.cost_ms,
            success=True, topic=TOPIC, tags="TagA", keys="order-1",
            store_host=f"127.0.0.1:{cluster.broker.port}", offset_msg_id=sent.offset_msg_id,
            region="DefaultRegion", body_length=5, msg_type=TraceMessageType.NORMAL,
        )  # fmt: skip
        before, after = _one(records, "SubBefore"), _one(records, "SubAfter")
        assert (before.group, before.retry_times, before.keys) == ("TraceCG", 0, "order-1")
        assert before.request_id and after.request_id == before.request_id
        assert (after.group, after.success, after.context_code) == (
            "TraceCG", True, ConsumeReturnType.SUCCESS,
        )  # fmt: skip
        assert pub.timestamp <= before.timestamp <= after.timestamp
        # The message's own keys find the traces too (they are among the trace's KEYS).
        assert {r.type for r in await _records(cluster, "order-1")} == {
            "Pub", "SubBefore", "SubAfter",
        }  # fmt: skip

        # rocklet admin queryMsgTraceById shows the send and the consume.
        code, out, err = await admin(cluster, "queryMsgTraceById", "-i", sent.msg_id)
        assert code == 0, err
        rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["Pub"], ["Sub"])]
        assert [(r[0], r[1], r[-1]) for r in rows] == [
            ("Pub", "TracePG", "success"),
            ("Sub", "TraceCG", "success"),
        ], out


async def test_a_failing_listener_gives_sub_after_failed(tmp_path: Path) -> None:
    seen: set[bytes] = set()
    changed = asyncio.Condition()

    async def listener(msgs: list[MessageExt]) -> ConsumeResult | None:
        body = msgs[0].body
        async with changed:
            seen.add(body)
            changed.notify_all()
        if body == b"boom":
            raise RuntimeError("the listener failed")
        return {b"later": ConsumeResult.RECONSUME_LATER, b"ok": ConsumeResult.SUCCESS}.get(body)

    async with running_cluster(tmp_path, trace_topic_enable=True) as cluster:
        ns = cluster.namesrv_addr
        async with Producer("TracePG", ns) as producer:
            sent = {b: await producer.send(Message(TOPIC, b)) for b in (b"boom", b"later", b"none")}
        consumer = PushConsumer("TraceCG", ns, consume_from="first", trace=True)
        subscribed = consumer.subscribe(TOPIC, "*", cast(Any, listener))
        async with subscribed, asyncio.timeout(WAIT_S), changed:
            await changed.wait_for(lambda: len(seen) == 3)
        expected = {
            b"boom": ConsumeReturnType.EXCEPTION,
            b"later": ConsumeReturnType.FAILED,
            b"none": ConsumeReturnType.RETURN_NULL,
        }
        for body, code in expected.items():
            records = await _records(cluster, sent[body].msg_id)
            # The first delivery's records (a redelivery may have begun since).
            after = next(r for r in records if r.type == "SubAfter")
            assert (after.success, after.context_code) == (False, code), body
            assert not any(r.type == "Pub" for r in records)  # its producer was not traced


async def test_without_trace_nothing_is_written_and_a_custom_topic_gets_the_traces(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path, trace_topic_enable=True) as cluster:
        ns = cluster.namesrv_addr
        async with Admin(ns) as client:
            await client.create_topic("AppTraces", queue_nums=1)
        async with Producer("PlainPG", ns) as plain:
            assert plain.trace_dispatcher is None
            quiet = await plain.send(Message(TOPIC, b"quiet"))
            collector = Collector()
            consumer = PushConsumer("PlainCG", ns, consume_from="first")
            assert consumer.trace_dispatcher is None
            async with consumer.subscribe(TOPIC, "*", collector):
                await collector.wait_bodies(1)
        async with Producer("AppPG", ns, trace=True, trace_topic="AppTraces") as traced:
            loud = await traced.send(Message(TOPIC, b"loud"))
        async with Admin(ns) as client:
            stats = await client.topic_stats(DEFAULT_TRACE_TOPIC)
        assert [s.max_offset for s in stats.values()] == [0], stats
        assert await _records(cluster, quiet.msg_id, "AppTraces") == []
        assert [r.type for r in await _records(cluster, loud.msg_id, "AppTraces")] == ["Pub"]


async def test_a_full_queue_drops_and_counts_and_close_sends_what_is_queued(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path, trace_topic_enable=True) as cluster:
        sender = Producer(f"{TRACE_GROUP_PREFIX}-test", cluster.namesrv_addr)
        # A worker that would let a batch gather for a minute: close must not wait it out.
        dispatcher = TraceDispatcher(sender, DEFAULT_TRACE_TOPIC, queue_size=3, poll_s=60)
        contexts = [
            (TraceRecord("SubBefore", f"{i:032X}", group="G", request_id="r", keys="null"),)
            for i in range(5)
        ]
        accepted = [dispatcher.append(c) for c in contexts]  # not started: nothing drains
        assert accepted == [True, True, True, False, False]
        assert (dispatcher.dropped, dispatcher.queued) == (2, 3)
        await dispatcher.start()
        async with asyncio.timeout(WAIT_S):
            await dispatcher.close()  # sends the three at once, in one trace message
        assert (dispatcher.sent, dispatcher.failed, dispatcher.dropped) == (1, 0, 2)
        assert not dispatcher.append(contexts[0])  # closed: counted, not queued
        assert dispatcher.dropped == 3
        for i in range(3):
            assert [r.type for r in await _records(cluster, f"{i:032X}")] == ["SubBefore"]
        for i in (3, 4):
            assert await _records(cluster, f"{i:032X}") == []


async def test_transactions_and_batches_are_traced(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, trace_topic_enable=True) as cluster:
        ns = cluster.namesrv_addr
        async with TransactionProducer(
            "TracedTxPG", ns, check_listener=lambda m: LocalTransactionState.COMMIT, trace=True
        ) as producer:
            outcome = await producer.send_in_transaction(
                Message(TOPIC, b"tx", keys="order-7"), lambda m, a: LocalTransactionState.COMMIT
            )
            batch = await producer.send([Message(TOPIC, b"b1"), Message(TOPIC, b"b2")])
        msg_id = outcome.send_result.msg_id
        records = await _records(cluster, msg_id)
        pub, end = _one(records, "Pub"), _one(records, "EndTransaction")
        assert (pub.msg_type, pub.keys) == (TraceMessageType.TRANS_HALF, "order-7")
        assert (end.transaction_state, end.transaction_id, end.from_transaction_check) == (
            "COMMIT_MESSAGE", msg_id, False,
        )  # fmt: skip
        assert (end.msg_type, end.group, end.store_host) == (
            TraceMessageType.TRANS_COMMIT, "TracedTxPG", f"127.0.0.1:{cluster.broker.port}",
        )  # fmt: skip
        # As in Java, a batch is one Pub record keyed by its msgIds comma-joined.
        (batch_pub,) = await _records(cluster, batch.msg_id)
        assert (batch_pub.type, batch_pub.tags, batch_pub.keys) == ("Pub", "null", "null")


def _blocking_traced_send(namesrv: str) -> SendResult:
    with sync.Producer("SyncTracePG", namesrv, trace=True) as producer:
        sent = producer.send(Message(TOPIC, b"blocking"))
    traces = producer.trace_dispatcher
    assert traces is not None and (traces.sent, traces.failed) == (1, 0)
    return sent


async def test_the_blocking_facade_traces_too(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, trace_topic_enable=True) as cluster:
        sent = await asyncio.to_thread(_blocking_traced_send, cluster.namesrv_addr)
        (pub,) = await _records(cluster, sent.msg_id)
        assert (pub.type, pub.group, pub.success) == ("Pub", "SyncTracePG", True)


def test_a_bad_trace_topic_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="trace topic"):
        Producer("PG", trace=True, trace_topic="no spaces")
    with pytest.raises(ValueError, match="trace topic"):
        PushConsumer("CG", trace=True, trace_topic="")


async def test_a_traced_lite_pull_consumer_records_each_prefetched_message(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path, trace_topic_enable=True) as cluster:
        ns = cluster.namesrv_addr
        async with Producer("LiteTracePG", ns) as producer:
            sent = await producer.send(Message(TOPIC, b"polled", keys=("lite-1",)))
        consumer = LitePullConsumer("LiteTraceCG", ns, consume_from="first", trace=True)
        consumer.subscribe(TOPIC)
        async with consumer:
            polled: list[MessageExt] = []
            async with asyncio.timeout(WAIT_S):
                while not polled:
                    polled = await consumer.poll(timeout_ms=1000)
            traces = consumer.trace_dispatcher
        assert [m.msg_id for m in polled] == [sent.msg_id]
        assert traces is not None and traces.sent >= 1 and traces.dropped == 0
        records = await _records(cluster, sent.msg_id)
        before, after = _one(records, "SubBefore"), _one(records, "SubAfter")
        assert (before.group, before.keys) == ("LiteTraceCG", "lite-1")
        assert (after.request_id, after.success, after.context_code) == (
            before.request_id, True, ConsumeReturnType.SUCCESS,
        )  # fmt: skip
        assert not [r for r in records if r.type == "Pub"]  # the producer was not traced
        assert LitePullConsumer("Off", ns).trace_dispatcher is None
    with pytest.raises(ValueError, match="trace topic"):
        LitePullConsumer("Bad", "127.0.0.1:9876", trace=True, trace_topic="no spaces")
