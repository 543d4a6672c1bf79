"""Delayed delivery (``ScheduleMessageService``): re-put due schedule-topic messages.

Per delay level L, queue L-1 of ``SCHEDULE_TOPIC_XXXX`` holds the delayed messages in
store order with their deliver time in the consume-queue tags field. Delivery reads
from the level's delivered offset while the deliver time has come, re-puts each message
to its REAL_TOPIC / REAL_QID and advances the offset, persisted to
``config/delayOffset.json``. The delivered message keeps every property, DELAY and
REAL_* included, as RocketMQ 4.9.4 stores it (its ``messageTimeup`` serialises the
properties before clearing DELAY), and its reconsume times.

Ordering, so that no crash loses a delayed message: a level's offset moves past a
message only once its re-put succeeded (a refused re-put is tried again next round),
and ``delayOffset.json`` is written (atomically, fsynced) only after the commitlog is
on disk up to the last re-put it accounts for, in either flush mode. The file is
written at most once per ``persist_interval_ms`` (and at stop), so after a crash the
messages delivered since the last write are delivered again: delayed delivery is
at least once.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import structlog

from rocklet.protocol.message import decode_message
from rocklet.protocol.names import SCHEDULE_TOPIC
from rocklet.protocol.properties import Prop
from rocklet.store._consume_queue import BLANK_ENTRY_SIZE
from rocklet.store.durable_file import replace_file
from rocklet.store.message_store import MessageStore
from rocklet.store.results import MessageToStore

__all__ = ["DelayDeliveryService", "read_delay_offsets"]

log = structlog.get_logger(__name__)

#: fastjson writes integer map keys unquoted: ``{1:12}``.
_UNQUOTED_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


def read_delay_offsets(path: Path) -> dict[int, int]:
    """Read ``delayOffset.json`` as RocketMQ (unquoted keys) or we (quoted) write it.

    Falls back to ``delayOffset.json.bak`` when the file is missing (a crash between
    the two renames of :func:`~rocklet.store.durable_file.replace_file`), as RocketMQ's
    ``ConfigManager.load`` does.

    Args:
        path: The file.

    Returns:
        Delay level to delivered offset; empty if neither file exists.
    """
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            raw = candidate.read_text("utf-8")
        except FileNotFoundError:
            # No file yet, or a crash (or a reader racing persist()) between
            # replace_file's two renames: the backup holds the previous table.
            continue
        table = json.loads(_UNQUOTED_KEY.sub(r'\1"\2"\3', raw)).get("offsetTable", {})
        return {int(k): int(v) for k, v in table.items()}
    return {}


class DelayDeliveryService:
    """Delivers due delayed messages.

    :meth:`run_once` and :meth:`persist` block on the disk: call them from worker
    threads, never an event loop. They never overlap (a lock): the broker's stop may
    persist while the thread of a cancelled round still runs.

    Args:
        store: The open store.
        persist_interval_ms: Shortest time between two writes of ``delayOffset.json``.
        sync_timeout_s: Longest wait for the commitlog sync that precedes a write.
    """

    def __init__(
        self,
        store: MessageStore,
        *,
        persist_interval_ms: int = 1000,
        sync_timeout_s: float = 5.0,
    ) -> None:
        self.store = store
        self.path = store.config.store_path / "config" / "delayOffset.json"
        self.offsets = read_delay_offsets(self.path)
        self._refused = False  # the last re-put was refused (logged once)
        self._persist_interval_ms = persist_interval_ms
        self._sync_timeout_s = sync_timeout_s
        #: Commitlog offset just past the latest re-put (what must be durable first).
        self._reput_end = 0
        self._dirty = False
        self._last_persist_ms: int | None = None
        self._lock = threading.RLock()

    def run_once(self, now_ms: int) -> int:
        """Deliver every message whose deliver time is ≤ ``now_ms``.

        Writes ``delayOffset.json`` afterwards when something was delivered since the
        last write and ``persist_interval_ms`` has passed.

        Args:
            now_ms: The current time.

        Returns:
            Messages delivered.
        """
        with self._lock:
            delivered = 0
            for level in range(1, len(self.store.config.delay_levels_ms) + 1):
                delivered += self._deliver_level(level, now_ms)
            if delivered:
                self._dirty = True
            last = self._last_persist_ms
            due = last is None or now_ms - last >= self._persist_interval_ms
            if self._dirty and due and self.persist():
                self._last_persist_ms = now_ms
            return delivered

    def has_work(self) -> bool:
        """Whether :meth:`run_once` could do anything now. Cheap; any thread.

        True while a level's queue holds messages past its delivered offset (due or
        not) or delivered offsets wait to be written. Most of the time neither holds,
        and the broker then skips the round instead of waking a worker thread (and
        handing it the GIL) ten times a second for nothing.

        Returns:
            Whether a round is worth running.
        """
        if self._dirty:
            return True
        store = self.store
        for level in range(1, len(store.config.delay_levels_ms) + 1):
            queue = (SCHEDULE_TOPIC, level - 1)
            if queue in store.queues and self.offsets.get(level, 0) < store.max_offset(*queue):
                return True
        return False

    def _deliver_level(self, level: int, now_ms: int) -> int:
        store = self.store
        if (SCHEDULE_TOPIC, level - 1) not in store.queues:
            return 0
        offset = max(self.offsets.get(level, 0), store.min_offset(SCHEDULE_TOPIC, level - 1))
        count = 0
        while True:
            result = store.get_messages(SCHEDULE_TOPIC, level - 1, offset, 32, 1 << 30)
            if not result.buffers:
                offset = max(offset, min(result.next_begin_offset, result.max_offset))
                break
            cq = store.queues[(SCHEDULE_TOPIC, level - 1)]
            due = True
            for qoff, view in zip(result.queue_offsets, result.buffers, strict=True):
                entry = cq.entry(qoff)
                if entry is None or (entry[1] != BLANK_ENTRY_SIZE and entry[2] > now_ms):
                    due = False
                    break
                if not self._redeliver(view):
                    # Refused (a full disk): not delivered, so the offset stays and the
                    # message is tried again next round; dropping it would lose it.
                    due = False
                    break
                offset = qoff + 1
                count += 1
            if not due:
                break
        self.offsets[level] = offset
        return count

    def _redeliver(self, view: memoryview) -> bool:
        msg = decode_message(view)
        props = msg.properties
        topic = props.get(Prop.REAL_TOPIC, msg.topic)
        queue_id = int(props.get(Prop.REAL_QID, str(msg.queue_id)))
        result = self.store.put_message(
            MessageToStore(
                topic,
                queue_id,
                msg.body,
                props,
                msg.flag,
                msg.sys_flag,
                msg.born_timestamp,
                view[48:56].tobytes(),
                view[64:72].tobytes(),
                msg.reconsume_times,
                msg.prepared_transaction_offset,
                delay_done=True,
            )
        )
        if not result.ok:
            if not self._refused:  # once per run of refusals: every 100 ms otherwise
                log.error(
                    "delayed message re-put failed; retrying each round",
                    topic=topic,
                    status=result.status.value,
                )
            self._refused = True
            return False
        self._reput_end = max(self._reput_end, result.wrote_offset + result.wrote_bytes)
        if self._refused:
            log.info("delayed messages are delivered again")
        self._refused = False
        return True

    def persist(self) -> bool:
        """Write ``delayOffset.json``, once every re-put it accounts for is on disk.

        The commitlog is synced up to the latest re-put first (in either flush mode),
        then the file is replaced atomically and durably (``.bak`` kept). Blocking.

        Returns:
            Whether the file was written; if not (the sync failed or timed out, or the
            write failed), the reason is logged and a later call tries again.
        """
        with self._lock:
            offsets = {str(k): v for k, v in sorted(self.offsets.items())}
            body = json.dumps({"offsetTable": offsets})
            try:
                if self._reput_end and not self.store.sync_to(self._reput_end).result(
                    self._sync_timeout_s
                ):
                    raise OSError("commitlog sync failed")
                replace_file(self.path, body.encode())
            except (OSError, TimeoutError) as exc:
                log.error("delayOffset.json not written", error=str(exc) or type(exc).__name__)
                return False
            self._dirty = False
            return True
