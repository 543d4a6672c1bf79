"""examples/windowed_counts.py end to end: topic in, windowed counts out, via Spark."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
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


def test_windowed_counts_pipeline(
    spark: SparkSession, broker: BrokerThread, tmp_path: Path
) -> None:
    example = load_example()
    broker.set_queues("Clicks", 2)
    # 90 clicks over three minutes, then one at +10 min that moves the watermark past them.
    times = [T0 + i * 2000 for i in range(90)] + [T0 + 10 * MINUTE]
    tags = ["home" if i % 3 else "cart" for i in range(90)] + ["home"]
    bodies = [json.dumps({"ts": ts, "user": i % 7}).encode() for i, ts in enumerate(times)]
    produce(broker.namesrv, "Clicks", bodies, queues=2, tags=tags)
    expected = Counter(
        (f"2025-11-21T10:0{(ts - T0) // MINUTE}:00.000Z", tag)
        for ts, tag in zip(times[:90], tags, strict=False)
    )

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
    assert Counter({(w["windowStart"], w["tag"]): w["count"] for w in written}) == expected
    assert len(written) == len(expected) == 6  # each closed window once; 10:10 is still open
