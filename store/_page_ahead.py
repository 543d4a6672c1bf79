"""Page-ahead: the commitlog's next pages enter the page cache on a background thread.

A store into a page of the map that is not in the page cache faults, and the kernel
then reads around the fault: it allocates, fills (zeros, for the unwritten blocks of a
fresh segment) and maps the device's whole read-ahead window at once. With the common
8 MiB window that is 15-25 ms on the appending thread, the event loop, once every
~8 MiB of commitlog: the end-to-end tail. This thread asks for the pages ahead of the
write position with ``posix_fadvise(WILLNEED)`` (which releases the GIL), so the
writer's stores find them cached and only copy bytes. It asks in 256 KiB steps: the
kernel fills a whole window in one call without giving up its vCPU, and the event
loops waiting for that vCPU stalled as long (BENCHMARKS.md, eleventh round).

The writer tests one integer per small append (:attr:`PageAhead.due`) and wakes the
thread when it has used half the window. Appends of a page or more use ``pwrite``,
which never reads around (it allocates page by page); they do not wake the thread, as
reading ahead for them would make the kernel fill each page twice.

Nothing here changes a byte of any file: a page the kernel reads ahead holds what the
disk holds, and pages already cached (written) are left alone, so a lost race only
costs the fault it tried to save.
"""

from __future__ import annotations

import sys
import threading

import structlog

from rocklet.store._mapped_file import PWRITE_MIN, MappedFileQueue

__all__ = ["PageAhead"]

log = structlog.get_logger(__name__)

#: ``due`` when there is nothing to wake the thread for.
_NEVER = sys.maxsize


class PageAhead:
    """Keeps ``window`` bytes past the commitlog's write position in the page cache.

    Args:
        files: The commitlog's segments (the thread reads a snapshot of the list).
        window: Bytes to keep ahead; 0 turns page-ahead off.
    """

    def __init__(self, files: MappedFileQueue, window: int) -> None:
        self.files = files
        self.window = window
        #: The writer calls :meth:`poke` once the write position reaches this offset.
        self.due = 0 if window > 0 else _NEVER
        #: Global offset up to which pages have been asked for.
        self.loaded_to = 0
        #: Rounds that asked the kernel for pages (tests and stats).
        self.rounds = 0
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def after_append(self, size: int, end: int) -> None:
        """Note an append of ``size`` bytes ending at global offset ``end``. The writer.

        Wakes the thread when a store into the map (an append below
        :data:`~rocklet.store._mapped_file.PWRITE_MIN`) reached :attr:`due`.
        """
        if size < PWRITE_MIN and end >= self.due:
            self.poke()

    def poke(self) -> None:
        """Wake the thread: the writer used half the window. The writer's thread."""
        self.due = _NEVER  # one wake-up per round, however many appends follow
        self._wake.set()

    def run_once(self) -> int:
        """Ask for the pages between the write position and the window's end. Any thread.

        Returns:
            Bytes asked for (0 when the window was already loaded).
        """
        files = self.files.files[-1:]  # a snapshot: the writer may append a segment
        if not files or self.window <= 0:
            return 0
        last = files[0]
        written = last.wrote_offset
        end = min(written + self.window, last.end_offset)
        start = max(self.loaded_to, written)
        asked = 0
        if end > start:
            last.load_ahead(start - last.from_offset, end - start)
            self.rounds += 1
            asked = end - start
        self.loaded_to = max(self.loaded_to, end)
        # At a segment's end the next wake-up is the roll: the next segment starts there.
        self.due = min(written + self.window // 2, last.end_offset)
        return asked

    def start(self) -> None:
        """Start the thread (idempotent; nothing to start when the window is 0)."""
        if self._thread is not None or self.window <= 0:
            return
        self._thread = threading.Thread(target=self._run, name="rocklet-page-ahead", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopped:
                return
            try:
                self.run_once()
            except OSError:
                # Only an optimisation: the writer's own faults still bring the pages.
                log.warning("commitlog page-ahead failed; turned off", exc_info=True)
                self.due = _NEVER
                return

    def stop(self) -> None:
        """Stop and join the thread (idempotent)."""
        self._stopped = True
        self.due = _NEVER
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
