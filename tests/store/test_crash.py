"""kill -9 a SYNC_FLUSH writer at random points: every acknowledged record survives."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from rocklet.store.message_store import MessageStore
from tests.store.helpers import read_all, small_config

ROOT = Path(__file__).resolve().parents[2]


def _run_child(store_dir: Path, first: int, acks_before_kill: int) -> dict[int, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.store.crash_child", str(store_dir), str(first)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    acked: dict[int, int] = {}
    try:
        assert proc.stdout.readline().strip() == "ready"
        while len(acked) < acks_before_kill:
            line = proc.stdout.readline()
            assert line, "child died"
            seq, offset = line.split()
            acked[int(seq)] = int(offset)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        rest, _ = proc.communicate(timeout=30)
    for line in rest.splitlines():  # acknowledged before the kill, still in the pipe
        seq, offset = line.split()
        acked[int(seq)] = int(offset)
    return acked


def test_acknowledged_records_survive_kill_9(tmp_path: Path) -> None:
    """15 rounds of append + SIGKILL + abnormal recovery lose no acknowledged record."""
    rng = random.Random(1234)
    all_acked: dict[int, int] = {}
    first = 0
    for _ in range(15):
        acked = _run_child(tmp_path, first, rng.randint(1, 60))
        all_acked.update(acked)
        assert (tmp_path / "abort").exists()
        with MessageStore.open(small_config(tmp_path)) as store:
            assert not store.recovery_report.clean
            found = {}
            for q in range(3):
                for m in read_all(store, "T", q):
                    assert m.crc_ok()
                    found[int(m.properties["seq"])] = m.physical_offset
            for seq, offset in all_acked.items():
                assert found.get(seq) == offset, seq
            first = max(found) + 1
