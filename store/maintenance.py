"""Store maintenance on demand (``mqadmin cleanExpiredCQ``, ``cleanUnusedTopic``, ``queryCq``).

RocketMQ's ``DefaultMessageStore`` equivalents:

- :func:`clean_expired_queues` is ``cleanExpiredConsumerQueue``: a queue whose newest
  entry points below the commitlog's min offset only indexes deleted messages, so its
  files go; the delayed-delivery queues are never touched. Every other queue is then
  trimmed as retention trims it (:func:`~rocklet.store.retention.clean_logics`).
- :func:`clean_unused_topics` is ``cleanUnusedTopic``: the queues of topics the broker
  no longer has a config for go, except the delayed-delivery and transaction-op queues,
  which the broker writes without a topic config. ``deleteTopic`` runs it for
  its topic. The drop is written down first (:mod:`~rocklet.store.dropped_queues`),
  so no start brings the records back.
- :func:`queue_entries` reads raw entries for ``QUERY_CONSUME_QUEUE``.

Everything runs under the store lock, so no put, pull, reput or retention pass sees a
queue half removed. A dropped queue starts again at offset 0 if its topic is written
again, as RocketMQ's ``removeQueueFromTopicQueueTable`` makes it. Files a reader still
maps are unlinked at once and their maps left to the reader (the kernel frees them
when the last view goes). Both operations are idempotent: a second call finds nothing
left to drop.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import structlog

from rocklet.protocol.names import SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC
from rocklet.store._consume_queue import ENTRY, ConsumeQueue
from rocklet.store._files import unlink_all
from rocklet.store.message_store import MessageStore
from rocklet.store.retention import clean_logics

__all__ = ["QueueEntries", "clean_expired_queues", "clean_unused_topics", "queue_entries"]

log = structlog.get_logger(__name__)

#: Queues ``cleanUnusedTopic`` keeps although no topic config names them.
_KEPT_WITHOUT_CONFIG = frozenset({SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC})
#: RocketMQ 4.9.4's light message queues (``MixAll.isLmq``), kept the same way.
_LMQ_PREFIX = "%LMQ%"


class QueueEntries(NamedTuple):
    """A queue's bounds and some of its raw entries."""

    min_offset: int
    max_offset: int
    #: (commitlog offset, size, tags code) from the asked index; None if not stored.
    entries: list[tuple[int, int, int]] | None


def queue_entries(
    store: MessageStore, topic: str, queue_id: int, index: int, count: int
) -> QueueEntries | None:
    """Raw entries of a queue from ``index``, at most ``count``, from one file.

    As RocketMQ's ``getIndexBuffer`` the read stops at the end of the file holding
    ``index``. Any thread; takes the store lock.

    Args:
        store: The store.
        topic: Topic.
        queue_id: Queue id.
        index: First queue offset.
        count: Most entries.

    Returns:
        The bounds and entries, or None when the store has no such queue.
    """
    with store.lock:
        cq = store.queues.get((topic, queue_id))
        if cq is None:
            return None
        block = cq.entries(index) if index >= 0 else None
        entries = None
        if block is not None:
            wanted = min(len(block) // ENTRY.size, max(0, count))
            entries = list(ENTRY.iter_unpack(block[: wanted * ENTRY.size]))
        return QueueEntries(cq.min_offset(), cq.max_offset(), entries)


def clean_expired_queues(store: MessageStore) -> list[tuple[str, int]]:
    """Drop queues that only index deleted messages, then trim the others.

    Any thread; takes the store lock.

    Args:
        store: The store.

    Returns:
        The (topic, queue id) pairs dropped.
    """
    dropped: list[tuple[str, int]] = []
    unlink_later: list[Path] = []  # index files are big: unlinked once the lock is free
    with store.lock:
        cl_min = store.commitlog.min_offset()
        for key, cq in sorted(store.queues.items()):
            if key[0] == SCHEDULE_TOPIC:
                continue
            # max_physic_offset is the end of the newest indexed record (-1: nothing
            # indexed yet, RocketMQ's "maybe created just now"): all of it is gone when
            # that end is at or below the min, since records never straddle segments.
            if 0 < cq.max_physic_offset <= cl_min:
                store.forget_queue(key)  # (nothing of it left to mark)
                dropped.append(key)
        clean_logics(store, unlink_later)
    unlink_all(unlink_later)
    for topic, queue_id in dropped:
        log.info("expired consume queue removed", topic=topic, queue=queue_id, min_offset=cl_min)
    return dropped


def clean_unused_topics(
    store: MessageStore, has_topic: Callable[[str], bool], only: str | None = None
) -> list[str]:
    """Drop the queues of every topic ``has_topic`` no longer knows.

    Any thread; takes the store lock. ``has_topic`` is asked under it, so a topic
    created and written meanwhile is either seen or not written yet (the broker creates
    a topic's config before the first put). The drop is written down before any file
    goes (:mod:`~rocklet.store.dropped_queues`): the records, which stay in the
    commitlog until retention, are never dispatched to the topic's queues again, and a
    topic made again under the name starts from offset 0, as in RocketMQ.

    Args:
        store: The store.
        has_topic: Whether the broker has a config for a topic.
        only: Look at this topic alone (``deleteTopic``); ``None``: at every topic.

    Returns:
        The topics dropped.

    Raises:
        OSError: The drop could not be written down; nothing was dropped.
    """
    with store.lock:
        by_topic: dict[str, list[tuple[tuple[str, int], ConsumeQueue]]] = {}
        for key, cq in store.queues.items():
            if only is None or key[0] == only:
                by_topic.setdefault(key[0], []).append((key, cq))
        gone = {
            topic: queues
            for topic, queues in sorted(by_topic.items())
            if topic not in _KEPT_WITHOUT_CONFIG
            and not topic.startswith(_LMQ_PREFIX)
            and not has_topic(topic)
        }
        if gone:
            keys = [key for queues in gone.values() for key, _cq in queues]
            store.dropped.add(keys, store.commitlog.max_offset(), store.commitlog.min_offset())
        for topic, queues in gone.items():
            for key, _cq in queues:
                store.forget_queue(key)
            _remove_topic_dir(store, topic)
    for topic in gone:
        log.info("unused topic's consume queues removed", topic=topic)
    return list(gone)


def _remove_topic_dir(store: MessageStore, topic: str) -> None:
    """Remove what is left of a dropped topic's directory (stray queue directories)."""
    shutil.rmtree(store.config.store_path / "consumequeue" / topic, ignore_errors=True)
