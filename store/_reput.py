"""The reput service: reads the commitlog from where it stopped and dispatches records.

RocketMQ runs ``ReputMessageService.doReput`` in a thread that sleeps 1 ms between
rounds. Here puts dispatch their own records, from the data the encoder computed
(:mod:`rocklet.store._encoder`), and advance :attr:`ReputService.reput_from` past them, so a
message is readable by queue as soon as the put returns. :meth:`ReputService.run_once`
parses and dispatches whatever lies past ``reput_from``: at recovery, to rebuild
consume queues and index, and as a catch-up if a put failed after writing.

Damaged commitlog bytes (:mod:`rocklet.store._damage`) are never dispatched: recovery
hands the ranges it found to :meth:`ReputService.skip`, and while it re-dispatches it
sets :attr:`ReputService.on_damage`, which finds the next whole record after bad bytes
in a segment the recovery scan did not read (an old segment after a clean stop).
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable, Iterable, Sequence

import structlog

from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.message import BLANK_MAGIC
from rocklet.store._commitlog import CommitLog
from rocklet.store._damage import DamagedRange, is_segment_end
from rocklet.store._dispatch_request import BLANK, DispatchRequest, check_record
from rocklet.store._mapped_file import MappedFile

__all__ = ["DamageHandler", "Dispatcher", "ReputService"]

log = structlog.get_logger(__name__)

#: A dispatcher is called once per record (``CommitLogDispatcher.dispatch``).
Dispatcher = Callable[[DispatchRequest], None]
#: Called with a segment and the position of bad bytes; returns the range to skip.
DamageHandler = Callable[[MappedFile, int], DamagedRange]
_NONE: int = 1 << 62
_HEAD = struct.Struct(">ii")


class ReputService:
    """Dispatches records past :attr:`reput_from`. Store lock holder only.

    Args:
        commitlog: The commitlog to read.
        dispatchers: Called in order for every record.
        from_offset: Where to start.
        delay_levels_ms: Delay table (deliver times of schedule-topic records).
    """

    def __init__(
        self,
        commitlog: CommitLog,
        dispatchers: Sequence[Dispatcher],
        from_offset: int,
        delay_levels_ms: tuple[int, ...],
    ) -> None:
        self.commitlog = commitlog
        self.dispatchers = list(dispatchers)
        self.reput_from = from_offset
        self.delay_levels_ms = delay_levels_ms
        #: Records dispatched since the service was created.
        self.dispatched = 0
        #: Store time of the latest record dispatched (a slave's checkpoint time).
        self.last_store_timestamp = 0
        #: Recovery's resync for bad bytes not in :meth:`skip`; None: they are an error.
        self.on_damage: DamageHandler | None = None
        #: A slave's commitlog is filled by replication, whose frames cut records
        #: anywhere: stop before a record the open segment holds only part of.
        self.partial_tail = False
        self._skip_starts: list[int] = []
        self._skip_ends: list[int] = []

    def skip(self, ranges: Iterable[DamagedRange]) -> None:
        """Never dispatch from these damaged commitlog ranges.

        Args:
            ranges: Damaged ranges (any order; they do not overlap).
        """
        pairs = sorted(
            {*zip(self._skip_starts, self._skip_ends, strict=True)}
            | {(r.offset, r.end) for r in ranges}
        )
        self._skip_starts = [a for a, _ in pairs]
        self._skip_ends = [b for _, b in pairs]

    def _next_skip(self, offset: int) -> tuple[int, int]:
        k = bisect.bisect_right(self._skip_ends, offset)
        if k < len(self._skip_starts):
            return self._skip_starts[k], self._skip_ends[k]
        return _NONE, _NONE

    def run_once(self) -> int:
        """Dispatch every record between :attr:`reput_from` and the commitlog's end.

        Returns:
            Records dispatched.

        Raises:
            MessageFormatError: A record below the write position does not parse and
                no :attr:`on_damage` is set (corruption after recovery).
        """
        count = 0
        last_ts = self.last_store_timestamp
        files = self.commitlog.files
        end = self.commitlog.max_offset()
        while self.reput_from < end:
            mf = files.find(self.reput_from)
            if mf is None:
                # Retention moved the min offset past us: continue from the first file.
                first = self.commitlog.min_offset()
                if first <= self.reput_from:
                    break
                self.reput_from = first
                continue
            view, base = mf.view, mf.from_offset
            pos = self.reput_from - base
            limit = mf.wrote_position
            skip_from, skip_to = self._next_skip(self.reput_from)
            cut = False
            while pos < limit:
                if self.partial_tail and limit < mf.size and _cut(view, pos, limit):
                    cut = True
                    break
                if base + pos >= skip_from:  # known damage: jump over it
                    pos = skip_to - base
                    skip_from, skip_to = self._next_skip(skip_to)
                    continue
                req = check_record(view, pos, check_crc=False, delay_levels_ms=self.delay_levels_ms)
                if isinstance(req, int):
                    if req == BLANK and (self.on_damage is None or is_segment_end(view, pos)):
                        pos = mf.size
                        break
                    if self.on_damage is None:
                        raise MessageFormatError(f"invalid record at commitlog offset {base + pos}")
                    found = self.on_damage(mf, pos)
                    self.skip([found])
                    skip_from, skip_to = self._next_skip(base + pos)
                    continue
                for dispatch in self.dispatchers:
                    dispatch(req)
                last_ts = req.store_timestamp
                pos += req.size
                count += 1
            self.reput_from = base + (mf.size if pos >= mf.size else pos)
            if cut:
                break  # the rest of that record arrives with the next frame
        self.dispatched += count
        self.last_store_timestamp = max(self.last_store_timestamp, last_ts)
        return count


def _cut(view: memoryview, pos: int, limit: int) -> bool:
    """Whether the bytes at ``pos`` are the head of a record that ends past ``limit``."""
    if pos + 8 > limit:
        return True
    size, magic = _HEAD.unpack_from(view, pos)
    return bool(magic != BLANK_MAGIC and size > limit - pos)
