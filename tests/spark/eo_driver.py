"""A Spark driver of its own for the exactly-once restart test (killed with kill -9).

``python -m tests.spark.eo_driver NAMESRV CHECKPOINT`` copies ``EoIn`` to ``EoOut``
exactly once (availableNow) in a fresh local[2] session and exits 0 when the query
finished, 1 when it failed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from tests.spark.support import local_session, stream_copy

#: Rows per micro-batch (the test's source has two batches of them).
PER_BATCH = 120


def copy(spark: SparkSession, namesrv: str, checkpoint: Path) -> Exception | None:
    """Copy ``EoIn`` to ``EoOut`` exactly once, to the end; the query's failure, if any."""
    return stream_copy(
        spark,
        namesrv,
        "EoIn",
        "EoOut",
        checkpoint,
        per_trigger=PER_BATCH,
        columns=("body", "tags"),
        deliveryGuarantee="exactly-once",
    )


def main(argv: list[str]) -> int:
    """Run the copy once; the exit status says whether the query finished."""
    # A test SIGKILLs this driver: its JVM's and Python workers' temporary files go
    # beside the checkpoint, in the test's own directory, not in /tmp.
    scratch = Path(argv[2]).parent / "driver-tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(scratch)  # the Python workers inherit it
    spark = local_session("rocklet-eo-driver", scratch)
    try:
        failure = copy(spark, argv[1], Path(argv[2]))
    finally:
        spark.stop()
    return 0 if failure is None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
