"""One SparkSession (local[2]) for the whole run, and a broker per test.

The session's environment and settings are in :mod:`tests.spark.support`
(:func:`~tests.spark.support.driver_environment`, :func:`~tests.spark.support.local_session`),
which a test's own driver process uses too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.spark.support import BrokerThread, driver_environment, local_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.update(driver_environment())
    session = local_session("rocklet-connector-tests")
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


@pytest.fixture
def filtering_broker(tmp_path: Path) -> Iterator[BrokerThread]:
    """A broker with ``enablePropertyFilter=true``: it evaluates SQL92 selectors."""
    thread = BrokerThread(tmp_path / "store", enable_property_filter=True)
    try:
        yield thread
    finally:
        thread.stop()
