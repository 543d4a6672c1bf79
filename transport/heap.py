"""A server's heap: freed memory kept for the next request, start-up objects frozen.

A server moves large transient buffers: a batch request of a few hundred KiB is read
into a frame-sized buffer, its body copied out, handed to the store and freed, and the
next request does the same. glibc's defaults give such blocks back to the kernel
(``mmap`` above a threshold that adapts, and trimming the heap's top once more than
twice that threshold is free), so the next request's buffer is fresh pages, and each
4 KiB page costs a fault and the kernel's zeroing. Measured on the broker under SDK
batch produce (256 x 1 KiB per request, 4 in flight): 0.35 page faults and 1.7-2.8 us
of system CPU per message with the defaults, 0 faults and 0.5-0.7 us with the
thresholds below (BENCHMARKS.md).

:func:`retain_freed_memory` raises both thresholds for the process, the way an
operator would with ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_``. The
cost is memory: up to :data:`TRIM_THRESHOLD` of freed heap stays mapped after a burst
(it is reused by the next one). The server commands call it at start; an operator's
own ``MALLOC_*`` settings win, and other C libraries are left alone.

:func:`freeze_startup_objects` is for the garbage collector what the thresholds are for
malloc. CPython's full collection visits every object it tracks, on the thread that
triggered it, which in a server is the event loop's: a broker holds ~40,000 of them once
started (modules, classes, functions, its configs and tables), and one full collection
of them held the loop 18-35 ms on a 2-vCPU VM. They live as long as the process, so the
server commands move them out of the collector's sight once they are up; a full
collection then visits only what was made since (BENCHMARKS.md).
"""

from __future__ import annotations

import ctypes
import gc
import os
import platform
import sys
from typing import Final

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "freeze_startup_objects", "retain_freed_memory"]

#: Blocks up to this size come from the heap (glibc allows up to 16 MiB on 32-bit
#: and 32 MiB on 64-bit systems); the default frame limit is 16 MiB too.
MMAP_THRESHOLD: Final = 16 * 1024 * 1024
#: Free memory at the heap's top kept before giving it back to the kernel.
TRIM_THRESHOLD: Final = 64 * 1024 * 1024

# mallopt's parameter numbers (malloc.h).
_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3
#: An operator who sets any of these has chosen; leave the allocator as they set it.
_OPERATOR_SETTINGS: Final = (
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "GLIBC_TUNABLES",
)


def retain_freed_memory() -> str:
    """Raise glibc's mmap and trim thresholds for this process.

    Returns:
        What was done, for the server's start-up log: ``"applied"``, or why not
        (``"not glibc"``, ``"operator settings"``, ``"refused"``).
    """
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return "not glibc"
    if any(name in os.environ for name in _OPERATOR_SETTINGS):
        return "operator settings"
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return "not glibc"
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # The mmap threshold first: setting it also stops glibc adapting either threshold.
    if not mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        return "refused"
    if not mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD):
        return "refused"
    return "applied"


def freeze_startup_objects() -> int:
    """Collect once, then freeze every object left (:func:`gc.freeze`).

    Call it once the server is up. Frozen objects are never collected, so garbage is
    collected first; what becomes garbage later among them stays, which is the price of
    never visiting them again.

    Returns:
        How many objects are frozen, for the server's start-up log.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
