"""Filter pushdown of the batch source: the translation alone, then through Spark."""

from __future__ import annotations

import datetime as dt
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    Not,
    StringStartsWith,
)

from rocklet.broker.stats_sink import StatsSink
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.spark.batch_source import FilteringBatchReader, RockletBatchReader
from rocklet.spark.datasource import RockletDataSource
from rocklet.spark.pushdown import (
    NO_PUSHDOWN,
    STORE_TIME_SLACK_MS,
    Pushdown,
    planning_with_filters,
    translate,
)
from rocklet.spark.schema import SOURCE_SCHEMA
from rocklet.transport.clock import SystemClock
from tests.spark.support import BrokerThread, produce

pytestmark = pytest.mark.spark

UTC = dt.UTC
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def mq(q: int, broker: str = "broker-a") -> MessageQueue:
    return MessageQueue("T", broker, q)


# -- translation (no Spark) -----------------------------------------------------------------


def test_tags_queues_and_brokers_are_pushed_whole_and_intersect() -> None:
    filters: list[Filter] = [
        In(("tags",), ("a", "b", None)),  # NULL never matches: dropped
        EqualTo(("tags",), "b"),
        In(("queueId",), (0, 2, 3)),
        EqualTo(("queueId",), 2),
        EqualNullSafe(("brokerName",), "broker-a"),
        In(("BrokerName",), ("broker-a", "broker-b")),  # names match case-insensitively
    ]
    push, left = translate(filters)
    assert left == []
    assert push.tags == frozenset({"b"})
    assert push.queue_ids == frozenset({2})
    assert push.broker_names == frozenset({"broker-a"})
    assert push.min_store_ms is None and push.time_lookup_ms is None
    assert push.keeps(mq(2)) and not push.keeps(mq(0)) and not push.keeps(mq(2, "broker-b"))
    assert push.describe() == (
        "tags IN ('a', 'b'); tags = 'b'; queueId IN (0, 2, 3); queueId = 2; "
        "brokerName = 'broker-a'; brokerName IN ('broker-a', 'broker-b')"
    )
    assert NO_PUSHDOWN.describe() == "none" and NO_PUSHDOWN.keeps(mq(7, "any"))


def test_what_cannot_be_pushed_exactly_is_left_to_spark_by_identity() -> None:
    filters: list[Filter] = [
        EqualTo(("tags",), " a"),  # the broker trims expression items
        In(("tags",), ("a", "x||y")),  # '||' separates items
        EqualTo(("tags",), "*"),  # '*' means every message
        EqualTo(("tags",), ""),
        In(("tags",), (1, 2)),
        Not(EqualTo(("tags",), "a")),
        EqualNullSafe(("tags",), None),  # IS NULL
        StringStartsWith(("tags",), "a"),
        EqualTo(("queueId",), "1"),
        EqualTo(("queueId",), True),
        GreaterThan(("queueId",), 1),
        EqualTo(("topic",), "T"),
        IsNotNull(("brokerName",)),
        EqualTo(("properties", "k"), "v"),
        LessThan(("storeTimestamp",), dt.datetime(2024, 1, 1, tzinfo=UTC)),
        GreaterThanOrEqual(("storeTimestamp",), dt.datetime(2024, 1, 1)),  # naive: no zone
        GreaterThanOrEqual(("bornTimestamp",), dt.datetime(2024, 1, 1, tzinfo=UTC)),
    ]
    push, left = translate(filters)
    assert push == NO_PUSHDOWN
    assert len(left) == len(filters) and all(a is b for a, b in zip(left, filters, strict=True))


def test_pushed_tags_combine_with_sub_expression() -> None:
    push, _ = translate([In(("tags",), ("a", "b"))])
    assert push.sub_expression("*") == "a || b"
    assert push.sub_expression("b||c") == "b"
    assert push.sub_expression(" c || d ") is None  # nothing can match: nothing is read
    assert NO_PUSHDOWN.sub_expression("c || d") == "c || d"
    nothing, left = translate([EqualTo(("tags",), None)])  # tags = NULL
    assert left == [] and nothing.tags == frozenset() and nothing.sub_expression("*") is None


