"""A progress line on standard error, now and then, while a command works for long.

``rocklet produce`` and ``consume`` print one line per message on standard output;
when that goes to a file or a pipe, nothing shows that the command is alive, so every
couple of seconds a line such as ``sent 12000/50000 (5900/s)`` goes to standard error.
"""

from __future__ import annotations

import time
from typing import Final, TextIO

__all__ = ["ProgressNote"]

#: Seconds between two progress lines.
INTERVAL_S: Final = 2.0


class ProgressNote:
    """Writes ``<verb> <done>[/<total>] (<rate>/s)`` at most every ``interval_s``.

    Args:
        stream: Where the lines go (standard error).
        verb: What is counted, e.g. ``"sent"``.
        total: How many are expected, if known.
        enabled: Write at all (off when the per-message lines are on a terminal).
        interval_s: Seconds between two lines.
    """

    def __init__(
        self,
        stream: TextIO,
        verb: str,
        *,
        total: int | None = None,
        enabled: bool = True,
        interval_s: float = INTERVAL_S,
    ) -> None:
        self._stream = stream
        self._verb = verb
        self._total = total
        self._enabled = enabled
        self._interval_s = interval_s
        self._began = time.monotonic()
        self._next = self._began + interval_s

    def update(self, done: int) -> None:
        """Note that ``done`` are done; writes a line when one is due."""
        if not self._enabled:
            return
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self._interval_s
        of = f"/{self._total}" if self._total else ""
        rate = done / max(now - self._began, 1e-9)
        self._stream.write(f"{self._verb} {done}{of} ({rate:.0f}/s)\n")
        self._stream.flush()
