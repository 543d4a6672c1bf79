"""Per-key message statistics, as RocketMQ's ``BrokerStatsManager`` keeps them.

Each statistic (``TOPIC_PUT_NUMS``, ``GROUP_GET_NUMS``...) is a set of items keyed by a
topic, ``topic@group``, ``queueId@topic@group`` (``GROUP_GET_LATENCY``) or the cluster
name. An item is two running totals, ``value`` (messages, bytes or milliseconds) and
``times`` (how many reports added to it), plus three lists of snapshots of those totals:
every 10 s (the last 7, about a minute), every 10 min (the last 7, about an hour) and
every hour (the last 25, about a day). VIEW_BROKER_STATS_DATA (315) answers, per list,
the difference between its newest and oldest snapshot (``sum``), that difference per
second (``tps``) and per report (``avgpt``); ``mqadmin statsAll`` prints the minute
``tps`` and the first non-zero of the day, hour and minute sums, GET_CONSUME_STATS (208)
the minute ``tps`` of ``GROUP_GET_NUMS``.

Reports update two integers in an item found with one or two dict lookups; nothing is
allocated per message. A new item starts its lists with a zero snapshot one interval
back, so what was counted before its first sampling shows in the first window, as in
RocketMQ. Snapshots are taken by :class:`rocklet.broker.stats_sink.StatsSampler`.

Event loop only, except the put methods, which :class:`BrokerStats` serialises with a
lock because the delayed-delivery and transaction worker threads write too.

Items outlive their topic or group, as in RocketMQ, unless ``autoDeleteUnusedStats`` is
on (:attr:`BrokerStats.drop_unused`): then deleting a topic drops its items and those
of every group on it, and deleting a group drops that group's.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "BROKER_GET_NUMS",
    "BROKER_PUT_NUMS",
    "GROUP_GET_LATENCY",
    "GROUP_GET_NUMS",
    "GROUP_GET_SIZE",
    "SNDBCK_PUT_NUMS",
    "STATS_NAMES",
    "TOPIC_PUT_NUMS",
    "TOPIC_PUT_SIZE",
    "BrokerStats",
    "StatsItem",
    "StatsSnapshot",
]

TOPIC_PUT_NUMS: Final = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE: Final = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS: Final = "GROUP_GET_NUMS"
GROUP_GET_SIZE: Final = "GROUP_GET_SIZE"
GROUP_GET_LATENCY: Final = "GROUP_GET_LATENCY"
SNDBCK_PUT_NUMS: Final = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS: Final = "BROKER_PUT_NUMS"
BROKER_GET_NUMS: Final = "BROKER_GET_NUMS"
#: The statistics this broker keeps. RocketMQ also has queue-level, from-disk and
#: commercial sets; a name it does not fill answers "not exist" like an unknown key.
STATS_NAMES: Final = (
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    GROUP_GET_LATENCY,
    SNDBCK_PUT_NUMS,
    BROKER_PUT_NUMS,
    BROKER_GET_NUMS,
)

#: Snapshot intervals and how many snapshots each list keeps (``StatsItem``).
MINUTE_STEP_MS: Final = 10_000
HOUR_STEP_MS: Final = 600_000
DAY_STEP_MS: Final = 3_600_000
_MINUTE_KEEP: Final = 7
_HOUR_KEEP: Final = 7
_DAY_KEEP: Final = 25

# (timestamp ms, times, value): one per item per sampling, never per message.
_Snapshot = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """What one snapshot list says (``StatsSnapshot``).

    Attributes:
        sum: Value added between the oldest and the newest snapshot.
        tps: ``sum`` per second over that time.
        avgpt: ``sum`` per report over that time (0 without reports).
        times: Reports over that time.
    """

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0
    times: int = 0


def _compute(snapshots: deque[_Snapshot]) -> StatsSnapshot:
    if not snapshots:
        return StatsSnapshot()
    first_ms, first_times, first_value = snapshots[0]
    last_ms, last_times, last_value = snapshots[-1]
    total = last_value - first_value
    elapsed = last_ms - first_ms
    times = last_times - first_times
    return StatsSnapshot(
        sum=total,
        tps=total * 1000.0 / elapsed if elapsed > 0 else 0.0,
        avgpt=total / times if times > 0 else 0.0,
        times=times,
    )


class StatsItem:
    """One key's running totals and snapshot lists (``StatsItem``)."""

    __slots__ = ("_day", "_hour", "_minute", "times", "value")

    def __init__(self) -> None:
        self.value = 0
        self.times = 0
        self._minute: deque[_Snapshot] = deque(maxlen=_MINUTE_KEEP)
        self._hour: deque[_Snapshot] = deque(maxlen=_HOUR_KEEP)
        self._day: deque[_Snapshot] = deque(maxlen=_DAY_KEEP)

    @staticmethod
    def _sample(
        snapshots: deque[_Snapshot], step_ms: int, now_ms: int, times: int, value: int
    ) -> None:
        if not snapshots:
            snapshots.append((now_ms - step_ms, 0, 0))
        snapshots.append((now_ms, times, value))

    def sample_minute(self, now_ms: int) -> None:
        """Take the 10-second snapshot."""
        self._sample(self._minute, MINUTE_STEP_MS, now_ms, self.times, self.value)

    def sample_hour(self, now_ms: int) -> None:
        """Take the 10-minute snapshot."""
        self._sample(self._hour, HOUR_STEP_MS, now_ms, self.times, self.value)

    def sample_day(self, now_ms: int) -> None:
        """Take the hourly snapshot."""
        self._sample(self._day, DAY_STEP_MS, now_ms, self.times, self.value)

    def minute(self) -> StatsSnapshot:
        """The last minute (``getStatsDataInMinute``)."""
        return _compute(self._minute)

    def hour(self) -> StatsSnapshot:
        """The last hour (``getStatsDataInHour``)."""
        return _compute(self._hour)

    def day(self) -> StatsSnapshot:
        """The last day (``getStatsDataInDay``)."""
        return _compute(self._day)

    def idle_for_a_day(self) -> bool:
        """Whether a whole day of hourly snapshots saw no report: every figure is 0."""
        day = self._day
        return len(day) == _DAY_KEEP and day[0][1] == day[-1][1]


