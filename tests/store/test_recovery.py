"""Recovery: torn tails, garbage in derived files, clean and abnormal restarts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocklet.store.message_store import MessageStore
from rocklet.store.results import PutResult
from tests.store.helpers import message, read_all, small_config
from tests.store.layout_checker import check_store

SEG = 16 * 1024


def _fill(path: Path, count: int = 40) -> list[PutResult]:
    with MessageStore.open(small_config(path)) as store:
        return [
            store.put_message(message(n, queue_id=n % 2, size=150 + n * 7)) for n in range(count)
        ]


def _damage(root: Path, offset: int, *, nonsense: bool) -> None:
    """Overwrite the commitlog from ``offset`` to its segment's end."""
    seg = root / "commitlog" / f"{offset - offset % SEG:020d}"
    with open(seg, "r+b") as f:
        f.seek(offset % SEG)
        rest = SEG - offset % SEG
        f.write(os.urandom(rest) if nonsense else bytes(rest))


def _seqs(store: MessageStore) -> set[int]:
    return {int(m.properties["seq"]) for q in (0, 1) for m in read_all(store, "T", q)}


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(k=st.integers(0, 39), cut=st.floats(0.0, 0.99), nonsense=st.booleans())
def test_torn_record_leaves_exactly_the_records_before(
    tmp_path_factory: object, k: int, cut: float, nonsense: bool
) -> None:
    """Cut inside record k (to segment end, later segments removed): [0, k) survive.

    The cut lands in the header or body: BODYCRC covers the body only, so a cut inside
    the properties text is undetectable (as in RocketMQ) and not a torn record.
    """
    root = Path(tmp_path_factory.mktemp("torn"))  # type: ignore[attr-defined]
    puts = _fill(root)
    target = puts[k]
    body_end = 88 + 150 + k * 7  # fixed fields + body length prefix + body
    at = target.wrote_offset + int(cut * body_end)
    _damage(root, at, nonsense=nonsense)
    for seg in (root / "commitlog").iterdir():
        if int(seg.name) > at:
            seg.unlink()
    (root / "abort").touch()
    with MessageStore.open(small_config(root)) as store:
        rep = store.recovery_report
        assert not rep.clean and rep.commitlog_max_offset == target.wrote_offset
        assert _seqs(store) == set(range(k))
        for n in range(k):
            assert store.query_by_key("T", f"k-{n}", 2), n
        for n in range(k, 40):
            assert store.query_by_key("T", f"k-{n}", 2) == []
        res = store.put_message(message(1000, queue_id=0))
        assert res.ok and res.queue_offset == len(range(0, k, 2))
        assert 1000 in _seqs(store)
    assert check_store(root, SEG, 16, 32, 40).errors == []


def test_garbage_consume_queue_is_rebuilt(tmp_path: Path) -> None:
    """Nonsense over a consume-queue file is detected and rebuilt from the commitlog."""
    _fill(tmp_path)
    for cq_file in (tmp_path / "consumequeue" / "T" / "1").iterdir():
        cq_file.write_bytes(os.urandom(cq_file.stat().st_size))
    with MessageStore.open(small_config(tmp_path)) as store:
        assert store.recovery_report.consume_queues_truncated == 1
        assert _seqs(store) == set(range(40))
    assert check_store(tmp_path, SEG, 16, 32, 40).errors == []


def test_garbage_index_is_rebuilt(tmp_path: Path) -> None:
    """Nonsense over index files is detected; every key resolves after recovery."""
    _fill(tmp_path)
    for idx in (tmp_path / "index").iterdir():
        idx.write_bytes(os.urandom(idx.stat().st_size))
    with MessageStore.open(small_config(tmp_path)) as store:
        assert store.recovery_report.index_files_dropped > 0
        for n in range(40):
            assert len(store.query_by_key("T", f"k-{n}", 2)) == 1
    assert check_store(tmp_path, SEG, 16, 32, 40).errors == []


def test_missing_consume_queues_rebuilt_after_crash(tmp_path: Path) -> None:
    """With the abort marker and no consume queues, everything is re-dispatched."""
    _fill(tmp_path)
    shutil.rmtree(tmp_path / "consumequeue")
    (tmp_path / "abort").touch()
    (tmp_path / "checkpoint").write_bytes(bytes(4096))
    with MessageStore.open(small_config(tmp_path)) as store:
        assert store.recovery_report.redispatched == 40
        assert _seqs(store) == set(range(40))


def _max_offsets(store: MessageStore) -> tuple[int, int, int]:
    return store.commitlog_max_offset(), store.max_offset("T", 0), store.max_offset("T", 1)


def test_restart_scenarios_keep_max_offsets(tmp_path: Path) -> None:
    """Clean restart, damaged tail + restart, damaged tail + abort (RocketMQ testRecover)."""
    _fill(tmp_path)
    with MessageStore.open(small_config(tmp_path)) as store:
        before = _max_offsets(store)
        assert store.recovery_report.clean
    end = before[0]
    # Damage past the last record: stale bytes after the valid end.
    with open(tmp_path / "commitlog" / f"{end - end % SEG:020d}", "r+b") as f:
        f.seek(end % SEG)
        f.write(b"\x17" * 64)
    with MessageStore.open(small_config(tmp_path)) as store:
        assert _max_offsets(store) == before
        assert store.recovery_report.truncated_bytes == 64
    with open(tmp_path / "commitlog" / f"{end - end % SEG:020d}", "r+b") as f:
        f.seek(end % SEG)
        f.write(b"\xda\xa3" * 40)
    (tmp_path / "abort").touch()
    with MessageStore.open(small_config(tmp_path)) as store:
        assert not store.recovery_report.clean
        assert _max_offsets(store) == before
        assert _seqs(store) == set(range(40))


def test_an_allocation_interrupted_by_a_crash_leaves_no_segment(tmp_path: Path) -> None:
    # kill -9 between creating a segment and sizing it once left a 0-byte commitlog
    # file that stopped the next start. New files are now built under a temporary
    # name and renamed when whole: what a crash can leave behind is that temporary.
    results = _fill(tmp_path)
    last = results[-1].wrote_offset + results[-1].wrote_bytes
    next_segment = last - last % SEG + SEG
    stale = [
        tmp_path / "commitlog" / f"{next_segment:020d}.allocating",
        tmp_path / "consumequeue" / "T" / "0" / f"{10**9:020d}.allocating",
        tmp_path / "index" / "20261125000000000.allocating",
    ]
    for path in stale:
        path.write_bytes(b"")  # the size it has right after os.open
    (tmp_path / "abort").touch()
    with MessageStore.open(small_config(tmp_path)) as store:
        assert _seqs(store) == set(range(len(results)))
        assert store.commitlog_max_offset() == last
    assert not any(path.exists() for path in stale)
    assert check_store(tmp_path, SEG, 16, 32, 40).errors == []
