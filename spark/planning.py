"""Where a read starts and ends: option specs resolved against the cluster's queues.

The async half (:func:`take_snapshot`) asks the cluster which queues the subscription
covers and their stored ranges, and fails early, with what to do, when a named topic
does not exist or a broker refuses the consumer group; the pure half turns
``startingOffsets`` / ``endingOffsets`` / ``startingTimestamp`` into concrete per-queue
offsets with errors a user can act on. Both the batch reader and the stream reader use
them, on the driver.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.spark.broker import Cluster
from rocklet.spark.errors import TopicNotFoundError, group_not_found, topics_not_found
from rocklet.spark.offsets import EARLIEST, LATEST, Offsets, QueueBounds, QueueRef
from rocklet.spark.options import (
    OffsetKind,
    OffsetSpec,
    RockletOptionError,
    SourceOptions,
    Subscription,
)

__all__ = ["Snapshot", "resolve_offsets", "select_assigned", "take_snapshot"]


@dataclass(frozen=True)
class Snapshot:
    """The queues a subscription covers at one moment, with their stored ranges.

    Attributes:
        bounds: ``[min, max)`` of every covered queue.
        times: For ``startingTimestamp``: each queue's offset for that time.
    """

    bounds: Mapping[MessageQueue, QueueBounds]
    times: Mapping[MessageQueue, int] = field(default_factory=dict)

    def maxima(self) -> Offsets:
        """Each queue's max offset (where "latest" points)."""
        return {mq: b.max_offset for mq, b in self.bounds.items()}


async def take_snapshot(
    cluster: Cluster,
    opts: SourceOptions,
    *,
    with_times: bool = False,
    require_topics: bool = True,
    require_match: bool = False,
    known_topics: Collection[str] = (),
    check_group: bool = False,
) -> Snapshot:
    """Discover the subscribed queues now and fetch their bounds.

    Args:
        cluster: An open cluster client.
        opts: The source options.
        with_times: Also look up ``startingTimestamp`` offsets.
        require_topics: Fail when a topic ``subscribe`` or ``assign`` names does not
            exist.
        require_match: Fail when ``subscribePattern`` matches no topic (a batch read
            has only this moment; a stream picks up matching topics as they appear,
            as Kafka's source does).
        known_topics: Topics a stream's checkpoint already holds: they may vanish (a
            deleted topic keeps its offsets) without failing the query.
        check_group: Ask each broker whether it accepts the consumer group.

    Returns:
        The snapshot.

    Raises:
        TopicNotFoundError: A required topic does not exist.
        ConsumerGroupNotFoundError: A broker does not have the consumer group.
        RockletOptionError: ``assign`` names a queue that does not exist.
    """
    subscription = opts.subscription
    queues = await cluster.subscribed_queues(subscription)
    if subscription.pattern is not None:
        if require_match and not queues:
            raise TopicNotFoundError(
                f"no topic on name server {cluster.name_server} matches subscribePattern "
                f"{subscription.pattern.pattern!r} (the whole name must match; list "
                f"the topics with: rocklet admin topicList -n {cluster.name_server})"
            )
    elif require_topics:
        await _require_topics(cluster, subscription, known_topics)
    if subscription.assign is not None:
        queues = select_assigned(queues, subscription)
    bounds = await cluster.bounds(queues)
    if check_group and bounds:
        refused = await cluster.brokers_refusing_group(bounds)
        if refused:
            raise group_not_found(cluster.group, cluster.name_server, refused)
    times: dict[MessageQueue, int] = {}
    ts = opts.starting.timestamp_ms
    if with_times and opts.starting.kind is OffsetKind.TIMESTAMP and ts is not None:
        times = await cluster.offsets_for_time(queues, ts)
    return Snapshot(bounds, times)


async def _require_topics(
    cluster: Cluster, subscription: Subscription, known: Collection[str]
) -> None:
    named = subscription.assign.keys() if subscription.assign else subscription.topics
    missing = await cluster.unknown_topics(t for t in named if t not in known)
    if missing:
        raise topics_not_found(missing, cluster.name_server, await cluster.cluster_names())


def _match(topic: str, ref: QueueRef, queues: list[MessageQueue], option: str) -> MessageQueue:
    broker, queue_id = ref
    found = [
        mq
        for mq in queues
        if mq.topic == topic and mq.queue_id == queue_id and broker in (None, mq.broker_name)
    ]
    name = f"{broker}:{queue_id}" if broker else str(queue_id)
    if not found:
        have = ", ".join(f"{mq.broker_name}:{mq.queue_id}" for mq in queues if mq.topic == topic)
        raise RockletOptionError(
            f"{option}: topic {topic!r} has no readable queue {name} (it has: {have or 'none'})"
        )
    if len(found) > 1:
        raise RockletOptionError(
            f"{option}: queue {name} of {topic!r} exists on several brokers "
            f"({', '.join(mq.broker_name for mq in found)}); write '<brokerName>:{queue_id}'"
        )
    return found[0]


def select_assigned(queues: list[MessageQueue], subscription: Subscription) -> list[MessageQueue]:
    """The queues ``assign`` names, each matched against the discovered ones.

    Raises:
        RockletOptionError: A named queue does not exist or is ambiguous.
    """
    assert subscription.assign is not None
    chosen = {
        _match(topic, ref, queues, "assign")
        for topic, refs in subscription.assign.items()
        for ref in refs
    }
    return sorted(chosen)


def resolve_offsets(spec: OffsetSpec, snapshot: Snapshot, *, option: str) -> Offsets:
    """Concrete offsets for every queue of the snapshot.

    Queues a JSON spec does not mention take the spec's natural default: earliest for
    ``startingOffsets``, latest for ``endingOffsets``.

    Args:
        spec: The parsed option.
        snapshot: The queues and their bounds.
        option: ``"startingOffsets"`` or ``"endingOffsets"`` (defaults and errors).

    Returns:
        Offset per queue.

    Raises:
        RockletOptionError: The JSON names an unknown topic or queue.
    """
    bounds = snapshot.bounds
    if spec.kind is OffsetKind.EARLIEST:
        return {mq: b.min_offset for mq, b in bounds.items()}
    if spec.kind is OffsetKind.LATEST:
        return snapshot.maxima()
    if spec.kind is OffsetKind.TIMESTAMP:
        return {mq: snapshot.times.get(mq, b.max_offset) for mq, b in bounds.items()}
    assert spec.per_topic is not None
    start = option == "startingOffsets"
    out: Offsets = {mq: (b.min_offset if start else b.max_offset) for mq, b in bounds.items()}
    queues = sorted(bounds)
    topics = {mq.topic for mq in queues}
    for topic, table in spec.per_topic.items():
        if topic not in topics:
            raise RockletOptionError(
                f"{option} names topic {topic!r}, which is not subscribed or has no queues"
            )
        for ref, value in table.items():
            mq = _match(topic, ref, queues, option)
            b = bounds[mq]
            out[mq] = (
                b.min_offset if value == EARLIEST else b.max_offset if value == LATEST else value
            )
    return out
