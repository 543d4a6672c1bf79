"""The checkpoint: how far the commitlog, consume queues and index are known durable.

Layout: ``<store>/checkpoint``, one 4096-byte page (``StoreCheckpoint``), big-endian:

    ======  ====  ===========================================================
    offset  size  field
    ======  ====  ===========================================================
    0       8     physicMsgTimestamp: store time of the last flushed record
    8       8     logicsMsgTimestamp: same, for the consume queues
    16      8     indexMsgTimestamp: same, for the index
    24      4072  zero
    ======  ====  ===========================================================
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Final

from rocklet.store._files import allocate_file

__all__ = ["CHECKPOINT_SIZE", "Checkpoint"]

CHECKPOINT_SIZE: Final = 4096
_FIELDS = struct.Struct(">qqq")
#: RocketMQ's ``getMinTimestamp`` steps back 3 s to cover records stored together.
_SAFETY_MS: Final = 3000


class Checkpoint:
    """The checkpoint page. Fields are set by the flush thread; :meth:`flush` persists.

    Args:
        path: ``<store>/checkpoint`` (created zeroed if missing).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.physic_ts = 0
        self.logics_ts = 0
        self.index_ts = 0
        if path.exists():
            data = path.read_bytes()[: _FIELDS.size]
            if len(data) == _FIELDS.size:
                self.physic_ts, self.logics_ts, self.index_ts = _FIELDS.unpack(data)

    def min_timestamp(self, *, with_index: bool) -> int:
        """Where crash recovery starts: the minimum time, less a safety margin.

        Args:
            with_index: Include the index time (when the index is enabled).

        Returns:
            A store time in ms (may be negative for a fresh store).
        """
        low = min(self.physic_ts, self.logics_ts)
        if with_index:
            low = min(low, self.index_ts)
        return low - _SAFETY_MS

    def flush(self) -> None:
        """Write the page and fdatasync it. Flush thread or close.

        Raises:
            NoSpaceError: The file does not exist yet and the disk has no room for it.
        """
        page = bytearray(CHECKPOINT_SIZE)
        _FIELDS.pack_into(page, 0, self.physic_ts, self.logics_ts, self.index_ts)
        if not self.path.exists():
            # Created with its page reserved, so rewriting it never needs room again.
            allocate_file(self.path, CHECKPOINT_SIZE)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, page, 0)
            os.fdatasync(fd)
        finally:
            os.close(fd)
