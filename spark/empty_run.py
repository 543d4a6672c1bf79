"""Why a ``trigger(availableNow=True)`` run reads nothing, in words a user can act on.

A run that writes nothing and ends "successfully" is the most puzzling outcome of a
first streaming query: usually the stream started at ``latest`` (the readStream
default), the topic is empty, or the checkpoint has already read everything. The
stream reader checks at the run's first micro-batch and logs the reason at WARNING.
"""

from __future__ import annotations

from collections.abc import Mapping

from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.spark.options import OffsetKind, SourceOptions
from rocklet.spark.planning import Snapshot

__all__ = ["reachable_rows", "why_nothing_to_read"]


def reachable_rows(
    begin: Mapping[MessageQueue, int], snapshot: Snapshot, target: Mapping[MessageQueue, int]
) -> int:
    """How many offsets an availableNow run can still read.

    Args:
        begin: Where the run starts (the checkpoint's, or the initial, offsets).
        snapshot: The queues now, with their stored ranges.
        target: The run's end: the latest offsets when it began.

    Returns:
        The offsets between each queue's start (a queue not in ``begin`` starts at its
        earliest) and the target.
    """
    total = 0
    for mq, bounds in snapshot.bounds.items():
        start = begin.get(mq, bounds.min_offset)
        stop = min(bounds.max_offset, target.get(mq, start))
        total += max(0, stop - start)
    return total


def why_nothing_to_read(opts: SourceOptions, snapshot: Snapshot, *, new_checkpoint: bool) -> str:
    """The reason an availableNow run has nothing to read.

    Args:
        opts: The source options.
        snapshot: The queues now, with their stored ranges.
        new_checkpoint: The run started a new checkpoint (``startingOffsets`` applied)
            rather than resuming one.

    Returns:
        One sentence naming the subscription and what to change, if anything.
    """
    what = opts.subscription.describe()
    if not snapshot.bounds:
        return f"{what} covers no readable queue (no topic matches yet)"
    stored = sum(b.max_offset - b.min_offset for b in snapshot.bounds.values())
    if stored == 0:
        return (
            f"every queue of {what} is empty (nothing was sent yet, or retention deleted it): "
            "send messages, then run the query again"
        )
    if new_checkpoint and opts.starting.kind is OffsetKind.LATEST:
        return (
            "startingOffsets is latest (the default of spark.readStream): a new checkpoint "
            f"starts after the last stored message, so the {stored} stored message(s) of "
            f"{what} are skipped; set startingOffsets=earliest (with a new checkpoint "
            "location) to read them"
        )
    if new_checkpoint:
        return f"startingOffsets/startingTimestamp start at the end of every queue of {what}"
    return (
        f"the checkpoint is already at the end of every queue of {what}: earlier runs "
        "read all stored messages; messages sent from now on are read by the next run"
    )
