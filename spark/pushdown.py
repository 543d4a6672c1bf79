"""Filter pushdown of the batch broker source: Spark's ``WHERE`` filters to what is read.

Spark 4.1+ hands a batch reader the conjuncts of a query's ``WHERE`` it can express
(``DataSourceReader.pushFilters``) when ``spark.sql.python.filterPushdown.enabled`` is
on. :func:`translate` turns them into a :class:`Pushdown`, pure data, and says which
filters Spark must still evaluate:

- ``tags`` ``=`` / ``IN``: the broker's tag filter (the pull's subscription
  expression), intersected with ``subExpression``. Exact: the broker filters by tag
  hash and the SDK re-checks the tag string, so Spark need not check again.
- ``queueId`` and ``brokerName`` ``=`` / ``IN``: only those queues are planned. Exact.
- ``storeTimestamp`` ``>=`` / ``>``: each queue starts at its offset for that time,
  looked up with a slack (:data:`STORE_TIME_SLACK_MS`). This only narrows where the
  read starts, so Spark still evaluates the filter.
- Anything else: left to Spark.

Spark's stream readers have no ``pushFilters`` (pyspark 4.3): streams are not narrowed.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Final

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
)

from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.filter import SUB_ALL, parse_tag_expression
from rocklet.spark.offsets import Offsets

__all__ = [
    "NO_PUSHDOWN",
    "STORE_TIME_SLACK_MS",
    "Pushdown",
    "planning_with_filters",
    "translate",
]

#: How much earlier than a ``storeTimestamp`` bound each queue's start is looked up.
#: The broker's offset-by-time search is a binary search that assumes store times
#: never decrease along a queue; they can, a little (RocketMQ stamps a message before
#: taking the commitlog lock; a clock step back). Starting the search this much
#: earlier means no row at or after the bound is skipped as long as store times go
#: back by less than this: the extra rows cost a minute of a queue and Spark drops them.
STORE_TIME_SLACK_MS: Final = 60_000

#: The pyspark module that calls ``pushFilters`` (Spark 4.1+, when pushdown is on).
_PUSHDOWN_PLANNER: Final = "pyspark.sql.worker.data_source_pushdown_filters"
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MS: Final = dt.timedelta(milliseconds=1)


@dataclass(frozen=True)
class Pushdown:
    """What the pushed filters narrow a batch read to.

    Attributes:
        tags: Only messages with one of these tags (``None``: no restriction; empty:
            no message can match).
        queue_ids: Only queues with these ids (``None``: all).
        broker_names: Only queues on these brokers (``None``: all).
        min_store_ms: Only messages stored at or after this epoch ms, as a lower bound
            (a filter's time rounded down): it narrows each queue's start.
        notes: The pushed filters in SQL-like text, for the log.
    """

    tags: frozenset[str] | None = None
    queue_ids: frozenset[int] | None = None
    broker_names: frozenset[str] | None = None
    min_store_ms: int | None = None
    notes: tuple[str, ...] = field(default=())

    def keeps(self, mq: MessageQueue) -> bool:
        """Whether the read plans ``mq`` at all."""
        return (self.queue_ids is None or mq.queue_id in self.queue_ids) and (
            self.broker_names is None or mq.broker_name in self.broker_names
        )

    def sub_expression(self, user: str) -> str | None:
        """The tag expression of the pulls: the pushed tags within ``subExpression``.

        Args:
            user: The ``subExpression`` option (``*`` when not given).

        Returns:
            The expression, or ``None`` when no message can match both.
        """
        if self.tags is None:
            return user
        given = parse_tag_expression(user)
        tags = self.tags if given is None else self.tags & given
        return " || ".join(sorted(tags)) if tags else None

    @property
    def time_lookup_ms(self) -> int | None:
        """The time each queue's start is looked up for, slack included (or ``None``)."""
        if self.min_store_ms is None:
            return None
        return max(0, self.min_store_ms - STORE_TIME_SLACK_MS)

    def narrow(
        self, start: Mapping[MessageQueue, int], by_time: Mapping[MessageQueue, int]
    ) -> Offsets:
        """The starts of the kept queues, moved up to their offsets for the time bound.

        Args:
            start: Each queue's start from ``startingOffsets`` / ``startingTimestamp``.
            by_time: Offsets for :attr:`time_lookup_ms` (queues missing keep theirs).

        Returns:
            Starts of the queues :meth:`keeps`; queues left out are not read.
        """
        return {
            mq: max(first, by_time.get(mq, first)) for mq, first in start.items() if self.keeps(mq)
        }

    def describe(self) -> str:
        """The pushed filters, ``;``-separated (``none`` when nothing was pushed)."""
        return "; ".join(self.notes) or "none"


#: Nothing pushed: the read covers what the options say.
NO_PUSHDOWN: Final = Pushdown()


def translate(filters: Sequence[Filter], *, tags: bool = True) -> tuple[Pushdown, list[Filter]]:
    """Split Spark's pushed filters into what the read applies and what Spark must.

    The filters are a conjunction; each restriction of one column intersects with
    the others on it.

    Args:
        filters: What ``pushFilters`` received.
        tags: Whether ``tags`` filters can go to the pulls' tag filter (not when the
            pulls already carry an SQL92 selector: a pull has one expression).

    Returns:
        The narrowing, and the filters Spark must still evaluate: the very objects
        received (Spark matches them by identity), in their order.
    """
    wanted: frozenset[str] | None = None
    queue_ids: frozenset[int] | None = None
    brokers: frozenset[str] | None = None
    min_ms: int | None = None
    notes: list[str] = []
    left: list[Filter] = []
    for item in filters:
        column = _column(item)
        if (
            tags
            and column == "tags"
            and (values := _values(item, str)) is not None
            and _taggable(values)
        ):
            wanted = values if wanted is None else wanted & values
            notes.append(f"tags {_sql(values)}")
        elif column == "queueid" and (ids := _values(item, int)) is not None:
            queue_ids = ids if queue_ids is None else queue_ids & ids
            notes.append(f"queueId {_sql(ids)}")
        elif column == "brokername" and (names := _values(item, str)) is not None:
            brokers = names if brokers is None else brokers & names
            notes.append(f"brokerName {_sql(names)}")
        elif column == "storetimestamp" and (bound := _lower_bound_ms(item)) is not None:
            min_ms = bound if min_ms is None else max(min_ms, bound)
            op = ">" if isinstance(item, GreaterThan) else ">="
            when = (_EPOCH + bound * _MS).isoformat(timespec="milliseconds")
            notes.append(f"storeTimestamp {op} {when} (where each queue starts)")
            left.append(item)  # the start is approximate: Spark re-checks every row
        else:
            left.append(item)
    return Pushdown(wanted, queue_ids, brokers, min_ms, tuple(notes)), left


def planning_with_filters() -> bool:
    """Whether the current call comes from Spark's filter-pushdown planner.

    Spark refuses every read (``DATA_SOURCE_PUSHDOWN_DISABLED``) whose reader defines
    ``pushFilters`` while ``spark.sql.python.filterPushdown.enabled`` is off, which is
    its default; with it on, the reader is built by this planner module, and by the
    plain one only when the query has no filter to push. The reader that takes filters
    is therefore built only here; if a later pyspark renames the module, reads stay
    correct and simply push nothing (the Spark tests would notice).
    """
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        spec = frame.f_globals.get("__spec__")
        if _PUSHDOWN_PLANNER in (frame.f_globals.get("__name__"), getattr(spec, "name", None)):
            return True
        frame = frame.f_back
    return False


# -- pieces ---------------------------------------------------------------------------------


def _column(item: Filter) -> str | None:
    # Column names as the filter carries them, matched case-insensitively: with the
    # fixed schema, no two columns differ by case only.
    path = getattr(item, "attribute", None)
    if not isinstance(path, tuple) or len(path) != 1 or not isinstance(path[0], str):
        return None
    return path[0].lower()


def _values(item: Filter, kind: type) -> frozenset[Any] | None:
    """The values an ``=`` / ``<=>`` / ``IN`` filter admits, or ``None`` for other filters.

    NULLs are left out: ``x = NULL`` and ``x IN (NULL)`` never hold, and ``x <=> NULL``
    (an ``IS NULL``) is not taken at all.
    """
    if isinstance(item, EqualTo | EqualNullSafe):
        if item.value is None and isinstance(item, EqualNullSafe):
            return None
        raw: Iterable[Any] = (item.value,)
    elif isinstance(item, In):
        raw = item.value
    else:
        return None
    values = [v for v in raw if v is not None]
    # bool is an int: ``queueId = true`` is not a queue id.
    if not all(isinstance(v, kind) and not isinstance(v, bool) for v in values):
        return None
    return frozenset(values)


def _taggable(tags: frozenset[str]) -> bool:
    """Whether a subscription expression can name exactly these tags.

    The broker splits an expression on ``||`` and trims, and ``*`` or empty means every
    message: a tag like ``" a"``, ``"a||b"`` or ``"*"`` cannot be asked for, so such
    a filter stays with Spark.
    """
    return all(t and t == t.strip() and "||" not in t and t != SUB_ALL for t in tags)


def _lower_bound_ms(item: Filter) -> int | None:
    """Epoch ms at or below a ``>=`` / ``>`` filter's time, or ``None``."""
    if not isinstance(item, GreaterThanOrEqual | GreaterThan):
        return None
    value = item.value
    # Spark sends TIMESTAMP literals as aware datetimes (UTC); a naive one has no zone.
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        return None
    return (value - _EPOCH) // _MS  # floor: a bound rounded down stays a lower bound


def _sql(values: frozenset[Any]) -> str:
    ordered = sorted(values)
    if len(ordered) == 1:
        return f"= {ordered[0]!r}"
    return f"IN ({', '.join(repr(v) for v in ordered)})"
