"""LitePullConsumer against a real broker: refused SQL92 selectors and max_poll_messages.

A refused selector fails the start (as for the push consumer); one the prefetch meets
later reaches ``on_error`` or the next ``poll()`` once per queue, and the queue recovers
when the broker is reconfigured. ``poll()`` never returns more than
``max_poll_messages``, and offsets move only past what it returned.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocklet.client import lite_pull_consumer
from rocklet.client.consumer_status import ConsumerStatus
from rocklet.client.errors import (
    BrokerSystemError,
    ConnectionClosedError,
    NoRouteError,
    SubscriptionParseFailedError,
    SystemBusyError,
)
from rocklet.client.lite_pull_consumer import LitePullConsumer
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from rocklet.client.push_consumer import PushConsumer
from rocklet.client.selector import SQL92, MessageSelector
from rocklet.client.selector_check import is_selector_refusal
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.dial import open_connection
from tests.client.consumers import WAIT_S, Collector
from tests.cluster import Cluster, running_cluster
from tests.logcapture import PlainLog, plain_sdk_log

BROKEN = MessageSelector(SQL92, "a = 1 ANDD b")  # bypasses by_sql's client-side compile


@pytest.fixture(autouse=True)
def _quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    # Refused pulls are retried after 3 s; the tests wait for several retries.
    monkeypatch.setattr(lite_pull_consumer, "_PULL_ERROR_WAIT_S", 0.2)


async def _send(cluster: Cluster, topic: str, values: list[str]) -> None:
    """One message per value, with property ``a`` set to it (auto-creates ``topic``)."""
    async with Producer("PG_LITE", cluster.namesrv_addr) as producer:
        for i, value in enumerate(values):
            await producer.send(Message(topic, f"{value}-{i}".encode(), properties={"a": value}))


async def _set_property_filter(cluster: Cluster, enabled: bool) -> None:
    """Reconfigure the running broker as an operator would (UPDATE_BROKER_CONFIG)."""
    body = f"enablePropertyFilter={'true' if enabled else 'false'}\n".encode()
    async with await open_connection("127.0.0.1", cluster.broker.port) as conn:
        answer = await conn.request(RemotingCommand(RequestCode.UPDATE_BROKER_CONFIG, body=body), 5)
    assert answer.code == ResponseCode.SUCCESS, answer.remark


def _retries_of(log: PlainLog, queue_id: int) -> int:
    return len(log.matching("prefetch failed; retrying", f"queue_id={queue_id})"))


async def test_start_fails_on_a_refused_selector(tmp_path: Path) -> None:
    async with running_cluster(tmp_path / "plain") as cluster:
        await _send(cluster, "SqlT", ["1"])
        consumer = LitePullConsumer("LITE_SQL_OFF", cluster.namesrv_addr, consume_from="first")
        consumer.subscribe("SqlT", MessageSelector.by_sql("a = 1"))
        with pytest.raises(BrokerSystemError, match="filter message by SQL92") as refused:
            await consumer.start()
        assert refused.value.code == ResponseCode.SYSTEM_ERROR
        assert consumer.status is ConsumerStatus.CLOSED
        # Tag subscriptions are not asked about: they start on the same broker.
        plain = LitePullConsumer("LITE_TAG", cluster.namesrv_addr)
        plain.subscribe("SqlT", "*")
        async with plain:
            assert plain.status is ConsumerStatus.RUNNING

    async with running_cluster(tmp_path / "filtering", enable_property_filter=True) as cluster:
        await _send(cluster, "SqlT", ["1", "2", "1"])
        broken = LitePullConsumer("LITE_SQL_BAD", cluster.namesrv_addr, consume_from="first")
        broken.subscribe("SqlT", BROKEN)
        with pytest.raises(SubscriptionParseFailedError):
            await broken.start()
        assert broken.status is ConsumerStatus.CLOSED
        # The push consumer asks the same way (one shared check).
        push = PushConsumer("PUSH_SQL_BAD", cluster.namesrv_addr)
        push.subscribe("SqlT", BROKEN, Collector())
        with pytest.raises(SubscriptionParseFailedError):
            await push.start()
        assert push.status is ConsumerStatus.CLOSED
        # A selector the broker takes starts and gets what it selects.
        good = LitePullConsumer("LITE_SQL_OK", cluster.namesrv_addr, consume_from="first")
        good.subscribe("SqlT", MessageSelector.by_sql("a = 1"))
        async with good:
            got: list[MessageExt] = []
            async with asyncio.timeout(WAIT_S):
                while len(got) < 2:
                    got.extend(await good.poll(timeout_ms=1000))
            assert sorted(m.body for m in got) == [b"1-0", b"1-2"]


async def test_a_refusal_met_by_the_prefetch_reaches_on_error_once_per_queue(
    tmp_path: Path,
) -> None:
    async with running_cluster(tmp_path) as cluster:
        errors: list[BaseException] = []
        reported = asyncio.Event()

        def on_error(exc: BaseException) -> None:
            errors.append(exc)
            reported.set()

        consumer = LitePullConsumer(
            "LITE_SQL_LATE",
            cluster.namesrv_addr,
            consume_from="first",
            rebalance_interval_s=0.2,
            on_error=on_error,
        )
        consumer.subscribe("Late", MessageSelector.by_sql("a = 1"))
        with plain_sdk_log("rocklet.client") as log:
            # The topic does not exist yet: nothing to ask at start, so it starts; the
            # pulls meet the refusal once the topic appears.
            async with consumer:
                await _send(cluster, "Late", ["1", "2", "1", "2", "1"])
                async with asyncio.timeout(WAIT_S):
                    await reported.wait()
                queues = {mq.queue_id for mq in await consumer.fetch_queues("Late")}
                assert len(queues) == 4
                # Several refused retries of every queue of the topic...
                await log.wait_for(lambda lg: all(_retries_of(lg, q) >= 3 for q in queues), WAIT_S)
                # ...reported once per queue, not once per retry.
                assert {mq.queue_id for mq in consumer.assignment()} == queues
                assert len(errors) == len(queues)
                assert all(isinstance(e, BrokerSystemError) for e in errors)
                assert "does not support consumer to filter message by SQL92" in str(errors[0])
                assert await consumer.poll(timeout_ms=10) == []  # handed to on_error

                # The operator turns filtering on: the retries recover by themselves.
                await _set_property_filter(cluster, True)
                got: list[MessageExt] = []
                async with asyncio.timeout(WAIT_S):
                    while len(got) < 3:
                        got.extend(await consumer.poll(timeout_ms=1000))
                assert sorted(m.body for m in got) == [b"1-0", b"1-2", b"1-4"]
                assert len(errors) == len(queues)


async def test_a_parse_failure_met_by_the_prefetch_is_raised_by_poll_once(
    tmp_path: Path,
) -> None:
    # One queue per auto-created topic, so exactly one refusal is to be reported.
    async with running_cluster(
        tmp_path, enable_property_filter=True, default_topic_queue_nums=1
    ) as cluster:
        consumer = LitePullConsumer(
            "LITE_SQL_PARSE", cluster.namesrv_addr, consume_from="first", rebalance_interval_s=0.2
        )
        consumer.subscribe("Late", BROKEN)
        with plain_sdk_log("rocklet.client") as log:
            async with consumer:
                await _send(cluster, "Late", ["1"])
                with pytest.raises(SubscriptionParseFailedError):
                    async with asyncio.timeout(WAIT_S):
                        while True:
                            await consumer.poll(timeout_ms=200)
                [mq] = consumer.assignment()
                seen = _retries_of(log, mq.queue_id)
                await log.wait_for(lambda lg: _retries_of(lg, mq.queue_id) >= seen + 3, WAIT_S)
                # Still refused on every retry, but raised only the once.
                assert await consumer.poll(timeout_ms=10) == []
            # Nothing left unreported: the shutdown above did not raise either.
            assert consumer.status is ConsumerStatus.CLOSED


def test_max_poll_messages_must_be_positive() -> None:
    for bad in (0, -1):
        with pytest.raises(ValueError, match="max_poll_messages"):
            LitePullConsumer("LITE_MAX", "127.0.0.1:9876", max_poll_messages=bad)
    assert LitePullConsumer("LITE_MAX", "127.0.0.1:9876", max_poll_messages=1)


async def test_poll_returns_at_most_max_poll_messages(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        async with Producer("PG_LITE_MAX", cluster.namesrv_addr) as producer:
            sent = [
                await producer.send_orderly(Message("T", f"m{i}".encode()), "one-queue")
                for i in range(30)
            ]
        mq = sent[0].message_queue
        assert {s.message_queue for s in sent} == {mq}
        consumer = LitePullConsumer(
            "LITE_MAX",
            cluster.namesrv_addr,
            consume_from="first",
            max_poll_messages=10,
            auto_commit_interval_s=3600,  # commits only when asked (and at shutdown)
        )
        consumer.assign([mq])
        async with consumer:
            for start in (0, 10, 20):
                # All 30 arrive in one prefetched batch; each poll hands out 10 of them.
                got = await consumer.poll(timeout_ms=int(WAIT_S * 1000))
                assert [m.queue_offset for m in got] == list(range(start, start + 10))
                assert [m.body for m in got] == [f"m{i}".encode() for i in range(start, start + 10)]
                # Consumed (and committed) only past what poll() returned.
                assert consumer.consume_offsets("T") == {mq: start + 10}
                await consumer.commit()
                assert await consumer.committed(mq) == start + 10
            assert await consumer.poll(timeout_ms=50) == []
        assert cluster.broker.ctx.offsets.query("LITE_MAX", "T", mq.queue_id) == 30


def test_only_a_refusal_of_the_selector_itself_counts_as_permanent() -> None:
    sql = MessageSelector.by_sql("a = 1")
    off = BrokerSystemError("The broker does not support consumer to filter message by SQL92")
    assert is_selector_refusal(off, sql)
    # Spelled a little differently by another broker: still the same refusal.
    assert is_selector_refusal(
        BrokerSystemError("the broker  DOES NOT support consumer to filter message by SQL92"), sql
    )
    assert is_selector_refusal(SubscriptionParseFailedError("parse failed"), sql)
    # A passing store failure is SYSTEM_ERROR too; tag pulls are never refused so.
    assert not is_selector_refusal(BrokerSystemError("store is busy"), sql)
    assert not is_selector_refusal(off, MessageSelector.by_tag("A"))
    assert not is_selector_refusal(SystemBusyError("busy"), sql)
    assert not is_selector_refusal(NoRouteError("T"), sql)
    assert not is_selector_refusal(ConnectionClosedError("gone"), sql)
