"""The store's facade: open (with recovery), put, read, query, close.

Threads: puts and reads may come from any thread; they serialise on one store lock
(the broker calls from its event loop, the delay scheduler from its timer). The
flush thread syncs files without that lock.

A put encodes its records together with their dispatch data (:mod:`rocklet.store._encoder`),
writes them with one copy, then writes the consume-queue entries and index keys from
that data, so a record is readable by queue when the put returns. Recovery dispatches
by parsing records instead (:mod:`rocklet.store._reput`); both build identical files.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence, Set
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Final, cast

import structlog

from rocklet.protocol.message import TRANSACTION_MASK
from rocklet.protocol.properties import Prop
from rocklet.store._checkpoint import Checkpoint
from rocklet.store._commitlog import CommitLog
from rocklet.store._consume_queue import ENTRY, ConsumeQueue
from rocklet.store._damage import DamagedRange
from rocklet.store._dispatch_request import DispatchRequest
from rocklet.store._encoder import NOT_IN_QUEUE, EncodedBatch, encode_batch, rewrite_delay
from rocklet.store._files import NoSpaceError
from rocklet.store._flush import FlushService
from rocklet.store._index_service import IndexService
from rocklet.store._raw_batch import RawBatch, encode_raw_batch
from rocklet.store._reader import (
    earliest_store_time,
    get_messages,
    matching_records,
    offset_for_time,
)
from rocklet.store._recovery import (
    QueueCrossCheck,
    RecoveryReport,
    blank_damaged_entries,
    recover_commitlog,
    recover_consume_queues,
    recover_index,
    resync_handler,
)
from rocklet.store._reput import ReputService
from rocklet.store.config import FlushDiskType, StoreConfig
from rocklet.store.directory import StoreLock
from rocklet.store.disk_space import DiskSpace
from rocklet.store.dropped_queues import DroppedQueues
from rocklet.store.results import (
    GetResult,
    MessageArrivingListener,
    MessageToStore,
    PutMessageStatus,
    PutResult,
)
from rocklet.transport.clock import Clock, SystemClock

__all__ = ["MessageStore"]

log = structlog.get_logger(__name__)

_DELAY: Final = Prop.DELAY


class MessageStore:
    """A RocketMQ-layout message store. Build with :meth:`open`.

    Any thread may call the public methods; they take the store lock.
    """

    def __init__(
        self, config: StoreConfig, listener: MessageArrivingListener | None, clock: Clock
    ) -> None:
        root = config.store_path
        self.config = config
        self.clock = clock
        self.listener = listener
        self._lock = threading.RLock()
        self._closed = False
        self._dir_lock: StoreLock | None = None
        self.commitlog = CommitLog(
            config.commitlog_dir,
            config.commitlog_file_size_bytes,
            config.commitlog_page_ahead_bytes,
        )
        self.checkpoint = Checkpoint(root / "checkpoint")
        self.index = IndexService(
            root / "index", config.index_hash_slots, config.index_max_entries, clock
        )
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.dropped = DroppedQueues.load(root)  # (store/dropped_queues.py says why)
        self._next_queue_offset: dict[tuple[str, int], int] = {}
        self._logics_ts = 0
        dispatchers = [self._dispatch_consume_queue]
        if config.message_index_enable:
            dispatchers.append(self._dispatch_index)
        self.reput = ReputService(self.commitlog, dispatchers, 0, config.delay_levels_ms)
        self.flush_service = FlushService(
            config, self.commitlog, self.checkpoint, self._flush_logics, clock
        )
        #: Disk usage and whether puts are refused for want of space.
        self.disk = DiskSpace(config, clock)
        self._rolled = False  # a put is creating a segment (measure after, too)
        self.recovery_report: RecoveryReport
        self._ignored: list[Path] = []

    # ------------------------------------------------------------------ open / close

    @classmethod
    def open(
        cls,
        config: StoreConfig,
        *,
        listener: MessageArrivingListener | None = None,
        clock: Clock | None = None,
        dir_lock: StoreLock | None = None,
    ) -> MessageStore:
        """Lock the store directory, open (or create) the store, recover it, start flushing.

        Args:
            config: Store settings.
            listener: Told about each message dispatched after recovery.
            clock: Time source (default :class:`~rocklet.transport.clock.SystemClock`).
            dir_lock: The store root's lock, already taken by the caller (the broker
                takes it before anything else); taken here when ``None``. Either way
                the store owns it from now on and releases it in :meth:`close` (or
                here, if opening fails).

        Returns:
            The open store; :attr:`recovery_report` says what recovery did.

        Raises:
            StoreInUseError: Another process has the store open.
            StoreDirectoryError: The store root cannot be created or locked.
        """
        if dir_lock is None:
            dir_lock = StoreLock.acquire(config.store_path, "rocklet store", config.commitlog_dir)
        try:
            store = cls(config, listener, clock or SystemClock())
            store._dir_lock = dir_lock
            store._recover()
            store.disk.check()  # a store opened on a full disk refuses puts from the start
            store.flush_service.flushed_offset = store.commitlog.max_offset()
            store.flush_service.start()
            store.commitlog.page_ahead.start()
        except BaseException:
            dir_lock.release()
            raise
        return store

    def _recover(self) -> None:
        started = self.clock.monotonic_ms()
        root = self.config.store_path
        root.mkdir(parents=True, exist_ok=True)
        if not self.checkpoint.path.exists():
            # Created now, with its page reserved, rather than at the first flush, when
            # the disk may have filled up.
            try:
                self.checkpoint.flush()
            except NoSpaceError:
                log.warning("no room for the checkpoint yet", path=str(self.checkpoint.path))
        abort = root / "abort"
        clean = not abort.exists()
        self.commitlog.load()
        self._load_queues(root / "consumequeue")
        self.index.load()
        self.dropped.forget_below(self.commitlog.min_offset())
        cross = QueueCrossCheck(self.queues, self.dropped)
        cl = recover_commitlog(
            self.commitlog,
            self.checkpoint,
            clean=clean,
            check_crc=self.config.check_crc_on_recover,
            with_index=self.config.message_index_enable,
            on_record=cross,
            delay_levels_ms=self.config.delay_levels_ms,
        )
        # Entries of damaged records become blanks first, so the checks below keep
        # the entries after them instead of rebuilding the queue from there.
        blanked = blank_damaged_entries(self.queues.values(), cl.damaged)
        truncated_q, dropped, cq_from = recover_consume_queues(
            self.commitlog, self.queues.values(), cl.end, cross
        )
        index_dropped, index_from = recover_index(self.index, self.commitlog, cl.end)
        if cl.redispatch_from is not None:
            start = cl.redispatch_from
        else:
            start = max([q.max_physic_offset for q in self.queues.values()], default=0)
        start = max(self.commitlog.min_offset(), min(start, cq_from, index_from, cl.end))
        self.reput.reput_from = start
        self.reput.skip(cl.damaged)
        found: list[DamagedRange] = []  # damage outside the scanned segments
        self.reput.on_damage = resync_handler(found)
        try:
            redispatched = self.reput.run_once()
        finally:
            self.reput.on_damage = None
        blanked += blank_damaged_entries(self.queues.values(), found)
        for key, cq in self.queues.items():
            self._next_queue_offset[key] = cq.max_offset()
        abort.touch()
        ignored = [*self.commitlog.files.ignored, *self.index.ignored, *self._ignored]
        for cq in self.queues.values():
            ignored += cq.files.ignored
        self.recovery_report = RecoveryReport(
            clean=clean,
            commitlog_max_offset=cl.end,
            truncated_bytes=cl.truncated_bytes,
            redispatched=redispatched,
            consume_queues_truncated=truncated_q,
            consume_queue_entries_dropped=dropped,
            index_files_dropped=index_dropped,
            index_entries=sum(f.index_count - 1 for f in self.index.files),
            elapsed_ms=self.clock.monotonic_ms() - started,
            damaged=tuple(sorted([*cl.damaged, *found], key=lambda r: r.offset)),
            consume_queue_entries_blanked=blanked,
            ignored_files=tuple(str(p) for p in ignored),
        )
        rep = self.recovery_report
        log.info(
            "store recovered",
            **{
                k: getattr(rep, k)
                for k in ("clean", "commitlog_max_offset", "truncated_bytes", "redispatched")
            },
            damaged_bytes=rep.damaged_bytes,
            damaged_ranges=len(rep.damaged),
        )

    def _load_queues(self, directory: Path) -> None:
        if not directory.exists():
            return
        for topic_dir in sorted(directory.iterdir()):
            if not topic_dir.is_dir():
                self._ignore(topic_dir)
                continue
            for qdir in sorted(topic_dir.iterdir()):
                if qdir.name.isdigit() and qdir.is_dir():
                    cq = self._new_queue(topic_dir.name, int(qdir.name))
                    cq.load()
                else:
                    self._ignore(qdir)

    def _ignore(self, path: Path) -> None:
        # A stray file (a README, an editor's backup) must not stop the broker.
        log.warning("ignoring a file that is not a store file", path=str(path))
        self._ignored.append(path)

    def _new_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        path = self.config.store_path / "consumequeue" / topic / str(queue_id)
        cq = ConsumeQueue(topic, queue_id, path, self.config.consume_queue_entries_per_file)
        self.queues[(topic, queue_id)] = cq
        return cq

    def close(self) -> None:
        """Flush, checkpoint, remove the abort marker, unlock the directory (idempotent).

        Call from the owner thread once no other thread uses the store.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.commitlog.page_ahead.stop()
        try:
            self.flush_service.stop()
        except OSError:
            # Keep the abort marker: the next start recovers as after a crash.
            log.exception("final flush failed; the next start checks the store as after a crash")
        else:
            (self.config.store_path / "abort").unlink(missing_ok=True)
        self.commitlog.close()
        for cq in self.queues.values():
            cq.close()
        self.index.close()
        if self._dir_lock is not None:
            self._dir_lock.release()  # last: the files are closed and the marker gone

    def __enter__(self) -> MessageStore:
        """Use as a context manager; :meth:`close` on exit."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the store."""
        self.close()

    # ------------------------------------------------------------------ dispatch

    def _dispatch_consume_queue(self, req: DispatchRequest) -> None:
        if req.sys_flag & TRANSACTION_MASK in NOT_IN_QUEUE:
            return  # CommitLogDispatcherBuildConsumeQueue skips half / rolled-back
        key = (req.topic, req.queue_id)
        if self.dropped.marks and self.dropped.below(key, req.commitlog_offset):
            return  # a record of a queue dropped with its topic: not brought back
        cq = self.queues.get(key)
        if cq is None:
            cq = self._new_queue(req.topic, req.queue_id)
        if cq.put(req.commitlog_offset, req.size, req.tags_code, req.queue_offset):
            self._logics_ts = req.store_timestamp
            if self.listener is not None and not self._closed:
                self.listener.arriving(
                    req.topic, req.queue_id, cq.max_offset(), req.tags_code, req.store_timestamp
                )
        elif req.queue_offset == 0 and req.commitlog_offset >= cq.max_physic_offset:
            # Offset 0 again, and not a replay: a slave's master dropped the queue
            # (deleteTopic) and made it again. Follow it from this record. (Only offset
            # 0: any other record below the queue's end is left out, as before.)
            log.warning("queue numbered from a lower offset again: its old files go", key=key)
            self.dropped.add([key], req.commitlog_offset, self.commitlog.min_offset())
            self.forget_queue(key)
            self._dispatch_consume_queue(req)

    def forget_queue(self, key: tuple[str, int]) -> None:
        """Forget a queue, delete its files (mark it in :attr:`dropped` first). Store lock held."""
        self.queues.pop(key).delete_files()
        self._next_queue_offset.pop(key, None)  # numbered from 0 again, as in RocketMQ

    def _dispatch_index(self, req: DispatchRequest) -> None:
        self.index.build(req)

    def _flush_logics(self) -> tuple[int, int]:
        logics_ts, index_ts = self._logics_ts, self.index.last_timestamp
        for cq in list(self.queues.values()):
            cq.flush()
        self.index.flush()
        return logics_ts, index_ts

    # ------------------------------------------------------------------ put

    def put_message(self, msg: MessageToStore) -> PutResult:
        """Append one message, dispatch it, and (SYNC_FLUSH) return a durability future.

        Any thread; takes the store lock. A DELAY level on a normal topic rewrites the
        message to ``SCHEDULE_TOPIC_XXXX`` queue level-1 (``CommitLog.asyncPutMessage``).

        Args:
            msg: The message.

        Returns:
            The result; MESSAGE_ILLEGAL / PROPERTIES_SIZE_EXCEEDED for refused input.
        """
        return self.put_messages([msg])

    def put_messages(self, msgs: Sequence[MessageToStore]) -> PutResult:
        """Append a batch contiguously with consecutive queue offsets.

        Any thread; takes the store lock. All messages must share topic and queue (also
        after the DELAY rewrite) and transaction type.

        Args:
            msgs: The messages (at least one).

        Returns:
            The result for the whole batch.
        """
        if self._closed:
            return PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        n = len(msgs)
        if not n or (n > 1 and not _one_queue(msgs)):
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        # A single send (the usual put) is tested without a generator.
        if _DELAY in msgs[0].properties if n == 1 else any(_DELAY in m.properties for m in msgs):
            levels = len(self.config.delay_levels_ms)
            msgs = [rewrite_delay(m, levels) for m in msgs]
            if not _one_queue(msgs):
                return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        first = msgs[0]
        result = self._put_encoded((first.topic, first.queue_id), self._encode, msgs, True)
        assert result is not None  # put_messages always answers
        return result

    def put_raw_batch(self, raw: RawBatch) -> PutResult | None:
        """Append a batch body's messages without a Python object per message.

        What :meth:`put_messages` does with the batch's decoded messages, for the usual
        batch (:mod:`rocklet.store._raw_batch`). Any thread; takes the store lock.

        Args:
            raw: The batch body and what its messages share.

        Returns:
            The result of a stored batch (PUT_OK, or a refusal that does not depend on
            the messages: no room); ``None`` when nothing was stored and the caller must
            decode the batch and use :meth:`put_messages`, which decides as before
            (malformed or unusual bodies, and a closed or full store).
        """
        if self._closed:
            return None
        return self._put_encoded((raw.topic, raw.queue_id), self._encode_raw, raw, False)

    def _put_encoded(
        self,
        key: tuple[str, int],
        encode: Callable[[Any, int, int, int], EncodedBatch | PutMessageStatus | None],
        source: Any,
        answer_unavailable: bool,
    ) -> PutResult | None:
        """Encode under the store lock, write, dispatch, then ask for the flush.

        ``encode(source, phy, qoff, now)`` encodes the records as if appended at
        ``phy``: a status refuses them, None leaves them to the caller (as does a
        closed or full store unless ``answer_unavailable``). It runs again at the new
        offset when the records roll to a new segment (once per segment); validation
        does not depend on the offset, so it succeeds again.
        """
        with self._lock:
            if self._closed or (self.disk.full and self.disk.still_full()):
                return (
                    PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
                    if answer_unavailable
                    else None
                )
            phy = self.commitlog.files.max_offset()  # CommitLog.max_offset, one call less
            qoff = self._next_queue_offset.get(key, 0)
            now = self.clock.now_ms()
            enc = encode(source, phy, qoff, now)
            if type(enc) is not EncodedBatch:
                return None if enc is None else PutResult(cast(PutMessageStatus, enc))
            try:
                at = self._make_room(key, enc, qoff, phy)
            except NoSpaceError as exc:
                self.disk.no_room(exc.path, exc.size)
                return PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
            except OSError as exc:
                log.error("creating a store file failed", error=str(exc))
                return PutResult(PutMessageStatus.CREATE_MAPPED_FILE_FAILED)
            if at is None:
                return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
            if isinstance(at, PutMessageStatus):
                return PutResult(at)
            if at != phy:
                enc = cast(EncodedBatch, encode(source, at, qoff, now))
            # Into blocks reserved when the segment was created: no room is needed.
            self.commitlog.write(enc.data, now)
            end = at + len(enc.data)
            self._dispatch_batch(key, enc, qoff, now, end)
            count = len(enc.offsets)
            self.reput.reput_from = end
            self.reput.dispatched += count
        durable = None
        if self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            durable = self.flush_service.request(end)
        else:
            self.flush_service.wakeup_if_due(end)
        return PutResult(
            PutMessageStatus.PUT_OK,
            at,
            len(enc.data),
            qoff if enc.queued else 0,
            count,
            now,
            tuple(enc.offsets),
            durable,
        )

    def _make_room(
        self, key: tuple[str, int], enc: EncodedBatch, qoff: int, phy: int
    ) -> int | PutMessageStatus | None:
        """Create every file the put needs before anything is written; store lock held.

        Consume-queue and index files are reserved, then the commitlog rolls if it must,
        so a disk without room refuses the put whole (``NoSpaceError``) and leaves the
        store as it was. A roll measures the disk first. In the usual case (everything
        fits the current files) this costs a few comparisons.

        Returns:
            Where the records go; a status when the disk is full; None when they
            cannot fit a segment.

        Raises:
            NoSpaceError: A file could not be created for want of room.
            OSError: A file could not be created.
        """
        if self.reput.reput_from < phy:
            # Only if an earlier put failed between writing and dispatching.
            self.reput.run_once()
        if enc.queued:
            cq = self.queues.get(key)
            if cq is None:
                cq = self._new_queue(*key)
            cq.reserve(qoff, len(enc.offsets))
        if enc.indexed:
            self.index.reserve(len(enc.key_hashes))
        try:
            at = self.commitlog.append_offset(len(enc.data), self._check_disk_before_roll)
        except _DiskFull:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self._rolled:
            # Measured again with the new segment counted: if it took the disk past the
            # warning level, the next put is refused now, not at the next timed check.
            self._rolled = False
            self.disk.check()
        return at

    def _check_disk_before_roll(self) -> None:
        # A new segment is the moment to measure: it is what takes the room.
        if self.disk.check().full:
            raise _DiskFull
        self._rolled = True

    def _encode_raw(self, raw: RawBatch, phy: int, qoff: int, now: int) -> EncodedBatch | None:
        cfg = self.config
        return encode_raw_batch(
            raw,
            phy,
            qoff,
            now,
            max_body=cfg.max_message_size_bytes,
            segment_size=cfg.commitlog_file_size_bytes,
            index=cfg.message_index_enable,
        )

    def _encode(
        self, msgs: Sequence[MessageToStore], phy: int, qoff: int, now: int
    ) -> EncodedBatch | PutMessageStatus:
        cfg = self.config
        return encode_batch(
            msgs,
            phy,
            qoff,
            now,
            max_body=cfg.max_message_size_bytes,
            segment_size=cfg.commitlog_file_size_bytes,
            index=cfg.message_index_enable,
            delay_levels_ms=cfg.delay_levels_ms,
        )

    def _dispatch_batch(
        self, key: tuple[str, int], enc: EncodedBatch, qoff: int, now: int, end: int
    ) -> None:
        # What ReputService + the two dispatchers would do, from the encoder's data.
        if enc.queued:
            cq = self.queues.get(key)
            if cq is None:
                cq = self._new_queue(*key)
            self._next_queue_offset[key] = qoff + len(enc.offsets)
            if cq.append_entries(enc.cq_entries, qoff, end):
                self._logics_ts = now
                if self.listener is not None and not self._closed:
                    self.listener.arrived(key[0], key[1], qoff, enc.tags_codes, now)
            else:  # the queue does not end at qoff (never expected): as reput would
                for n, (phy, size, code) in enumerate(ENTRY.iter_unpack(enc.cq_entries)):
                    req = DispatchRequest(*key, phy, size, code, now, qoff + n, "", "", 0)
                    self._dispatch_consume_queue(req)
        if enc.indexed:
            self.index.build_keys(enc.key_hashes, enc.key_offsets, now)

    # ------------------------------------------------------------------ reads

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int | None = None,
        tag_codes: Set[int] | None = None,
        record_filter: Callable[[memoryview], bool] | None = None,
    ) -> GetResult:
        """Read records of one queue (``getMessage``). Any thread; takes the store lock.

        Args:
            topic: Topic.
            queue_id: Queue id.
            offset: First queue offset wanted.
            max_count: Most records.
            max_bytes: Most bytes (default ``config.max_transfer_bytes``).
            tag_codes: Accepted tags codes, or None for all.
            record_filter: Whether a whole record (past ``tag_codes``) is wanted, or
                None for all (the SQL92 property filter).

        Returns:
            The result; its buffers are views into the mapped commitlog.
        """
        with self._lock:
            return get_messages(
                self.queues.get((topic, queue_id)),
                self.commitlog,
                offset,
                max_count,
                self.config.max_transfer_bytes if max_bytes is None else max_bytes,
                tag_codes,
                record_filter,
            )

    def read_record(self, offset: int) -> memoryview | None:
        """The whole record at a commitlog offset. Any thread; takes the store lock.

        Args:
            offset: Commitlog offset (e.g. from an offset msgId).

        Returns:
            A view of the record, or None if there is no record there.
        """
        with self._lock:
            size = self.commitlog.record_size_at(offset)
            return self.commitlog.read(offset, size) if size else None

    def query_by_key(
        self, topic: str, key: str, max_num: int, begin_ms: int = 0, end_ms: int = 2**63 - 1
    ) -> list[memoryview]:
        """Records of ``topic`` with KEYS or UNIQ_KEY ``key`` stored in [begin, end].

        Any thread; takes the store lock. The real key is compared, because index
        hashes collide.

        Args:
            topic: Topic.
            key: One key or a UNIQ_KEY.
            max_num: Most records.
            begin_ms: Earliest store time.
            end_ms: Latest store time.

        Returns:
            Views of the matching records in commitlog order, as RocketMQ's
            ``queryMessage`` sorts them. With more than ``max_num`` matches the newest
            ``max_num`` are kept (the index is walked newest first, as there).
        """
        with self._lock:
            candidates = self.index.query(topic, key, max(max_num * 4, 64), begin_ms, end_ms)
            return matching_records(
                self.commitlog, candidates, topic, key, max_num, begin_ms, end_ms
            )

    def min_offset(self, topic: str, queue_id: int) -> int:
        """A queue's min offset (0 if unknown). Any thread; takes the store lock."""
        with self._lock:
            cq = self.queues.get((topic, queue_id))
            return cq.min_offset() if cq else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """A queue's max offset, the next to be written. Any thread; takes the store lock."""
        with self._lock:
            cq = self.queues.get((topic, queue_id))
            return cq.max_offset() if cq else 0

    def offset_for_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First queue offset stored at or after ``timestamp_ms``. Any thread; store lock."""
        with self._lock:
            cq = self.queues.get((topic, queue_id))
            return offset_for_time(cq, self.commitlog, timestamp_ms) if cq else 0

    def earliest_store_time(self, topic: str, queue_id: int) -> int:
        """Store time of a queue's first live record, -1 if none. Any thread; store lock."""
        with self._lock:
            cq = self.queues.get((topic, queue_id))
            return earliest_store_time(cq, self.commitlog) if cq else -1

    def commitlog_min_offset(self) -> int:
        """The commitlog's min offset. Any thread; takes the store lock."""
        with self._lock:
            return self.commitlog.min_offset()

    def commitlog_max_offset(self) -> int:
        """The commitlog's max offset. Any thread; takes the store lock."""
        with self._lock:
            return self.commitlog.max_offset()

    def sync_to(self, end_offset: int) -> Future[bool]:
        """Have the commitlog made durable up to ``end_offset`` now, in either flush mode.

        For work that records its own progress after putting messages (delayed
        delivery): that record must not reach the disk before the messages do. Any
        thread.

        Args:
            end_offset: Commitlog offset just past the last byte that must be durable.

        Returns:
            Completed with True once it is, or with an ``OSError`` if the sync failed.
        """
        return self.flush_service.request(end_offset)

    @property
    def lock(self) -> threading.RLock:
        """The store lock (retention and the delay service run under it)."""
        return self._lock


class _DiskFull(Exception):
    """The disk was found full just before a commitlog segment would be created."""


def _one_queue(msgs: Sequence[MessageToStore]) -> bool:
    topic, queue_id = msgs[0].topic, msgs[0].queue_id
    return all(m.topic == topic and m.queue_id == queue_id for m in msgs)
