"""Delayed delivery (``ScheduleMessageService``): re-put due schedule-topic messages.

Per delay level L, queue L-1 of ``SCHEDULE_TOPIC_XXXX`` holds the delayed messages in
store order with their deliver time in the consume-queue tags field. Delivery reads
from the level's delivered offset while the deliver time has come, re-puts each message
to its REAL_TOPIC / REAL_QID (DELAY and REAL_* removed, reconsume times kept) and
advances the offset, persisted to ``config/delayOffset.json``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import structlog

from rocklet.protocol.message import decode_message
from rocklet.protocol.names import SCHEDULE_TOPIC
from rocklet.protocol.properties import Prop
from rocklet.store._consume_queue import BLANK_ENTRY_SIZE
from rocklet.store.message_store import MessageStore
from rocklet.store.results import MessageToStore

__all__ = ["DelayDeliveryService", "read_delay_offsets"]

log = structlog.get_logger(__name__)

#: fastjson writes integer map keys unquoted: ``{1:12}``.
_UNQUOTED_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


def read_delay_offsets(path: Path) -> dict[int, int]:
    """Read ``delayOffset.json`` as RocketMQ (unquoted keys) or we (quoted) write it.

    Args:
        path: The file.

    Returns:
        Delay level to delivered offset; empty if the file is missing.
    """
    try:
        raw = path.read_text("utf-8")
    except FileNotFoundError:
        # Also between persist()'s two renames: an admin's GET_BROKER_RUNTIME_INFO
        # racing the delay service found no file after exists() said there was one.
        return {}
    text = _UNQUOTED_KEY.sub(r'\1"\2"\3', raw)
    table = json.loads(text).get("offsetTable", {})
    return {int(k): int(v) for k, v in table.items()}


class DelayDeliveryService:
    """Delivers due delayed messages. :meth:`run_once` from one timer thread at a time.

    Args:
        store: The open store.
    """

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.path = store.config.store_path / "config" / "delayOffset.json"
        self.offsets = read_delay_offsets(self.path)

    def run_once(self, now_ms: int) -> int:
        """Deliver every message whose deliver time is ≤ ``now_ms``.

        Args:
            now_ms: The current time.

        Returns:
            Messages delivered.
        """
        delivered = 0
        for level in range(1, len(self.store.config.delay_levels_ms) + 1):
            delivered += self._deliver_level(level, now_ms)
        if delivered:
            self.persist()
        return delivered

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
                self._redeliver(view)
                offset = qoff + 1
                count += 1
            if not due:
                break
        self.offsets[level] = offset
        return count

    def _redeliver(self, view: memoryview) -> None:
        msg = decode_message(view)
        props = dict(msg.properties)
        topic = props.pop(Prop.REAL_TOPIC, msg.topic)
        queue_id = int(props.pop(Prop.REAL_QID, str(msg.queue_id)))
        props.pop(Prop.DELAY, None)
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
            )
        )
        if not result.ok:
            log.error("delayed message re-put failed", topic=topic, status=result.status.value)

    def persist(self) -> None:
        """Write ``delayOffset.json`` atomically (temp, fsync, rename; ``.bak`` kept)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"offsetTable": {str(k): v for k, v in sorted(self.offsets.items())}})
        tmp = self.path.with_suffix(".json.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        if self.path.exists():
            os.replace(self.path, self.path.with_suffix(".json.bak"))
        os.replace(tmp, self.path)
