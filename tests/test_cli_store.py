"""``rocklet store check`` as a subprocess: exit status, table, JSON, a store in use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rocklet.store.directory import StoreLock
from rocklet.store.message_store import MessageStore
from rocklet.store.results import PutResult
from tests.conftest import GOLDEN_STORE
from tests.store.helpers import message, small_config

#: broker.conf keys for :func:`tests.store.helpers.small_config`'s sizes.
SMALL_CONF = (
    "mappedFileSizeCommitLog=16384\nmappedFileSizeConsumeQueue=320\n"
    "maxHashSlotNum=32\nmaxIndexNum=40\n"
)


def rocklet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocklet", *args], capture_output=True, text=True, timeout=60
    )


def _store(tmp_path: Path) -> tuple[Path, Path, list[PutResult]]:
    root = tmp_path / "data"
    with MessageStore.open(small_config(root)) as store:
        puts = [store.put_message(message(n, queue_id=n % 2, size=150)) for n in range(120)]
    conf = tmp_path / "broker.conf"
    conf.write_text(SMALL_CONF + f"storePathRootDir={root}\n")
    return root, conf, puts


def test_a_clean_store_exits_0_with_its_figures(tmp_path: Path) -> None:
    root, conf, _ = _store(tmp_path)
    done = rocklet("store", "check", "-c", str(conf))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"Store {root} (stopped cleanly)"
    assert "records                120" in lines and lines[-1] == "No problems found."
    # Without -c the sizes are read from the files (index geometry included).
    guessed = rocklet("store", "check", "--data-dir", str(root), "--json")
    assert guessed.returncode == 0 and json.loads(guessed.stdout)["findings"] == []


def test_a_damaged_store_exits_1_naming_the_damage(tmp_path: Path) -> None:
    root, conf, puts = _store(tmp_path)
    with open(root / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(puts[3].wrote_offset)
        f.write(b"\xff" * 8)
    done = rocklet("store", "check", "-c", str(conf))
    assert done.returncode == 1
    row = next(line for line in done.stdout.splitlines() if line.startswith("problem"))
    assert row.split()[:4] == ["problem", "commitlog", f"commitlog/{0:020d}", "878"]
    assert done.stdout.splitlines()[-1] == "1 problem, 0 warnings."
    report = json.loads(rocklet("store", "check", "-c", str(conf), "--json").stdout)
    assert report["ok"] is False and report["summary"]["damaged_bytes"] == 292
    assert report["findings"][0]["offset"] == puts[3].wrote_offset


def test_the_golden_store_is_clean_without_a_config() -> None:
    done = rocklet("store", "check", "--data-dir", str(GOLDEN_STORE))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "records                2033" in done.stdout.splitlines()


def test_no_store_or_a_bad_config_exit_2(tmp_path: Path) -> None:
    done = rocklet("store", "check", "--data-dir", str(tmp_path / "nothing"))
    assert done.returncode == 2
    assert (
        done.stderr
        == f"rocklet store check: no store at {tmp_path / 'nothing'} (no commitlog directory)\n"
    )
    conf = tmp_path / "bad.conf"
    conf.write_text("mappedFileSizeCommitLog=12\n")
    assert rocklet("store", "check", "-c", str(conf)).returncode == 2


def test_a_store_in_use_is_refused_unless_forced(tmp_path: Path) -> None:
    root, conf, _ = _store(tmp_path)
    with StoreLock.acquire(root, "rocklet broker"):
        refused = rocklet("store", "check", "-c", str(conf))
        assert refused.returncode == 2 and refused.stdout == ""
        assert "is in use by pid" in refused.stderr and "(rocklet broker started" in refused.stderr
        assert "rocklet admin storeCheck -b HOST:PORT" in refused.stderr
        forced = rocklet("store", "check", "-c", str(conf), "--force")
        assert forced.returncode == 0 and "checking anyway" in forced.stderr