def _report(pair: tuple[StatsItem, StatsItem], count: int, nbytes: int) -> None:
    """One report of ``count`` messages of ``nbytes`` bytes to a (NUMS, SIZE) item pair."""
    nums, size = pair
    nums.value += count
    nums.times += 1
    size.value += nbytes
    size.times += 1


class BrokerStats:
    """The broker's statistics sets (``BrokerStatsManager``).

    Args:
        cluster_name: The key of ``BROKER_PUT_NUMS`` and ``BROKER_GET_NUMS``.
        drop_unused: ``autoDeleteUnusedStats``; changed in place by UPDATE_BROKER_CONFIG.
    """

    def __init__(self, cluster_name: str, *, drop_unused: bool = False) -> None:
        self._cluster = cluster_name
        self.drop_unused = drop_unused
        self._sets: dict[str, dict[str, StatsItem]] = {name: {} for name in STATS_NAMES}
        # Hot-path caches: a put finds its pair by topic, a pull by topic then group,
        # so no ``topic@group`` string is built per report.
        self._put_items: dict[str, tuple[StatsItem, StatsItem]] = {}
        self._get_items: dict[str, dict[str, tuple[StatsItem, StatsItem]]] = {}
        self._latency_items: dict[tuple[str, str, int], StatsItem] = {}
        self._broker_put = self._item(BROKER_PUT_NUMS, cluster_name)
        self._broker_get = self._item(BROKER_GET_NUMS, cluster_name)
        self._lock = threading.Lock()

    def _item(self, name: str, key: str) -> StatsItem:
        table = self._sets[name]
        item = table.get(key)
        if item is None:
            item = table[key] = StatsItem()
        return item

    def _put_pair(self, topic: str) -> tuple[StatsItem, StatsItem]:
        """``TOPIC_PUT_NUMS`` and ``TOPIC_PUT_SIZE`` of a topic (the caller holds the lock)."""
        pair = self._put_items.get(topic)
        if pair is None:
            pair = self._put_items[topic] = (
                self._item(TOPIC_PUT_NUMS, topic),
                self._item(TOPIC_PUT_SIZE, topic),
            )
        return pair

    def put(self, topic: str, count: int, nbytes: int) -> None:
        """Messages stored for ``topic`` by one request (``incTopicPutNums``/``Size``).

        Args:
            topic: The topic the messages were stored under.
            count: Messages stored.
            nbytes: Stored bytes.
        """
        with self._lock:
            _report(self._put_pair(topic), count, nbytes)
            # RocketMQ adds to the broker's value only, never its times.
            self._broker_put.value += count

    def put_topic_only(self, topic: str, count: int, nbytes: int) -> None:
        """Count a put under its topic but not the broker total (a delayed send-back)."""
        with self._lock:
            _report(self._put_pair(topic), count, nbytes)

    def send_back(self, group: str, topic: str) -> None:
        """A consumer sent a message of ``topic`` back for retry (``incSendBackNums``)."""
        with self._lock:
            item = self._item(SNDBCK_PUT_NUMS, f"{topic}@{group}")
            item.value += 1
            item.times += 1

    def get(self, group: str, topic: str, count: int, nbytes: int) -> None:
        """A pull returned messages (``incGroupGetNums/Size``, ``incBrokerGetNums``).

        Args:
            group: The pulling group.
            topic: The pulled topic.
            count: Messages returned.
            nbytes: Stored bytes returned.
        """
        by_group = self._get_items.get(topic)
        if by_group is None:
            by_group = self._get_items[topic] = {}
        pair = by_group.get(group)
        if pair is None:
            key = f"{topic}@{group}"
            pair = by_group[group] = (
                self._item(GROUP_GET_NUMS, key),
                self._item(GROUP_GET_SIZE, key),
            )
        _report(pair, count, nbytes)
        self._broker_get.value += count

    def get_latency(self, group: str, topic: str, queue_id: int, millis: int) -> None:
        """A pull of one queue answered with messages (``incGroupGetLatency``).

        Keyed ``queueId@topic@group``, one report per such pull: ``times`` counts the
        pulls and ``value`` adds ``millis``, the store read's whole milliseconds
        (RocketMQ's is the time to copy the messages into the answer; both are
        usually 0). Tools such as RocketMQ's Prometheus exporter read it per queue.

        Args:
            group: The pulling group.
            topic: The pulled topic.
            queue_id: The pulled queue.
            millis: How long the read took.
        """
        key = (topic, group, queue_id)
        item = self._latency_items.get(key)
        if item is None:
            item = self._latency_items[key] = self._item(
                GROUP_GET_LATENCY, f"{queue_id}@{topic}@{group}"
            )
        item.value += millis
        item.times += 1

    def topic_deleted(self, topic: str) -> None:
        """A topic was deleted (``onTopicDeleted``): with :attr:`drop_unused`, forget it.

        Drops the topic's put items and the ``topic@group`` items of every group that
        pulled from it or sent its messages back.
        """
        if not self.drop_unused:
            return
        prefix = f"{topic}@"
        with self._lock:
            for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
                self._sets[name].pop(topic, None)
            self._drop_keys(lambda key: key.startswith(prefix))
            self._put_items.pop(topic, None)
            self._get_items.pop(topic, None)
            self._drop_latency(lambda key: key[0] == topic)

    def group_deleted(self, group: str) -> None:
        """A group was deleted (``onGroupDeleted``): with :attr:`drop_unused`, forget it."""
        if not self.drop_unused:
            return
        suffix = f"@{group}"
        with self._lock:
            self._drop_keys(lambda key: key.endswith(suffix))
            for by_group in self._get_items.values():
                by_group.pop(group, None)
            self._drop_latency(lambda key: key[1] == group)

    def _drop_keys(self, matches: Callable[[str], bool]) -> None:
        """Drop the ``topic@group`` items whose key ``matches`` (the caller holds the lock)."""
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            table = self._sets[name]
            for key in [k for k in table if matches(k)]:
                del table[key]

    def _drop_latency(self, matches: Callable[[tuple[str, str, int]], bool]) -> None:
        """Drop the ``queueId@topic@group`` items whose (topic, group, queue) ``matches``."""
        table = self._sets[GROUP_GET_LATENCY]
        for key in [k for k in self._latency_items if matches(k)]:
            del self._latency_items[key]
            topic, group, queue_id = key
            table.pop(f"{queue_id}@{topic}@{group}", None)

    def item(self, name: str, key: str) -> StatsItem | None:
        """The item VIEW_BROKER_STATS_DATA reads, or ``None`` (unknown name or key)."""
        table = self._sets.get(name)
        return None if table is None else table.get(key)

    def group_get_tps(self, group: str, topic: str) -> float:
        """Messages per second ``group`` pulled of ``topic`` (``tpsGroupGetNums``)."""
        item = self._sets[GROUP_GET_NUMS].get(f"{topic}@{group}")
        return 0.0 if item is None else item.minute().tps

    def _items(self) -> list[StatsItem]:
        with self._lock:
            return [item for table in self._sets.values() for item in table.values()]

    def sample_minute(self, now_ms: int) -> None:
        """Take every item's 10-second snapshot."""
        for item in self._items():
            item.sample_minute(now_ms)

    def sample_hour(self, now_ms: int) -> None:
        """Take every item's 10-minute snapshot."""
        for item in self._items():
            item.sample_hour(now_ms)

    def sample_day(self, now_ms: int) -> None:
        """Take every item's hourly snapshot, then forget the items idle for a day.

        Consumer groups that come and go (a name per deployment, per job) would
        otherwise leave their items behind for good. An item left out reads as zeros
        to mqadmin's ``statsAll``, which is what a day without reports shows; it comes
        back at its key's next report.
        """
        for item in self._items():
            item.sample_day(now_ms)
        with self._lock:
            idle = {
                id(item)
                for name, table in self._sets.items()
                if name not in (BROKER_PUT_NUMS, BROKER_GET_NUMS)
                for item in table.values()
                if item.idle_for_a_day()
            }
            if not idle:
                return
            for table in self._sets.values():
                for key in [k for k, item in table.items() if id(item) in idle]:
                    del table[key]
            # The hot-path caches hold the same items: a cached one left behind would
            # take reports nobody reads.
            self._put_items = {
                t: pair for t, pair in self._put_items.items() if id(pair[0]) not in idle
            }
            for by_group in self._get_items.values():
                for group in [g for g, pair in by_group.items() if id(pair[0]) in idle]:
                    del by_group[group]
            self._latency_items = {
                k: item for k, item in self._latency_items.items() if id(item) not in idle
            }
