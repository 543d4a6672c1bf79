"""Store-wide put and get figures, as RocketMQ's ``StoreStatsService`` keeps them.

Running totals (messages put, bytes put, failed puts, pulls that found or missed
messages, messages transferred) are sampled once a second into a list of the last 601
snapshots; a TPS over 10 s, 1 min or 10 min is the difference between the newest
snapshot and the one 10, 60 or 600 samples back, divided by the time between them.
GET_BROKER_RUNTIME_INFO (28) prints the three as ``"a b c"`` (``putTps``,
``getFoundTps``, ``getMissTps``, ``getTotalTps``, ``getTransferedTps``); ``clusterList``
shows the first of ``putTps`` and ``getTransferedTps``.

Put times are measured per store call in whole milliseconds: the maximum since start,
a 13-bucket distribution and a finer histogram whose 99th and 99.9th percentiles are
reported. Both are rotated every minute and report the last complete minute, as
RocketMQ does.

The "morning" values: at local midnight the current totals become today's morning
values and the previous ones yesterday's (``BrokerStats.record``).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from typing import Final

__all__ = ["DISTRIBUTE_LABELS", "StoreStats"]

#: One snapshot a second, and enough of them for the 10-minute window.
_KEEP: Final = 601
#: The TPS windows, in samples (= seconds).
WINDOWS: Final = (10, 60, 600)
#: ``putMessageDistributeTime``'s buckets: upper bounds (exclusive, ms) and labels.
_DISTRIBUTE_BOUNDS: Final = (1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)
DISTRIBUTE_LABELS: Final = (
    "[<=0ms]",
    "[0~10ms]",
    "[10~50ms]",
    "[50~100ms]",
    "[100~200ms]",
    "[200~500ms]",
    "[500ms~1s]",
    "[1~2s]",
    "[2~3s]",
    "[3~4s]",
    "[4~5s]",
    "[5~10s]",
    "[10s~]",
)


def _latency_bounds() -> tuple[int, ...]:
    # Steps of 1 ms to 20, 2 to 50, 5 to 100, 10 to 200, 50 to 500, 100 to 1000,
    # 1000 to 10000, then everything above (``PUT_MESSAGE_ENTIRE_TIME_BUCKETS``).
    bounds, upper = [], 0
    for step, count in ((1, 20), (2, 15), (5, 10), (10, 10), (50, 6), (100, 5), (1000, 9)):
        for _ in range(count):
            upper += step
            bounds.append(upper)
    return tuple(bounds)


_LATENCY_BOUNDS: Final = _latency_bounds()

# (timestamp ms, puts, found, missed, transferred)
_Sample = tuple[int, int, int, int, int]


def _java_double(value: float) -> str:
    """``Double.toString`` for the values TPS takes (finite, not tiny)."""
    text = repr(float(value))
    return text if "e" not in text else f"{value:.6f}"


class StoreStats:
    """Store-wide totals, TPS windows and put-time figures.

    Args:
        now_ms: The start time (wall clock, ms).
    """

    def __init__(self, now_ms: int) -> None:
        self.put_times = 0
        self.put_bytes = 0
        self.put_failed = 0
        self.get_found = 0
        self.get_miss = 0
        self.get_transferred = 0
        self.put_time_max_ms = 0
        self.get_time_max_ms = 0
        self._distribute = [0] * len(DISTRIBUTE_LABELS)
        self._last_distribute = [0] * len(DISTRIBUTE_LABELS)
        self._latency = [0] * (len(_LATENCY_BOUNDS) + 1)
        self._last_latency = [0] * (len(_LATENCY_BOUNDS) + 1)
        self._samples: deque[_Sample] = deque(maxlen=_KEEP)
        self._lock = threading.Lock()
        self.put_yesterday_morning = 0
        self.put_today_morning = 0
        self.get_yesterday_morning = 0
        self.get_today_morning = 0
        self._day = _local_day(now_ms)
        self.sample(now_ms)

    def put(self, count: int, nbytes: int, elapsed_ms: int) -> None:
        """One store call wrote ``count`` messages of ``nbytes`` in ``elapsed_ms``. Any thread."""
        with self._lock:
            self.put_times += count
            self.put_bytes += nbytes
            self._put_time(elapsed_ms)

    def put_replicated(self, size: int) -> None:
        """A slave dispatched one record it replicated: a put of ``size`` bytes, untimed.

        RocketMQ's slave counts replicated records in its store totals as its reput
        dispatches them (``putMessageTimesTotal``, ``putTps``), not in the put times.
        Any thread.
        """
        with self._lock:
            self.put_times += 1
            self.put_bytes += size

    def put_failed_once(self, elapsed_ms: int) -> None:
        """One store call failed. Any thread."""
        with self._lock:
            self.put_failed += 1
            self._put_time(elapsed_ms)

    def get_time(self, elapsed_ms: int) -> None:
        """One store read took ``elapsed_ms`` (``getMessageEntireTimeMax``). Any thread."""
        if elapsed_ms > self.get_time_max_ms:  # rare: the lock only for a new maximum
            with self._lock:
                if elapsed_ms > self.get_time_max_ms:
                    self.get_time_max_ms = elapsed_ms

    def _put_time(self, elapsed_ms: int) -> None:
        self._distribute[bisect.bisect_right(_DISTRIBUTE_BOUNDS, elapsed_ms)] += 1
        self._latency[bisect.bisect_left(_LATENCY_BOUNDS, elapsed_ms)] += 1
        if elapsed_ms > self.put_time_max_ms:
            self.put_time_max_ms = elapsed_ms

    def sample(self, now_ms: int) -> None:
        """Take the once-a-second snapshot, and at local midnight record the morning values."""
        with self._lock:
            self._samples.append(
                (now_ms, self.put_times, self.get_found, self.get_miss, self.get_transferred)
            )
        day = _local_day(now_ms)
        if day != self._day:
            self._day = day
            self.put_yesterday_morning = self.put_today_morning
            self.get_yesterday_morning = self.get_today_morning
            self.put_today_morning = self.put_times
            self.get_today_morning = self.get_transferred

    def rotate_minute(self) -> None:
        """Close the minute: the put-time figures now report the minute just ended."""
        with self._lock:
            self._last_distribute, self._distribute = self._distribute, [0] * len(DISTRIBUTE_LABELS)
            self._last_latency, self._latency = self._latency, [0] * len(self._latency)

    def _tps(self, columns: tuple[int, ...], window: int) -> float:
        samples = self._samples
        last = samples[-1]
        # A window not yet filled since start is measured over what there is.
        first = samples[max(0, len(samples) - 1 - window)]
        elapsed = last[0] - first[0]
        count = sum(last[c] - first[c] for c in columns)
        return count * 1000.0 / elapsed if elapsed > 0 else 0.0

    def tps(self, column: str) -> tuple[float, float, float]:
        """The 10 s, 1 min and 10 min rates of one column of the snapshots.

        ``column``: ``put``, ``found``, ``miss``, ``transferred`` or ``total`` (found +
        miss, from the counts: adding the two rates would round twice, 0.1 + 0.7 is
        0.7999999999999999).
        """
        columns = _COLUMNS[column]
        with self._lock:
            return tuple(self._tps(columns, w) for w in WINDOWS)  # type: ignore[return-value]

    def latency_percentile(self, fraction: float) -> float:
        """Put time (ms) under which ``fraction`` of last minute's puts fell.

        ``findPutMessageEntireTimePX``: interpolated within the histogram bucket.
        """
        with self._lock:
            counts = list(self._last_latency)
        wanted = int(sum(counts) * fraction)
        passed = 0
        for i, count in enumerate(counts):
            upper = _LATENCY_BOUNDS[i] if i < len(_LATENCY_BOUNDS) else 2**63 - 1
            if wanted <= passed + count:
                lower = _LATENCY_BOUNDS[i - 1] if i else 0
                return lower + ((upper - lower) * (wanted - passed) / count if count else 0.0)
            passed += count
        return 0.0

    def runtime_info(self) -> dict[str, str]:
        """The keys ``StoreStatsService.getRuntimeInfo`` adds to GET_BROKER_RUNTIME_INFO."""
        put_times, put_bytes = self.put_times, self.put_bytes
        # RocketMQ shows 1 while nothing was put (it guards a division with it).
        shown_times = put_times or 1
        with self._lock:
            distribute = list(self._last_distribute)
        info = {
            "putMessageEntireTimeMax": str(self.put_time_max_ms),
            "getMessageEntireTimeMax": str(self.get_time_max_ms),
            "putMessageTimesTotal": str(shown_times),
            "putMessageFailedTimes": str(self.put_failed),
            "putMessageSizeTotal": str(put_bytes),
            "putMessageDistributeTime": "".join(
                f"{label}:{n} " for label, n in zip(DISTRIBUTE_LABELS, distribute, strict=True)
            ),
            "putMessageAverageSize": _java_double(put_bytes / shown_times),
            "putLatency99": f"{self.latency_percentile(0.99):.2f}",
            "putLatency999": f"{self.latency_percentile(0.999):.2f}",
        }
        for key, values in (
            ("putTps", self.tps("put")),
            ("getFoundTps", self.tps("found")),
            ("getMissTps", self.tps("miss")),
            ("getTotalTps", self.tps("total")),
            ("getTransferedTps", self.tps("transferred")),
        ):
            info[key] = " ".join(_java_double(v) for v in values)
        return info


_COLUMNS: Final = {
    "put": (1,),
    "found": (2,),
    "miss": (3,),
    "total": (2, 3),
    "transferred": (4,),
}


def _local_day(now_ms: int) -> int:
    """Days since the epoch in local time (midnight is when RocketMQ records mornings)."""
    local = time.localtime(now_ms / 1000)
    return (now_ms // 1000 + local.tm_gmtoff) // 86_400
