"""The reput service: reads the commitlog from where it stopped and dispatches records.

RocketMQ runs ``ReputMessageService.doReput`` in a thread that sleeps 1 ms between
rounds. Here puts dispatch their own records, from the data the encoder computed
(:mod:`rocklet.store._encoder`), and advance :attr:`ReputService.reput_from` past them, so a
message is readable by queue as soon as the put returns. :meth:`ReputService.run_once`
parses and dispatches whatever lies past ``reput_from``: at recovery, to rebuild
consume queues and index, and as a catch-up if a put failed after writing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog

from rocklet.protocol.errors import MessageFormatError
from rocklet.store._commitlog import CommitLog
from rocklet.store._dispatch_request import BLANK, DispatchRequest, check_record

__all__ = ["Dispatcher", "ReputService"]

log = structlog.get_logger(__name__)

#: A dispatcher is called once per record (``CommitLogDispatcher.dispatch``).
Dispatcher = Callable[[DispatchRequest], None]


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

    def run_once(self) -> int:
        """Dispatch every record between :attr:`reput_from` and the commitlog's end.

        Returns:
            Records dispatched.

        Raises:
            MessageFormatError: A record below the write position does not parse
                (corruption; recovery should have truncated it).
        """
        count = 0
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
            view = mf.view
            pos = self.reput_from - mf.from_offset
            limit = mf.wrote_position
            while pos < limit:
                req = check_record(view, pos, check_crc=False, delay_levels_ms=self.delay_levels_ms)
                if isinstance(req, int):
                    if req == BLANK:
                        pos = mf.size
                        break
                    raise MessageFormatError(
                        f"invalid record at commitlog offset {mf.from_offset + pos}"
                    )
                for dispatch in self.dispatchers:
                    dispatch(req)
                pos += req.size
                count += 1
            self.reput_from = mf.from_offset + (mf.size if pos >= mf.size else pos)
        self.dispatched += count
        return count
