"""One SparkSession (local[2]) for the whole run, and a broker per test.

Spark's Python workers must run this interpreter (it has pyarrow and the connector)
and must find ``pyspark_rocklet`` with ``pkgutil.iter_modules`` for the automatic
registration of the ``rocklet`` format, which an editable install's import hook does
not provide: so the repository root goes on their PYTHONPATH.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.spark.support import BrokerThread

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("rocklet-connector-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        # Tiny test data: compiling whole-stage code and re-planning adaptively cost
        # more than they save (about half the time of the first stateful query).
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.python.worker.faulthandler.enabled", "true")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerThread]:
    thread = BrokerThread(tmp_path / "store")
    try:
        yield thread
    finally:
        thread.stop()