def test_store_time_bounds_narrow_starts_but_stay_with_spark() -> None:
    early = GreaterThanOrEqual(("storeTimestamp",), dt.datetime(2024, 1, 1, tzinfo=UTC))
    late = GreaterThan(
        ("storeTimestamp",),
        dt.datetime(2024, 1, 1, 1, 0, 0, 999, tzinfo=dt.timezone(dt.timedelta(hours=1))),
    )
    push, left = translate([early, EqualTo(("queueId",), 1), late])
    assert left == [early, late] and left[0] is early and left[1] is late
    bound = int(dt.datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000)
    assert push.min_store_ms == bound  # the later bound, its microseconds rounded down
    assert push.time_lookup_ms == bound - STORE_TIME_SLACK_MS
    assert "storeTimestamp > 2024-01-01T00:00:00.000+00:00" in push.describe()
    assert Pushdown(min_store_ms=5).time_lookup_ms == 0

    start = {mq(0): 3, mq(1): 3, mq(2): 8}
    narrowed = Pushdown(queue_ids=frozenset({1, 2})).narrow(start, {mq(1): 6, mq(2): 5})
    assert narrowed == {mq(1): 6, mq(2): 8}  # moved up only; queue 0 is not read
    assert NO_PUSHDOWN.narrow(start, {}) == start


def test_only_sparks_pushdown_planner_gets_the_reader_that_takes_filters() -> None:
    # Spark fails reads of a reader defining pushFilters while pushdown is off.
    assert RockletBatchReader.pushFilters is DataSourceReader.pushFilters
    assert FilteringBatchReader.pushFilters is not DataSourceReader.pushFilters
    assert not planning_with_filters()
    source = RockletDataSource({"nameServer": "127.0.0.1:1", "subscribe": "T"})
    plain = source.reader(SOURCE_SCHEMA)
    assert type(plain) is RockletBatchReader

    planner: dict[str, Any] = {"__name__": "pyspark.sql.worker.data_source_pushdown_filters"}
    exec("def build(schema):\n    return make(schema)", planner)
    planner["make"] = source.reader
    taking = planner["build"](SOURCE_SCHEMA)
    assert type(taking) is FilteringBatchReader
    assert list(taking.pushFilters([EqualTo(("queueId",), 1), EqualTo(("topic",), "T")])) == [
        EqualTo(("topic",), "T")
    ]
    # Executors get the reader pickled, narrowing included.
    copy = pickle.loads(pickle.dumps(taking))
    assert type(copy) is FilteringBatchReader and copy._pushdown.queue_ids == frozenset({1})
    assert type(pickle.loads(pickle.dumps(plain))) is RockletBatchReader


# -- through Spark ------------------------------------------------------------------------


@contextmanager
def pushdown_enabled(spark: SparkSession) -> Iterator[None]:
    before = spark.conf.get(PUSHDOWN_CONF)
    spark.conf.set(PUSHDOWN_CONF, "true")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(PUSHDOWN_CONF)
        else:
            spark.conf.set(PUSHDOWN_CONF, before)


def messages_pulled(broker: BrokerThread, topic: str, group: str) -> int:
    """Messages the broker returned to ``group``'s pulls of ``topic`` (GROUP_GET_NUMS)."""

    async def count() -> int:
        sink = broker.broker.ctx.metrics
        assert isinstance(sink, StatsSink)  # a started broker always keeps statistics
        item = sink.broker.item("GROUP_GET_NUMS", f"{topic}@{group}")
        return 0 if item is None else int(item.value)

    return broker.call(count())


def read(spark: SparkSession, broker: BrokerThread, topic: str, **options: str) -> DataFrame:
    reader = spark.read.format("rocklet").option("nameServer", broker.namesrv)
    for name, value in {"subscribe": topic, **options}.items():
        reader = reader.option(name, value)
    return reader.load()


