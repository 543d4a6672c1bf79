"""Feeding the broker's statistics from the hot paths, and sampling them on a timer.

The broker always runs a :class:`StatsSink`. It is the broker's
:class:`~rocklet.broker.metrics.MetricsSink` (the pull processor reports each answered
pull to it) and the store's put hook (:class:`MeteredMessageStore` reports each store
call), and it passes every report on to the Prometheus sink when ``metricsPort`` is set.
Each report is one call per request or batch, never per message.

A put is filed as RocketMQ's processors file it, judged from the batch's first message:

- a send (or a delayed message coming due) counts under
  the topic it is stored in (``SCHEDULE_TOPIC_XXXX`` while a delayed message waits,
  ``RMQ_SYS_TRANS_HALF_TOPIC`` for a half message) and in ``BROKER_PUT_NUMS``;
- a message a consumer sent back (a retry or dead-letter topic with ``RETRY_TOPIC``
  set, not yet delayed) counts in ``SNDBCK_PUT_NUMS`` under ``<original topic>@<group>``
  and, when it is delayed, under ``SCHEDULE_TOPIC_XXXX``, but not in the broker total;
- a delayed message coming due also counts as pulled by ``SCHEDULE_CONSUMER`` from
  ``SCHEDULE_TOPIC_XXXX``, as RocketMQ's delay service reports it.

A committed transaction's message and the broker's own transaction records count
only in the store totals, as in RocketMQ. Every successful store call adds to the
store totals behind the TPS windows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from typing import Final

from rocklet.broker.metrics import NULL_METRICS, MetricsSink
from rocklet.broker.stats import DAY_STEP_MS, HOUR_STEP_MS, MINUTE_STEP_MS, BrokerStats
from rocklet.broker.stats_store import StoreStats
from rocklet.broker.transaction_check import CHECK_MAX_TIME_TOPIC
from rocklet.protocol.message import TRANSACTION_MASK, SysFlag
from rocklet.protocol.names import DLQ_PREFIX, RETRY_PREFIX, SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC
from rocklet.protocol.properties import Prop
from rocklet.store._raw_batch import RawBatch
from rocklet.store.message_store import MessageStore
from rocklet.store.results import GetResult, MessageToStore, PutResult
from rocklet.transport.clock import Clock

__all__ = ["SCHEDULE_CONSUMER_GROUP", "MeteredMessageStore", "StatsSampler", "StatsSink"]

#: ``MixAll.SCHEDULE_CONSUMER_GROUP``: who "pulls" delayed messages when they come due.
SCHEDULE_CONSUMER_GROUP: Final = "SCHEDULE_CONSUMER"
_COMMIT: Final = int(SysFlag.TRANSACTION_COMMIT)
#: Records the broker writes for itself (transaction op records and check-back limits).
_BROKER_WRITES: Final = frozenset({TRANS_OP_HALF_TOPIC, CHECK_MAX_TIME_TOPIC})
#: Seconds between sampler ticks (``StoreStatsService``'s sampling period).
SAMPLE_INTERVAL_S: Final = 1.0
#: How often the put-time distribution is rotated (``printTPSInterval``).
_ROTATE_MS: Final = 60_000


def _delayed(msg: MessageToStore) -> bool:
    """Whether the store parks ``msg`` in the schedule topic (see ``store._encoder``)."""
    level = msg.properties.get(Prop.DELAY)
    if not level or msg.delay_done or msg.topic == SCHEDULE_TOPIC:
        return False
    if msg.sys_flag & TRANSACTION_MASK:
        return False
    try:
        return int(level) > 0
    except ValueError:
        return False


class StatsSink:
    """The always-on metrics sink: fills the statistics, then tells ``inner``.

    Args:
        broker: Per-key statistics.
        store: Store-wide totals.
        inner: The Prometheus sink, or the null sink when metrics are off.
    """

    def __init__(
        self, broker: BrokerStats, store: StoreStats, inner: MetricsSink = NULL_METRICS
    ) -> None:
        self.broker = broker
        self.store = store
        self._inner = inner

    def on_put(self, topic: str, count: int, nbytes: int) -> None:
        """Messages written outside :class:`MeteredMessageStore`: counted as sends."""
        self.broker.put(topic, count, nbytes)
        self._inner.on_put(topic, count, nbytes)

    def on_stored(self, first: MessageToStore, result: PutResult, elapsed_ms: int) -> None:
        """A ``put_messages`` call returned (``first``: the batch's first message)."""
        if not result.ok:
            self.store.put_failed_once(elapsed_ms)
            return
        count, nbytes = result.msg_count, result.wrote_bytes
        self.store.put(count, nbytes, elapsed_ms)
        topic = first.topic
        if (
            topic[0] == "%"
            or first.sys_flag & TRANSACTION_MASK
            or topic in _BROKER_WRITES
            or Prop.DELAY in first.properties
        ):
            self._special_put(first, count, nbytes)  # rare: retries, delays, transactions
        else:
            self.broker.put(topic, count, nbytes)
        self._inner.on_put(topic, count, nbytes)

    def _special_put(self, first: MessageToStore, count: int, nbytes: int) -> None:
        topic, stats = first.topic, self.broker
        if topic in _BROKER_WRITES or first.sys_flag & TRANSACTION_MASK == _COMMIT:
            return  # the broker's own records and committed transactions: store totals only
        delayed = _delayed(first)
        original = first.properties.get(Prop.RETRY_TOPIC)
        sent_back = topic.startswith((RETRY_PREFIX, DLQ_PREFIX)) and not first.delay_done
        if original is not None and sent_back:
            group = topic.removeprefix(RETRY_PREFIX if topic[1] == "R" else DLQ_PREFIX)
            stats.send_back(group, original)
            if delayed:
                stats.put_topic_only(SCHEDULE_TOPIC, count, nbytes)
            return
        stats.put(SCHEDULE_TOPIC if delayed else topic, count, nbytes)
        if first.delay_done:
            stats.get(SCHEDULE_CONSUMER_GROUP, SCHEDULE_TOPIC, count, nbytes)

    def on_stored_batch(self, topic: str, result: PutResult, elapsed_ms: int) -> None:
        """A ``put_raw_batch`` call returned (batches are plain sends)."""
        if not result.ok:
            self.store.put_failed_once(elapsed_ms)
            return
        count, nbytes = result.msg_count, result.wrote_bytes
        self.store.put(count, nbytes, elapsed_ms)
        self.broker.put(topic, count, nbytes)
        self._inner.on_put(topic, count, nbytes)

    def on_get(
        self, group: str, topic: str, queue_id: int, count: int, nbytes: int, read_ms: int
    ) -> None:
        """A pull answered with messages, read from the store in ``read_ms`` whole ms."""
        broker = self.broker
        broker.get(group, topic, count, nbytes)
        broker.get_latency(group, topic, queue_id, read_ms)
        store = self.store
        store.get_found += 1
        store.get_transferred += count
        self._inner.on_get(group, topic, queue_id, count, nbytes, read_ms)

    def on_get_miss(self) -> None:
        """A pull answered without messages (``getMessageTimesTotalMiss``)."""
        self.store.get_miss += 1
        self._inner.on_get_miss()

    def on_request(self, request_code: int, response_code: int | None, duration_s: float) -> None:
        """A request was processed (only while ``metricsPort`` is set): for Prometheus."""
        self._inner.on_request(request_code, response_code, duration_s)

    def on_topic_deleted(self, topic: str) -> None:
        """A topic was deleted (DELETE_TOPIC_IN_BROKER, cleanUnusedTopic).

        Its statistics go only with ``autoDeleteUnusedStats`` (RocketMQ keeps them by
        default, and mqadmin may still ask); its Prometheus series always go, since an
        endpoint that kept every deleted topic's series would grow without bound.

        Args:
            topic: The deleted topic.
        """
        self.broker.topic_deleted(topic)
        self._inner.on_topic_deleted(topic)

    def on_group_deleted(self, group: str) -> None:
        """A consumer group was deleted (DELETE_SUBSCRIPTIONGROUP); as for a topic.

        Args:
            group: The deleted group.
        """
        self.broker.group_deleted(group)
        self._inner.on_group_deleted(group)


class MeteredMessageStore(MessageStore):
    """The message store, reporting each store call to :attr:`sink`.

    Set :attr:`sink` right after :meth:`~MessageStore.open` (recovery writes nothing
    through ``put_messages``). Put and read times are whole milliseconds of the store's
    clock.
    """

    sink: StatsSink | None = None

    def put_messages(self, msgs: Sequence[MessageToStore]) -> PutResult:
        """Append a batch (see :meth:`MessageStore.put_messages`) and report it."""
        sink = self.sink
        if sink is None:
            return super().put_messages(msgs)
        started = self.clock.monotonic_ms()
        result = super().put_messages(msgs)
        sink.on_stored(msgs[0], result, self.clock.monotonic_ms() - started)
        return result

    def put_raw_batch(self, raw: RawBatch) -> PutResult | None:
        """Append from the bytes (see :meth:`MessageStore.put_raw_batch`) and report it."""
        sink = self.sink
        if sink is None:
            return super().put_raw_batch(raw)
        started = self.clock.monotonic_ms()
        result = super().put_raw_batch(raw)
        if result is not None:
            sink.on_stored_batch(raw.topic, result, self.clock.monotonic_ms() - started)
        return result

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int | None = None,
        tag_codes: Set[int] | None = None,
        record_filter: Callable[[memoryview], bool] | None = None,
    ) -> GetResult:
        """Read records (see :meth:`MessageStore.get_messages`), timing the read."""
        clock = self.clock
        started = clock.monotonic_ms()
        result = super().get_messages(
            topic, queue_id, offset, max_count, max_bytes, tag_codes, record_filter
        )
        if (sink := self.sink) is not None:
            sink.store.get_time(clock.monotonic_ms() - started)
        return result


