"""The adversity tier: real broker processes under faults (kill -9, full disks, floods,
damaged files, hostile clients).

Every test here is marked ``adversity``. ``make test`` runs them with short counts; set
``ROCKLET_ADVERSITY=long`` for the counts the reliability figures in docs/reliability.md
were measured with (e.g. 100 kill -9 cycles instead of a few).
"""

from __future__ import annotations

import os

import pytest

#: ``ROCKLET_ADVERSITY=long`` switches to the long counts.
LONG = os.environ.get("ROCKLET_ADVERSITY", "") == "long"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of this directory ``adversity``."""
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.adversity)


def rounds(short: int, long: int) -> int:
    """How many rounds of a fault loop to run: ``short`` in make test, ``long`` when asked."""
    return long if LONG else short
