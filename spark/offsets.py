"""Checkpoint offsets: the canonical JSON form and the arithmetic on it.

An offset is, per queue, the next queue offset to read. Spark keeps it as JSON in the
checkpoint and **compares offsets as raw JSON strings**:
two dicts with the same content in a different key order look like new data and cause
endless empty micro-batches. So every offset dict leaves this module in one canonical
order: topics sorted, then queues sorted by broker name and numeric queue id.

JSON shape: ``{"<topic>": {"<brokerName>:<queueId>": <next offset>}}``. Queue ids are
only unique per broker in RocketMQ (each broker numbers its own queues of a topic from
0), so the key names the broker too. User-written JSON (``startingOffsets``,
``endingOffsets``, ``assign``) may use a bare ``"<queueId>"`` when the topic lives on a
single broker; -2 means earliest and -1 latest, as in Kafka and the old connector.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple, TypeAlias

from rocklet.protocol.bodies.queue import MessageQueue

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetJson",
    "Offsets",
    "QueueBounds",
    "QueueRef",
    "from_json",
    "limit_offsets",
    "parse_queue_ref",
    "queue_key",
    "to_json",
]

#: JSON markers in user-written offsets.
EARLIEST: Final = -2
LATEST: Final = -1

#: Next offset to read, per queue.
Offsets: TypeAlias = dict[MessageQueue, int]
#: The JSON-able form Spark stores.
OffsetJson: TypeAlias = dict[str, dict[str, int]]
#: A queue as a user names it: (broker name or None when not given, queue id).
QueueRef: TypeAlias = tuple[str | None, int]


class QueueBounds(NamedTuple):
    """A queue's stored range: ``[min_offset, max_offset)``."""

    min_offset: int
    max_offset: int


def queue_key(mq: MessageQueue) -> str:
    """The JSON key of a queue within its topic: ``"<brokerName>:<queueId>"``."""
    return f"{mq.broker_name}:{mq.queue_id}"


def parse_queue_ref(text: str) -> QueueRef:
    """Parse ``"<queueId>"`` or ``"<brokerName>:<queueId>"``.

    Args:
        text: The key.

    Returns:
        ``(broker name or None, queue id)``.

    Raises:
        ValueError: Not one of the two forms, or a negative queue id.
    """
    broker, sep, qid = text.strip().rpartition(":")
    if sep and not broker:
        raise ValueError(f"queue {text!r} has an empty broker name")
    try:
        queue_id = int(qid)
    except ValueError:
        raise ValueError(f"queue {text!r} is not '<queueId>' or '<brokerName>:<queueId>'") from None
    if queue_id < 0:
        raise ValueError(f"queue {text!r} has a negative queue id")
    return (broker or None, queue_id)


def _sort_key(mq: MessageQueue) -> tuple[str, str, int]:
    return (mq.topic, mq.broker_name, mq.queue_id)


def to_json(offsets: Mapping[MessageQueue, int]) -> OffsetJson:
    """The canonical JSON-able form (sorted topics, then brokers and queue ids).

    Args:
        offsets: Next offset per queue.

    Returns:
        A dict whose ``json.dumps`` is the same for the same content, always.
    """
    out: OffsetJson = {}
    for mq in sorted(offsets, key=_sort_key):
        out.setdefault(mq.topic, {})[queue_key(mq)] = int(offsets[mq])
    return out


def from_json(obj: Mapping[str, object]) -> Offsets:
    """Read offsets stored by :func:`to_json` (from a checkpoint).

    Args:
        obj: The decoded JSON.

    Returns:
        Next offset per queue.

    Raises:
        ValueError: Not the canonical shape (e.g. a checkpoint written by another
            source).
    """
    out: Offsets = {}
    for topic, queues in obj.items():
        if not isinstance(queues, Mapping):
            raise ValueError(f"offset of topic {topic!r} is not an object: {queues!r}")
        for key, value in queues.items():
            broker, queue_id = parse_queue_ref(str(key))
            if broker is None or isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"offset {topic}/{key}={value!r} is not canonical")
            out[MessageQueue(topic, broker, queue_id)] = value
    return out


def limit_offsets(
    start: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int], max_rows: int
) -> Offsets:
    """Cap the rows between ``start`` and ``latest`` at ``max_rows``, across queues.

    Each queue gets a share proportional to its backlog (as Kafka's
    ``maxOffsetsPerTrigger`` and the old rocketmq-spark connector do); the rounding
    remainder goes to the queues with the largest fractional share, ties broken by
    queue order, so the result is deterministic. Every row counts (a tag filter may
    drop some later; offsets still advance over them).

    Args:
        start: Where each queue's next batch starts; it must hold every queue of
            ``latest`` (callers resolve where new queues start first).
        latest: The end each queue could reach now.
        max_rows: The cap (> 0).

    Returns:
        The end offsets: ``start <= end <= max(start, latest)`` per queue (never
        backwards), and exactly ``min(max_rows, backlog)`` rows in all.
    """
    backlog = {mq: max(0, latest[mq] - start[mq]) for mq in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return {mq: start[mq] + backlog[mq] for mq in latest}
    shares: dict[MessageQueue, int] = {}
    remainders: list[tuple[int, tuple[str, str, int], MessageQueue]] = []
    for mq in sorted(backlog, key=_sort_key):
        whole, frac = divmod(backlog[mq] * max_rows, total)
        shares[mq] = whole
        remainders.append((-frac, _sort_key(mq), mq))
    left = max_rows - sum(shares.values())
    for _, _, mq in sorted(remainders)[:left]:
        shares[mq] += 1
    return {mq: start[mq] + shares[mq] for mq in latest}
