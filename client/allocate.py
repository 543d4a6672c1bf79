"""Queue allocation strategies: which of a group's queues one consumer takes.

Each strategy is a pure function ``(group, current_cid, mqs, cids) -> list[MessageQueue]``
(RocketMQ's ``AllocateMessageQueueStrategy.allocate``). Every consumer of a group runs
the same function over the same inputs and takes its own share, so the shares must be
a partition of the queues: each queue to exactly one consumer. The inputs are sorted
first, as ``RebalanceImpl`` does, so consumers that learned the lists in different
orders still agree. A consumer that is not in ``cids`` (the broker does not know it
yet) gets nothing, as in Java.

The functions are written to give the same answers as the Java strategies, so Python
and Java consumers can share a group.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Sequence
from typing import Final, TypeAlias

from rocklet.protocol.bodies.queue import MessageQueue

__all__ = [
    "STRATEGIES",
    "AllocateStrategy",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "allocate_consistent_hash",
]

#: ``(group, current_cid, mqs, cids) -> the queues current_cid takes``.
AllocateStrategy: TypeAlias = Callable[
    [str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]
]

#: Virtual nodes per consumer on the hash ring (``AllocateMessageQueueConsistentHash``).
DEFAULT_VIRTUAL_NODES: Final = 10


def _prepare(
    current_cid: str, mqs: Sequence[MessageQueue], cids: Sequence[str]
) -> tuple[list[MessageQueue], list[str], int] | None:
    if not current_cid or not mqs or current_cid not in cids:
        return None
    all_cids = sorted(set(cids))
    return sorted(set(mqs)), all_cids, all_cids.index(current_cid)


def allocate_averagely(
    group: str, current_cid: str, mqs: Sequence[MessageQueue], cids: Sequence[str]
) -> list[MessageQueue]:
    """Give each consumer a contiguous block; the first ``len(mqs) % len(cids)`` get one more.

    ``AllocateMessageQueueAveragely``: with 8 queues and 3 consumers the blocks are
    3, 3 and 2. With more consumers than queues, the extra consumers get nothing.

    Args:
        group: Consumer group (unused; part of the strategy signature).
        current_cid: The consumer asking.
        mqs: Every queue of the topic.
        cids: Every consumer id of the group.

    Returns:
        The queues ``current_cid`` should consume, in queue order.
    """
    prepared = _prepare(current_cid, mqs, cids)
    if prepared is None:
        return []
    queues, all_cids, index = prepared
    n, k = len(queues), len(all_cids)
    base, extra = divmod(n, k)
    if index < extra:
        start, count = index * (base + 1), base + 1
    else:
        start, count = index * base + extra, base
    return queues[start : start + count]


def allocate_averagely_by_circle(
    group: str, current_cid: str, mqs: Sequence[MessageQueue], cids: Sequence[str]
) -> list[MessageQueue]:
    """Deal the queues round-robin: consumer ``i`` takes queues ``i, i+k, i+2k, ...``.

    ``AllocateMessageQueueAveragelyByCircle``; spreads each broker's queues over the
    consumers rather than giving one consumer a whole broker.

    Args:
        group: Consumer group (unused).
        current_cid: The consumer asking.
        mqs: Every queue of the topic.
        cids: Every consumer id of the group.

    Returns:
        The queues ``current_cid`` should consume, in queue order.
    """
    prepared = _prepare(current_cid, mqs, cids)
    if prepared is None:
        return []
    queues, all_cids, index = prepared
    return queues[index :: len(all_cids)]


def _md5_hash(key: str) -> int:
    # Java's ConsistentHashRouter.MD5Hash: the digest's first four bytes, big-endian,
    # as a non-negative long.
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "big")


def _mq_key(mq: MessageQueue) -> str:
    # MessageQueue.toString(), which the Java strategy hashes.
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def allocate_consistent_hash(
    group: str,
    current_cid: str,
    mqs: Sequence[MessageQueue],
    cids: Sequence[str],
    *,
    virtual_nodes: int = DEFAULT_VIRTUAL_NODES,
) -> list[MessageQueue]:
    """Place consumers on an MD5 hash ring; each queue goes to the next consumer clockwise.

    ``AllocateMessageQueueConsistentHash``: each consumer has ``virtual_nodes`` points
    ``"<cid>-<i>"`` on the ring, and a queue (hashed by its Java ``toString``) goes to
    the owner of the first point at or after its own hash. When a consumer joins or
    leaves only the queues next to its points move, at the price of less even shares.

    Args:
        group: Consumer group (unused).
        current_cid: The consumer asking.
        mqs: Every queue of the topic.
        cids: Every consumer id of the group.
        virtual_nodes: Points per consumer on the ring. Default: 10.

    Returns:
        The queues ``current_cid`` should consume, in queue order.
    """
    prepared = _prepare(current_cid, mqs, cids)
    if prepared is None:
        return []
    queues, all_cids, _index = prepared
    ring: dict[int, str] = {}
    for cid in all_cids:
        for i in range(virtual_nodes):
            # Java's TreeMap.put: a later point with the same hash replaces the earlier.
            ring[_md5_hash(f"{cid}-{i}")] = cid
    points = sorted(ring)
    out = []
    for mq in queues:
        pos = bisect.bisect_left(points, _md5_hash(_mq_key(mq)))
        owner = ring[points[pos % len(points)]]
        if owner == current_cid:
            out.append(mq)
    return out


#: Strategies by the name :class:`~rocklet.client.push_consumer.PushConsumer` accepts.
STRATEGIES: Final[dict[str, AllocateStrategy]] = {
    "averagely": allocate_averagely,
    "round_robin": allocate_averagely_by_circle,
    "consistent_hash": allocate_consistent_hash,
}
