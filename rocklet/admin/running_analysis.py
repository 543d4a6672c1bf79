"""What ``consumerStatus`` and ``consumer`` conclude from a group's running infos.

mqadmin ends both verbs with three checks of the members' reports
(``ConsumerRunningInfo.analyzeSubscription``, ``analyzeRebalance``,
``analyzeProcessQueue``); these are the same checks, made a little more useful:

- subscriptions: push members up for more than two minutes (younger ones may still be
  subscribing) must subscribe the same topics with the same expressions, and not to
  nothing. Unlike Java, ``subVersion`` (the time of each member's subscribe call) is
  not compared, so two members started apart still agree.
- rebalance: RocketMQ always says OK; here, in clustering mode, a queue held (not
  dropped) by two members at once is reported (for a moment during a rebalance that
  is normal; for longer it means the members disagree on the member list).
- process queues of push members: an orderly member's queue it cannot lock, or failed
  to unlock; a concurrent member's queue with cached messages and no consumption for
  a minute (a listener stuck, most likely).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.running import ConsumerRunningInfo

__all__ = ["Analysis", "Reporter", "analyse"]

#: Members younger than this may still be subscribing: subscriptions are not compared.
_SETTLED_MS: Final = 2 * 60_000
#: Cached messages untouched this long mean a blocked listener.
_STUCK_MS: Final = 60_000


class Reporter(Protocol):
    """A member as the analysis needs it."""

    @property
    def client_id(self) -> str:
        """Its client id."""
        ...

    @property
    def info(self) -> ConsumerRunningInfo:
        """Its running info."""
        ...


@dataclass(frozen=True, slots=True)
class Analysis:
    """The conclusions about a group's members.

    Attributes:
        same_subscription: Every member subscribes alike (or is too young to tell).
        shared_queues: Queues two or more clustering members hold, with their holders.
        warnings: One line per suspicious process queue.
    """

    same_subscription: bool
    shared_queues: dict[MessageQueue, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def rebalance_ok(self) -> bool:
        """No queue held twice (only judged when the subscriptions agree)."""
        return self.same_subscription and not self.shared_queues

    def notes(self) -> list[str]:
        """The conclusions as lines to print."""
        if not self.same_subscription:
            return ["WARN: the members of the group do not subscribe alike", *self.warnings]
        lines = ["Subscriptions: the same in every member of the group"]
        if self.rebalance_ok:
            lines.append("Rebalance: OK")
        else:
            lines.append("Rebalance: FAILED, queues held by more than one member:")
            lines += [f"  {_mq(mq)}: {', '.join(ids)}" for mq, ids in self.shared_queues.items()]
        return lines + self.warnings

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {
            "sameSubscription": self.same_subscription,
            "rebalanceOK": self.rebalance_ok,
            "sharedQueues": [
                {**mq.to_dict(), "clientIds": ids} for mq, ids in self.shared_queues.items()
            ],
            "warnings": list(self.warnings),
        }


def _mq(mq: MessageQueue) -> str:
    return f"{mq.topic} queue {mq.queue_id} of {mq.broker_name}"


def _is_push(info: ConsumerRunningInfo) -> bool:
    return info.properties.get("PROP_CONSUME_TYPE") == "CONSUME_PASSIVELY"


def _started_ms(info: ConsumerRunningInfo) -> int | None:
    text = info.properties.get("PROP_CONSUMER_START_TIMESTAMP", "")
    return int(text) if text.isascii() and text.isdigit() else None


def _subscriptions(info: ConsumerRunningInfo) -> frozenset[tuple[object, ...]]:
    return frozenset(
        (s.topic, s.sub_string, s.expression_type, frozenset(s.tags_set), s.class_filter_mode)
        for s in info.subscription_set
    )


def _same_subscription(members: Sequence[Reporter], now_ms: int) -> bool:
    first = members[0].info
    if not _is_push(first):
        return True
    started = _started_ms(first)
    if started is not None and now_ms - started <= _SETTLED_MS:
        return True
    kinds = {_subscriptions(m.info) for m in members}
    return len(kinds) == 1 and bool(next(iter(kinds)))


def _shared_queues(members: Sequence[Reporter]) -> dict[MessageQueue, list[str]]:
    holders: dict[MessageQueue, list[str]] = {}
    for member in members:
        if member.info.properties.get("messageModel") == "BROADCASTING":
            continue  # every member holds every queue
        for mq, pq in member.info.mq_table.items():
            if not pq.dropped:
                holders.setdefault(mq, []).append(member.client_id)
    return {mq: ids for mq, ids in sorted(holders.items()) if len(ids) > 1}


def _queue_warnings(member: Reporter, now_ms: int) -> list[str]:
    info = member.info
    if not _is_push(info):
        return []
    orderly = info.properties.get("PROP_CONSUME_ORDERLY") == "true"
    out: list[str] = []
    for mq, pq in sorted(info.mq_table.items()):
        where = f"{member.client_id} {_mq(mq)}"
        if orderly and not pq.locked:
            out.append(f"{where}: not locked, last lock {now_ms - pq.last_lock_timestamp} ms ago")
        elif orderly and pq.dropped and pq.try_unlock_times > 0:
            out.append(f"{where}: unlock tried {pq.try_unlock_times} times, still held")
        elif not orderly and pq.cached_msg_count > 0:
            idle = now_ms - pq.last_consume_timestamp
            if idle > _STUCK_MS:
                out.append(
                    f"{where}: {pq.cached_msg_count} messages cached and none consumed for "
                    f"{idle} ms; its listener may be blocked"
                )
    return out


def analyse(members: Sequence[Reporter], now_ms: int) -> Analysis:
    """Check a group's running infos.

    Args:
        members: The members and their running infos (at least one), by client id.
        now_ms: The time now, epoch ms.

    Returns:
        The conclusions.
    """
    same = _same_subscription(members, now_ms)
    return Analysis(
        same_subscription=same,
        shared_queues=_shared_queues(members) if same else {},
        warnings=[w for m in members for w in _queue_warnings(m, now_ms)],
    )
