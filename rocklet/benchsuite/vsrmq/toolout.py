"""Reading the output of the release's benchmark Producer and Consumer.

Both print a line every 10 s once they hold ten one-second snapshots, the rate over
the nine seconds between the oldest and the newest: the Producer ``... Send TPS: N Max
RT(ms): ...`` (and a ``[Complete] ...`` line when it sends a fixed quantity), the
Consumer ``Current Time: ... TPS: N FAIL: ...``. The first line covers the JVM's
warm-up and the clients' start, so the steady rate is the mean of the later ones.
"""

from __future__ import annotations

import re
import statistics
from typing import Final

__all__ = ["consumer_tps", "producer_tps", "steady_rate"]

_SEND_TPS: Final = re.compile(r"^Current Time: .*?\bSend TPS: (\d+)", re.MULTILINE)
_CONSUME_TPS: Final = re.compile(r"^Current Time: .*?(?<!Send )\bTPS: (\d+) FAIL:", re.MULTILINE)


def producer_tps(text: str) -> list[int]:
    """The Producer's periodic "Send TPS" values, in order (not the final summary)."""
    return [int(m) for m in _SEND_TPS.findall(text)]


def consumer_tps(text: str) -> list[int]:
    """The Consumer's periodic "TPS" values, in order."""
    return [int(m) for m in _CONSUME_TPS.findall(text)]


def steady_rate(values: list[int]) -> float | None:
    """The mean of the values after the first (warm-up); the one value if only one.

    Returns:
        msg/s, or None when the tool printed no rate at all (a run shorter than ~10 s).
    """
    if not values:
        return None
    steady = values[1:] or values
    return statistics.fmean(steady)
