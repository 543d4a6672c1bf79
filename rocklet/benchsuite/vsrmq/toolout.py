"""Reading the output of the release's benchmark Producer and Consumer.

Both print a line every 10 s once they hold ten one-second snapshots, the rate over
the nine seconds between the oldest and the newest: the Producer ``... Send TPS: N Max
RT(ms): ...`` (and a ``[Complete] ...`` line when it sends a fixed quantity), the
Consumer ``Current Time: ... TPS: N FAIL: ...``. The first line covers the JVM's
warm-up and the clients' start, so the steady rate is the mean of the later ones (for a
Consumer whose backlog ran out, of those printed while it was still reading).
"""

from __future__ import annotations

import re
import statistics
from typing import Final

__all__ = [
    "busy_consumer_rate",
    "consumer_lines",
    "consumer_tps",
    "producer_tps",
    "steady_rate",
]

_SEND_TPS: Final = re.compile(r"^Current Time: .*?\bSend TPS: (\d+)", re.MULTILINE)
_CONSUME_TPS: Final = re.compile(r"^Current Time: (\d+) TPS: (\d+) FAIL:", re.MULTILINE)


def producer_tps(text: str) -> list[int]:
    """The Producer's periodic "Send TPS" values, in order (not the final summary)."""
    return [int(m) for m in _SEND_TPS.findall(text)]


def consumer_lines(text: str) -> list[tuple[int, int]]:
    """The Consumer's periodic lines: (epoch ms it was printed at, TPS), in order."""
    return [(int(at), int(tps)) for at, tps in _CONSUME_TPS.findall(text)]


def consumer_tps(text: str) -> list[int]:
    """The Consumer's periodic "TPS" values, in order."""
    return [tps for _, tps in consumer_lines(text)]


def busy_consumer_rate(
    lines: list[tuple[int, int]], busy_until_ms: float | None
) -> tuple[float | None, str | None]:
    """The Consumer's steady rate, over the windows it spent reading.

    Each line's rate covers the 9 s before it. Once the backlog ran out, a window holds
    idle time, so when it did (``busy_until_ms``: the last moment the consumer was seen
    still reading), only the lines after the first printed by then count.

    Returns:
        msg/s (None without lines) and a note on which windows counted (None when all
        after the first did); when none was spent reading throughout, the highest
        line's rate, a lower bound.
    """
    values = [tps for _, tps in lines]
    if busy_until_ms is None:
        return steady_rate(values), None
    busy = [tps for at, tps in lines[1:] if at <= busy_until_ms]
    if busy:
        return statistics.fmean(busy), f"msg/s over the {len(busy)} window(s) before it ran out"
    # No window was all reading; each one's rate is at most the reading rate (it also
    # holds start-up or idle time), so the highest is the closest lower bound.
    return (max(values) if values else None), "msg/s a lower bound"


def steady_rate(values: list[int]) -> float | None:
    """The mean of the values after the first (warm-up); the one value if only one.

    Returns:
        msg/s, or None when the tool printed no rate at all (a run shorter than ~10 s).
    """
    if not values:
        return None
    steady = values[1:] or values
    return statistics.fmean(steady)