class StatsSampler:
    """Takes the snapshots: store totals every second, per-key items every 10 s, 10 min, 1 h.

    Each step runs when its interval has passed on the clock, so a test with a manual
    clock decides when snapshots are taken, and a late tick takes one snapshot, not many.

    Args:
        sink: What to sample.
        clock: Time source (wall clock, like RocketMQ's snapshots).
    """

    def __init__(self, sink: StatsSink, clock: Clock) -> None:
        self._sink = sink
        self._clock = clock
        now = clock.now_ms()
        self._store_at = self._rotate_at = now
        # RocketMQ samples each item set at once when it starts, then every interval.
        self._minute_at = self._hour_at = self._day_at = now
        broker = sink.broker
        broker.sample_minute(now)
        broker.sample_hour(now)
        broker.sample_day(now)

    def sample(self) -> None:
        """Take whichever snapshots are due now."""
        now = self._clock.now_ms()
        store, broker = self._sink.store, self._sink.broker
        if now - self._store_at >= 1000:
            self._store_at = now
            store.sample(now)
        if now - self._rotate_at >= _ROTATE_MS:
            self._rotate_at = now
            store.rotate_minute()
        if now - self._minute_at >= MINUTE_STEP_MS:
            self._minute_at = now
            broker.sample_minute(now)
        if now - self._hour_at >= HOUR_STEP_MS:
            self._hour_at = now
            broker.sample_hour(now)
        if now - self._day_at >= DAY_STEP_MS:
            self._day_at = now
            broker.sample_day(now)

    async def tick(self) -> None:
        """One timer run (for :meth:`~rocklet.transport.tasks.BackgroundTasks.every`)."""
        self.sample()


def stats_of(sink: MetricsSink, cluster_name: str, clock: Clock) -> StatsSink:
    """The statistics behind the broker's sink, or fresh ones when it has none.

    Args:
        sink: The broker's metrics sink (a :class:`StatsSink` in a started broker).
        cluster_name: For fresh statistics: the broker totals' key.
        clock: For fresh statistics: the start time.

    Returns:
        ``sink`` itself, or a new sink feeding nothing but its own statistics (a broker
        assembled without one, as some tests do, then answers with zeros).
    """
    if isinstance(sink, StatsSink):
        return sink
    return StatsSink(BrokerStats(cluster_name), StoreStats(clock.now_ms()), sink)
