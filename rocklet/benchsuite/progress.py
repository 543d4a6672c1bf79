"""A one-line progress bar on standard error (a line per step when it is not a terminal)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]

_WIDTH = 24


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


class Progress:
    """Counts steps done out of ``total`` and shows the current one.

    Args:
        total: Steps in the whole suite.
        stream: Where to draw (standard error by default).
    """

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = max(total, 1)
        self.done = 0
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._began = time.monotonic()

    def _bar(self, label: str) -> str:
        filled = _WIDTH * self.done // self.total
        elapsed = time.monotonic() - self._began
        left = ""
        if self.done:
            left = f", ~{_clock(elapsed / self.done * (self.total - self.done))} left"
        return (
            f"[{'#' * filled}{'.' * (_WIDTH - filled)}] {self.done}/{self.total} "
            f"{_clock(elapsed)}{left}  {label}"
        )

    def start(self, label: str) -> None:
        """Show that ``label`` is running."""
        if self._tty:
            self._stream.write("\r\033[K" + self._bar(label))
            self._stream.flush()

    def finish(self, label: str, outcome: str) -> None:
        """Count a step as done and report its outcome."""
        self.done += 1
        line = self._bar(f"{label}: {outcome}")
        if self._tty:
            self._stream.write("\r\033[K" + line + "\n")
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def note(self, text: str) -> None:
        """A line that is not a step (a server starting, a warning)."""
        self._stream.write(("\r\033[K" if self._tty else "") + text + "\n")
        self._stream.flush()
