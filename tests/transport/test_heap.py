"""The servers keep freed memory for the next request instead of faulting it back in.

Each check runs in its own interpreter: the setting is process-wide, and the page faults
are counted for that process alone.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli import BROKER_LISTENING, spawn, wait_for_line
from tests.test_startup import standalone_args, stop

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="the thresholds are glibc's malloc settings",
)

# Like a broker under batch produce: 40 request-sized buffers filled, then all freed,
# five times; page faults counted from the second round on (the first maps the pages).
_CHURN = """
import json, resource, sys
from rocklet.transport.heap import retain_freed_memory
done = retain_freed_memory() if sys.argv[1] == "retain" else "untouched"
fill = bytes(range(256)) * 4096
faults = 0
for round_ in range(5):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    held = []
    for _ in range(40):
        buf = bytearray(len(fill))
        buf[:] = fill
        held.append(buf)
    del held
    if round_:
        faults += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"done": done, "faults": faults}))
"""
_PAGES_PER_ROUND = 40 * 1024 * 1024 // 4096


def churn(mode: str, **env: str) -> dict[str, object]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_"))}
    out = subprocess.run(
        [sys.executable, "-c", _CHURN, mode],
        env=environ | env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_freed_buffers_are_reused_without_faults() -> None:
    kept = churn("retain")
    assert kept["done"] == "applied"
    assert isinstance(kept["faults"], int) and kept["faults"] < _PAGES_PER_ROUND // 10
    # The defaults give the 40 MiB back each round and fault it in again: what this saves.
    plain = churn("plain")
    assert isinstance(plain["faults"], int) and plain["faults"] > 3 * _PAGES_PER_ROUND


def test_an_operators_malloc_settings_win() -> None:
    for name in ("MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"):
        value = "131072" if name.startswith("MALLOC") else "glibc.malloc.trim_threshold=131072"
        got = churn("retain", **{name: value})
        assert got["done"] == "operator settings"
        # Left as the operator set it: a small trim threshold still gives pages back.
        assert isinstance(got["faults"], int) and got["faults"] > 3 * _PAGES_PER_ROUND


async def test_the_broker_applies_it_at_start(tmp_path: Path) -> None:
    proc = await spawn(*standalone_args(tmp_path / "data"), "--log-level", "debug")
    try:
        heap = await wait_for_line(proc, re.compile(r"retain_freed_memory=(\S+)"))
        await wait_for_line(proc, BROKER_LISTENING)
    finally:
        assert await stop(proc) == 0
    assert heap[1] == "applied"
