"""The read scratch buffer each thread's connections share.

A connection with no partial frame pending reads into this buffer and decodes from it
in place, so an idle connection holds no read buffer of its own. Connections run on
their thread's event loop one read callback at a time, so one buffer per thread is
enough.
"""

from __future__ import annotations

import threading

from rocklet.protocol.frame import scratch_buffer

__all__ = ["thread_scratch"]

_threads = threading.local()


def thread_scratch() -> bytearray:
    """The read scratch buffer of this thread's connections (one event loop's)."""
    scratch: bytearray | None = getattr(_threads, "scratch", None)
    if scratch is None:
        scratch = _threads.scratch = scratch_buffer()
    return scratch