def rows(df: DataFrame) -> list[tuple[int, int, str | None, bytes]]:
    return sorted(
        (r.queueId, r.queueOffset, r.tags, bytes(r.body))
        for r in df.select("queueId", "queueOffset", "tags", "body").collect()
    )


def test_tag_queue_and_broker_filters_read_only_what_matches(
    spark: SparkSession, broker: BrokerThread, capsys: pytest.CaptureFixture[str]
) -> None:
    broker.set_queues("Pushed", 4)
    tags = ["a", "b", "c", None]
    produce(
        broker.namesrv,
        "Pushed",
        [f"m{i}".encode() for i in range(40)],  # 10 per queue: one pull each
        tags=[tags[(i // 4) % 4] for i in range(40)],
    )
    everything = rows(read(spark, broker, "Pushed"))
    where = "queueId IN (1, 2, 7) AND tags IN ('a', 'b') AND brokerName = 'broker-a'"
    wanted = [r for r in everything if r[0] in (1, 2) and r[2] == "b"]  # 'b' is in both
    assert len(wanted) == 6

    with pushdown_enabled(spark):
        df = read(spark, broker, "Pushed", subExpression="b || c", consumerGroup="pd-q").where(
            where
        )
        assert rows(df) == wanted
        df.explain("formatted")
    # Only the matching messages of queues 1 and 2 left the broker (pushdown ignored:
    # all 40, or 20 of the two queues).
    assert messages_pulled(broker, "Pushed", "pd-q") == len(wanted)
    plan = capsys.readouterr().out
    pushed = next(line for line in plan.splitlines() if line.startswith("PushedFilters:"))
    for column in ("queueId", "tags", "brokerName"):
        assert column in pushed

    # With pushdown off (Spark's default) the same query still works, unnarrowed.
    off = read(spark, broker, "Pushed", subExpression="b || c", consumerGroup="pd-off")
    assert rows(off.where(where)) == wanted
    assert messages_pulled(broker, "Pushed", "pd-off") == 20  # every 'b' or 'c'


class _Earlier:
    """The system clock, ``shift_ms`` in the past: the broker stores "old" messages."""

    def __init__(self, shift_ms: int) -> None:
        self._clock, self._shift = SystemClock(), shift_ms

    def now_ms(self) -> int:
        return self._clock.now_ms() - self._shift

    def monotonic_ms(self) -> int:
        return self._clock.monotonic_ms()


def test_store_time_filter_starts_each_queue_late_and_spark_rechecks(
    spark: SparkSession, broker: BrokerThread
) -> None:
    broker.set_queues("Timed", 2)
    store = broker.broker.ctx.store
    real = store.clock
    store.clock = _Earlier(2 * 3_600_000)
    try:
        produce(broker.namesrv, "Timed", [f"old{i}".encode() for i in range(6)], queues=2)
    finally:
        store.clock = real
    produce(broker.namesrv, "Timed", [f"new{i}".encode() for i in range(4)], queues=2)
    everything = read(spark, broker, "Timed").collect()
    cut = dt.datetime.now(UTC).replace(tzinfo=None) - dt.timedelta(hours=1)  # naive UTC
    wanted = sorted(bytes(r.body) for r in everything if r.storeTimestamp >= cut and r.queueId == 1)
    assert wanted == [b"new1", b"new3"]

    with pushdown_enabled(spark):
        df = read(spark, broker, "Timed", consumerGroup="pd-t").where(
            f"storeTimestamp >= timestamp'{cut.isoformat()}' AND queueId = 1"
        )
        assert sorted(bytes(r.body) for r in df.select("body").collect()) == wanted
    # Queue 1 was read from its first new message on (queue 0 not at all); an
    # unnarrowed read would have pulled its 3 old messages too.
    assert messages_pulled(broker, "Timed", "pd-t") == 2
