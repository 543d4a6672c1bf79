"""examples/windowed_counts.py end to end: topic in, windowed counts out, via Spark."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest
from pyspark.sql import SparkSession

from tests.spark.support import QUERY_TIMEOUT, BrokerThread, produce, pull_all

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "windowed_counts.py"
T0 = 1_763_719_200_000  # 2025-11-21T10:00:00Z
MINUTE = 60_000


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("windowed_counts", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def session_time_zone(spark: SparkSession, zone: str) -> Iterator[None]:
    previous = spark.conf.get("spark.sql.session.timeZone")
    assert previous is not None
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


def printed(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The example's own lines (the broker thread logs to stdout too)."""
    lines = capsys.readouterr().out.splitlines()
    return [ln for ln in lines if ln.startswith(("window times ", "read "))]


def epoch_ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


def test_windowed_counts_pipeline_labels_times_with_the_session_zone(
    spark: SparkSession, broker: BrokerThread, tmp_path: Path
) -> None:
    """In a non-UTC session the window times carry that zone's offset: same instants."""
    example = load_example()
    broker.set_queues("Clicks", 2)
    # 90 clicks over three minutes, then one at +10 min that moves the watermark past them.
    times = [T0 + i * 2000 for i in range(90)] + [T0 + 10 * MINUTE]
    tags = ["home" if i % 3 else "cart" for i in range(90)] + ["home"]
    bodies = [json.dumps({"ts": ts, "user": i % 7}).encode() for i, ts in enumerate(times)]
    produce(broker.namesrv, "Clicks", bodies, queues=2, tags=tags)
    expected = Counter(
        (T0 + (ts - T0) // MINUTE * MINUTE, tag) for ts, tag in zip(times[:90], tags, strict=False)
    )

    with session_time_zone(spark, "Asia/Kolkata"):  # UTC+05:30, no daylight saving
        query = (
            example.build(
                spark,
                name_server=broker.namesrv,
                source="Clicks",
                sink="ClickCounts",
                checkpoint=str(tmp_path / "checkpoint"),
                max_offsets_per_trigger=40,
            )
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(QUERY_TIMEOUT) and query.exception() is None

    written = [json.loads(m.body) for m in pull_all(broker.namesrv, "ClickCounts")]
    assert {w["windowStart"][:16] for w in written} == {
        f"2025-11-21T15:3{m}" for m in range(3)
    }  # 10:0m UTC
    assert all(w["windowStart"].endswith("+05:30") for w in written)
    got = Counter({(epoch_ms(w["windowStart"]), w["tag"]): w["count"] for w in written})
    assert got == expected
    assert all(epoch_ms(w["windowEnd"]) - epoch_ms(w["windowStart"]) == MINUTE for w in written)
    assert len(written) == len(expected) == 6  # each closed window once; 10:10 is still open


def test_the_command_prints_its_zone_and_what_each_run_read(
    spark: SparkSession,
    broker: BrokerThread,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = load_example()
    broker.set_queues("Views", 1)
    bodies = [json.dumps({"ts": T0 + i * 1000}).encode() for i in range(5)]
    produce(broker.namesrv, "Views", [*bodies, json.dumps({"ts": T0 + 5 * MINUTE}).encode()])
    argv = [
        "--name-server",
        broker.namesrv,
        "--source",
        "Views",
        "--sink",
        "ViewCounts",
        "--checkpoint",
        str(tmp_path / "checkpoint"),
        "--available-now",
    ]
    example.main(argv)
    out = printed(capsys)
    assert out[0] == "window times are written in the UTC time zone (--time-zone)"
    assert out[-1].startswith("read 6 message(s) from Views in ")
    (window,) = [json.loads(m.body) for m in pull_all(broker.namesrv, "ViewCounts")]
    assert (window["windowStart"], window["count"]) == ("2025-11-21T10:00:00.000Z", 5)

    example.main(argv)  # again: the checkpoint has read everything
    out = printed(capsys)
    assert out[-1].startswith("read no message from Views: the rocklet source logged why")
