"""The broker's statistics through the admin codes mqadmin reads (315, 317, 28, 208).

Messages are sent and pulled with the SDK against a real broker whose clock is a
:class:`ManualClock`; the test moves the clock and takes the snapshots itself
(``Broker.stats_sampler.sample``), so every sum and rate below is exact.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from rocklet.broker.app import Broker
from rocklet.broker.namesrv import NamesrvServer
from rocklet.broker.stats import BrokerStats
from rocklet.broker.stats_sink import MeteredMessageStore, StatsSink
from rocklet.broker.stats_store import StoreStats
from rocklet.broker.tls_config import TlsSettings
from rocklet.client.message import Message
from rocklet.client.producer import Producer
from rocklet.client.pull_consumer import PullConsumer
from rocklet.protocol.bodies.broker_stats import BrokerStatsData, ConsumeStatsList
from rocklet.protocol.bodies.cluster import KVTable
from rocklet.protocol.bodies.stats import ConsumeStats
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.clock import ManualClock
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.cluster import small_broker_config
from tests.store.helpers import message, small_config

TOPIC, GROUP, SENT = "StatsT", "StatsG", 6


@asynccontextmanager
async def stats_broker(tmp_path: Path, clock: ManualClock) -> AsyncIterator[tuple[str, Broker]]:
    tls = TlsSettings()
    namesrv = await NamesrvServer.start("127.0.0.1", 0, tls=tls)
    try:
        config = small_broker_config(tmp_path, f"127.0.0.1:{namesrv.port}")
        broker = await Broker.start(config, host="127.0.0.1", tls=tls, clock=clock)
        try:
            yield f"127.0.0.1:{namesrv.port}", broker
        finally:
            await broker.stop()
    finally:
        await namesrv.stop()


async def ask(conn: Connection, code: RequestCode, **ext: str) -> RemotingCommand:
    return await conn.request(RemotingCommand(code, ext_fields=ext), 5)


async def view(conn: Connection, name: str, key: str) -> BrokerStatsData:
    answer = await ask(conn, RequestCode.VIEW_BROKER_STATS_DATA, statsName=name, statsKey=key)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return BrokerStatsData.from_json(answer.body)


def sample_after(broker: Broker, clock: ManualClock, ms: int) -> None:
    clock.advance(ms)
    assert broker.stats_sampler is not None
    broker.stats_sampler.sample()


async def send_and_pull(namesrv: str) -> tuple[int, int, int]:
    """Send SENT messages, pull them all, then once more past the end of each queue.

    Returns:
        Pulls that found messages, messages pulled, pulls that found none.
    """
    async with Producer("StatsPG", namesrv) as producer:
        for i in range(SENT):
            await producer.send(Message(TOPIC, f"body-{i}".encode()))
    found = pulled = missed = 0
    async with PullConsumer(GROUP, namesrv) as consumer:
        for mq in await consumer.fetch_queues(TOPIC):
            result = await consumer.pull(mq, 0)
            if result.messages:
                found += 1
                pulled += len(result.messages)
            else:
                missed += 1
            await consumer.commit(mq, 0)  # the group's progress: nothing consumed
            end = await consumer.pull(mq, result.next_begin_offset)
            assert not end.messages
            missed += 1
    assert pulled == SENT
    return found, pulled, missed


async def test_sends_and_pulls_show_in_every_stats_answer(tmp_path: Path) -> None:
    clock = ManualClock()
    async with stats_broker(tmp_path, clock) as (namesrv, broker):
        found, _, missed = await send_and_pull(namesrv)
        sample_after(broker, clock, 10_000)
        async with await open_connection("127.0.0.1", broker.port) as conn:
            puts = await view(conn, "TOPIC_PUT_NUMS", TOPIC)
            assert puts.stats_minute.sum == SENT
            assert puts.stats_minute.tps == SENT * 1000 / 10_000
            assert puts.stats_minute.avgpt == 1.0  # one message per send
            assert puts.stats_hour.sum == 0  # no 10-minute snapshot yet
            size = await view(conn, "TOPIC_PUT_SIZE", TOPIC)
            assert (
                size.stats_minute.sum > 0
                and size.stats_minute.avgpt == size.stats_minute.sum / SENT
            )
            gets = await view(conn, "GROUP_GET_NUMS", f"{TOPIC}@{GROUP}")
            assert gets.stats_minute.sum == SENT
            assert gets.stats_minute.avgpt == SENT / found
            # Per queue, as RocketMQ's exporter asks: each queue a pull found messages in.
            latency = [
                await ask(
                    conn,
                    RequestCode.VIEW_BROKER_STATS_DATA,
                    statsName="GROUP_GET_LATENCY",
                    statsKey=f"{queue_id}@{TOPIC}@{GROUP}",
                )
                for queue_id in range(16)
            ]
            kept = [BrokerStatsData.from_json(a.body) for a in latency if a.code == 0]
            assert len(kept) == found
            assert all(k.stats_minute.sum == 0 for k in kept)  # no ms passes on this clock
            broker_puts = await view(conn, "BROKER_PUT_NUMS", "DefaultCluster")
            assert broker_puts.stats_minute.sum == SENT and broker_puts.stats_minute.avgpt == 0.0
            assert (await view(conn, "BROKER_GET_NUMS", "DefaultCluster")).stats_minute.sum == SENT

            for name, key in (("TOPIC_PUT_NUMS", "Nope"), ("NO_SUCH_STATS", TOPIC)):
                missing = await ask(
                    conn, RequestCode.VIEW_BROKER_STATS_DATA, statsName=name, statsKey=key
                )
                assert missing.code == ResponseCode.SYSTEM_ERROR
                assert missing.remark == f"The stats <{name}> <{key}> not exist"

            answer = await ask(conn, RequestCode.GET_BROKER_RUNTIME_INFO)
            table = KVTable.from_json(answer.body).table
            assert table["putMessageTimesTotal"] == str(SENT)
            assert table["msgPutTotalTodayNow"] == str(SENT)
            assert table["msgGetTotalTodayNow"] == str(SENT)
            assert table["putMessageSizeTotal"] == str(size.stats_minute.sum)
            assert table["putMessageAverageSize"] == repr(size.stats_minute.sum / SENT)
            assert table["putMessageFailedTimes"] == "0"
            # Two store samples 10 s apart: every window spans them.
            assert table["putTps"] == " ".join([repr(SENT / 10)] * 3)
            assert table["getTransferedTps"] == " ".join([repr(SENT / 10)] * 3)
            assert table["getFoundTps"] == " ".join([repr(found / 10)] * 3)
            # Counted without metricsPort (this broker has none).
            assert table["getMissTps"] == " ".join([repr(missed / 10)] * 3)
            assert table["getTotalTps"] == " ".join([repr((found + missed) / 10)] * 3)
            for key in (
                "EndTransactionQueueSize",
                "EndTransactionThreadPoolQueueCapacity",
                "dispatchMaxBuffer",
                "getMessageEntireTimeMax",
                "pullThreadPoolQueueCapacity",
                "putLatency99",
                "putLatency999",
                "putMessageDistributeTime",
                "putMessageEntireTimeMax",
                "queryThreadPoolQueueCapacity",
                "remainTransientStoreBufferNumbs",
                "sendThreadPoolQueueCapacity",
            ):
                assert key in table, key
            assert table["remainTransientStoreBufferNumbs"] == "2147483647"
            assert not [k for k in table if k.startswith("scheduleMessageOffset_")]

            stats = await ask(conn, RequestCode.GET_CONSUME_STATS, consumerGroup=GROUP, topic=TOPIC)
            assert ConsumeStats.from_json(stats.body).consume_tps == SENT * 1000 / 10_000

            answer = await ask(conn, RequestCode.GET_BROKER_CONSUME_STATS, isOrder="false")
            listed = ConsumeStatsList.from_json(answer.body)
            assert listed.broker_addr == broker.addr and listed.total_diff == SENT
            ours = [entry[GROUP] for entry in listed.consume_stats_list if GROUP in entry]
            assert len(ours) == 1 and len(ours[0]) == 1
            assert ours[0][0].consume_tps == SENT * 1000 / 10_000
            assert ours[0][0].total_diff == SENT
            ordered = await ask(conn, RequestCode.GET_BROKER_CONSUME_STATS, isOrder="true")
            assert ConsumeStatsList.from_json(ordered.body).total_diff == 0

        # Ten minutes on: the hour window has its first pair of snapshots.
        sample_after(broker, clock, 600_000)
        async with await open_connection("127.0.0.1", broker.port) as conn:
            puts = await view(conn, "TOPIC_PUT_NUMS", TOPIC)
            assert puts.stats_hour.sum == SENT
            assert puts.stats_hour.tps == SENT * 1000 / 600_000


async def test_delayed_send_counts_under_the_schedule_topic(tmp_path: Path) -> None:
    clock = ManualClock()
    async with stats_broker(tmp_path, clock) as (namesrv, broker):
        async with Producer("StatsPG", namesrv) as producer:
            await producer.send(Message("StatsDelay", b"later", delay_level=18))  # 2 h
        sample_after(broker, clock, 10_000)
        async with await open_connection("127.0.0.1", broker.port) as conn:
            scheduled = await view(conn, "TOPIC_PUT_NUMS", "SCHEDULE_TOPIC_XXXX")
            assert scheduled.stats_minute.sum == 1
            missing = await ask(
                conn,
                RequestCode.VIEW_BROKER_STATS_DATA,
                statsName="TOPIC_PUT_NUMS",
                statsKey="StatsDelay",
            )
            assert missing.code == ResponseCode.SYSTEM_ERROR


def test_morning_values_move_at_local_midnight() -> None:
    # One minute before a local midnight (the morning values are recorded then).
    midnight_s = time.mktime((2026, 3, 10, 0, 0, 0, 0, 0, -1))
    start_ms = int(midnight_s * 1000) - 60_000
    stats = StoreStats(start_ms)
    stats.put(3, 300, 0)
    stats.get_transferred += 2
    stats.sample(start_ms + 30_000)
    assert (stats.put_today_morning, stats.get_today_morning) == (0, 0)
    stats.sample(start_ms + 61_000)  # just past midnight
    assert (stats.put_today_morning, stats.get_today_morning) == (3, 2)
    assert (stats.put_yesterday_morning, stats.get_yesterday_morning) == (0, 0)
    stats.put(1, 100, 0)
    stats.sample(start_ms + 60_000 + 86_400_000 + 1_000)  # the next midnight
    assert (stats.put_today_morning, stats.put_yesterday_morning) == (4, 3)
    info = stats.runtime_info()
    assert info["putMessageTimesTotal"] == "4" and info["putMessageAverageSize"] == "100.0"


def test_put_time_figures_report_the_last_complete_minute() -> None:
    stats = StoreStats(0)
    for elapsed in (0, 0, 5, 70):
        stats.put(1, 10, elapsed)
    stats.put_failed_once(12)
    assert stats.runtime_info()["putMessageDistributeTime"].startswith("[<=0ms]:0 ")
    stats.rotate_minute()
    info = stats.runtime_info()
    assert info["putMessageDistributeTime"].startswith(
        "[<=0ms]:2 [0~10ms]:1 [10~50ms]:1 [50~100ms]:1 "
    )
    assert info["putMessageEntireTimeMax"] == "70" and info["putMessageFailedTimes"] == "1"
    # RocketMQ's rank: int(5 * 0.99) = 4 puts passed, which ends in the (11, 12] bucket.
    assert info["putLatency99"] == "12.00" and info["putLatency999"] == "12.00"


class _SteppingClock(ManualClock):
    """Moves its monotonic time on by ``step_ms`` at every read: each timed call lasts it."""

    def __init__(self, step_ms: int) -> None:
        super().__init__()
        self.step_ms = step_ms

    def monotonic_ms(self) -> int:
        self.advance(self.step_ms)
        return super().monotonic_ms()


def test_store_reads_report_their_longest_time(tmp_path: Path) -> None:
    clock = _SteppingClock(step_ms=0)
    store = MeteredMessageStore.open(small_config(tmp_path), clock=clock)
    try:
        assert isinstance(store, MeteredMessageStore)
        stats = StoreStats(clock.now_ms())
        store.sink = StatsSink(BrokerStats("DefaultCluster"), stats)
        assert store.put_messages([message(1, topic=TOPIC)]).ok
        clock.step_ms = 7  # the read's two clock reads are 7 ms apart
        found = store.get_messages(TOPIC, 0, 0, 32)
        assert len(found.buffers) == 1
        clock.step_ms = 3  # a shorter read leaves the maximum alone
        store.get_messages(TOPIC, 0, 5, 32)
    finally:
        store.close()
    assert stats.get_time_max_ms == 7
    assert stats.runtime_info()["getMessageEntireTimeMax"] == "7"


async def test_deleting_a_topic_or_group_drops_its_stats_once_asked_to(tmp_path: Path) -> None:
    """``autoDeleteUnusedStats``: off (RocketMQ's default) keeps them; on drops them."""
    clock = ManualClock()
    async with stats_broker(tmp_path, clock) as (namesrv, broker):
        await send_and_pull(namesrv)
        sample_after(broker, clock, 10_000)
        group_key = f"{TOPIC}@{GROUP}"
        async with await open_connection("127.0.0.1", broker.port) as conn:

            async def known(name: str, key: str) -> bool:
                answer = await ask(
                    conn, RequestCode.VIEW_BROKER_STATS_DATA, statsName=name, statsKey=key
                )
                return answer.code == ResponseCode.SUCCESS

            async def delete_group() -> None:
                answer = await ask(conn, RequestCode.DELETE_SUBSCRIPTIONGROUP, groupName=GROUP)
                assert answer.code == ResponseCode.SUCCESS, answer.remark

            await delete_group()
            assert await known("GROUP_GET_NUMS", group_key)  # kept by default

            update = RemotingCommand(
                RequestCode.UPDATE_BROKER_CONFIG, body=b"autoDeleteUnusedStats=true\n"
            )
            answer = await conn.request(update, 5)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            await delete_group()
            assert not await known("GROUP_GET_NUMS", group_key)
            assert not await known("GROUP_GET_SIZE", group_key)
            assert await known("TOPIC_PUT_NUMS", TOPIC)  # the topic's own stay

            answer = await ask(conn, RequestCode.DELETE_TOPIC_IN_BROKER, topic=TOPIC)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            assert not await known("TOPIC_PUT_NUMS", TOPIC)
            assert not await known("TOPIC_PUT_SIZE", TOPIC)
            assert await known("BROKER_PUT_NUMS", "DefaultCluster")

            # The topic comes back with its next send, counted from zero.
            async with Producer("StatsPG", namesrv) as producer:
                await producer.send(Message(TOPIC, b"again"))
            sample_after(broker, clock, 10_000)
            assert (await view(conn, "TOPIC_PUT_NUMS", TOPIC)).stats_minute.sum == 1


def test_dropping_a_topic_or_group_takes_every_item_keyed_by_it() -> None:
    stats = BrokerStats("DefaultCluster", drop_unused=True)
    for topic in ("T1", "T10"):
        stats.put(topic, 2, 200)
        for group in ("G1", "G10"):
            stats.get(group, topic, 1, 100)
            stats.get_latency(group, topic, 1, 0)
            stats.send_back(group, topic)
    stats.group_deleted("G1")
    keys = {name: set(stats._sets[name]) for name in stats._sets}
    assert keys["GROUP_GET_NUMS"] == keys["GROUP_GET_SIZE"] == {"T1@G10", "T10@G10"}
    assert keys["SNDBCK_PUT_NUMS"] == {"T1@G10", "T10@G10"}
    assert keys["GROUP_GET_LATENCY"] == {"1@T1@G10", "1@T10@G10"}
    stats.topic_deleted("T1")
    keys = {name: set(stats._sets[name]) for name in stats._sets}
    assert keys["TOPIC_PUT_NUMS"] == keys["TOPIC_PUT_SIZE"] == {"T10"}
    assert keys["GROUP_GET_NUMS"] == keys["SNDBCK_PUT_NUMS"] == {"T10@G10"}
    assert keys["GROUP_GET_LATENCY"] == {"1@T10@G10"}
    # Reports after the drop start new items rather than feeding the dropped ones.
    stats.get_latency("G1", "T10", 1, 7)
    stats.get_latency("G1", "T10", 1, 2)
    latency = stats.item("GROUP_GET_LATENCY", "1@T10@G1")
    assert latency is not None and (latency.times, latency.value) == (2, 9)
    stats.get("G1", "T10", 3, 300)
    stats.put("T1", 5, 500)
    item = stats.item("GROUP_GET_NUMS", "T10@G1")
    assert item is not None and item.value == 3
    topic_item = stats.item("TOPIC_PUT_NUMS", "T1")
    assert topic_item is not None and topic_item.value == 5
    assert stats.item("BROKER_PUT_NUMS", "DefaultCluster").value == 2 + 2 + 5  # type: ignore[union-attr]


def test_items_idle_for_a_whole_day_are_forgotten() -> None:
    # Groups that come and go (a name per job) used to leave their items for good.
    stats = BrokerStats("DefaultCluster")
    hour = 3_600_000
    now = 1_000 * hour
    stats.put("Busy", 1, 100)
    stats.get("Gone", "Busy", 1, 100)
    stats.get_latency("Gone", "Busy", 0, 0)
    stats.send_back("Gone", "Busy")
    for _ in range(24):
        stats.put("Busy", 1, 100)  # this topic keeps being written
        stats.sample_day(now)
        now += hour
    # 24 hourly snapshots without a report of Gone's: not yet a whole day.
    assert stats.item("GROUP_GET_NUMS", "Busy@Gone") is not None
    stats.sample_day(now)
    keys = {name: set(stats._sets[name]) for name in stats._sets}
    assert keys["GROUP_GET_NUMS"] == keys["GROUP_GET_SIZE"] == set()
    assert keys["GROUP_GET_LATENCY"] == keys["SNDBCK_PUT_NUMS"] == set()
    assert keys["TOPIC_PUT_NUMS"] == {"Busy"}
    assert keys["BROKER_GET_NUMS"] == {"DefaultCluster"}  # the broker's own stay
    # A report after the drop makes a new item, which the views read.
    stats.get("Gone", "Busy", 3, 300)
    stats.get_latency("Gone", "Busy", 0, 4)
    item = stats.item("GROUP_GET_NUMS", "Busy@Gone")
    assert item is not None and item.value == 3
    latency = stats.item("GROUP_GET_LATENCY", "0@Busy@Gone")
    assert latency is not None and latency.value == 4
