"""The replication tier: masters, slaves and name servers as real processes.

Every test here but the in-process ones of ``test_ha_unit.py`` and
``test_ha_handshake.py`` is marked ``replication``; the extra interpreters' fast tier
(``make test-pythons``) leaves them to the default interpreter's full run, as it does
the adversity tier: they drive the same modules through subprocesses, where the
in-process tests already cover each interpreter, and they are the slowest part of
the suite.
"""

from __future__ import annotations

import os

import pytest

_IN_PROCESS = {"test_ha_unit.py", "test_ha_handshake.py"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the process tests of this directory ``replication``."""
    here = os.path.dirname(__file__)
    for item in items:
        path = str(item.fspath)
        if path.startswith(here) and os.path.basename(path) not in _IN_PROCESS:
            item.add_marker(pytest.mark.replication)
