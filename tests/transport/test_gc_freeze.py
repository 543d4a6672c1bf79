"""The servers freeze their start-up objects, so full collections skip them.

The freezing check runs in its own interpreter: freezing is process-wide, and the test
process's own heap is not a server's.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.test_cli import BROKER_LISTENING, spawn, wait_for_line
from tests.test_startup import standalone_args, stop

_FREEZE = """
import gc, json, weakref
import rocklet.broker.app  # a broker's modules, classes and tables
from rocklet.transport.heap import freeze_startup_objects

class Node:
    pass

garbage = Node()
garbage.me = garbage  # a cycle: only the collector frees it
dead = weakref.ref(garbage)
del garbage
before = len(gc.get_objects())
frozen = freeze_startup_objects()
print(json.dumps({
    "before": before, "frozen": frozen, "count": gc.get_freeze_count(),
    "visible": len(gc.get_objects()), "cycle_freed": dead() is None,
}))
"""


def test_freezing_collects_first_then_hides_every_object_from_the_collector() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _FREEZE], capture_output=True, text=True, check=True, timeout=60
    )
    got = json.loads(out.stdout)
    assert got["cycle_freed"] is True  # garbage is not frozen for good
    assert got["frozen"] == got["count"] > 10_000
    assert got["visible"] < 100  # a full collection has next to nothing left to visit
    assert got["before"] > 10_000


async def test_the_broker_freezes_its_start_up_objects_once_up(tmp_path: Path) -> None:
    proc = await spawn(*standalone_args(tmp_path / "data"), "--log-level", "debug")
    try:
        await wait_for_line(proc, BROKER_LISTENING)
        frozen = await wait_for_line(proc, re.compile(r"frozen_objects=(\d+)"))
    finally:
        assert await stop(proc) == 0
    assert int(frozen[1]) > 10_000
