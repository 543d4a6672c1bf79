"""The store directory's lock and write probe, on real files."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocklet.store.config import StoreConfig
from rocklet.store.directory import (
    StoreDirectoryError,
    StoreInUseError,
    StoreLock,
    check_writable,
)
from rocklet.store.message_store import MessageStore
from rocklet.store.results import MessageToStore
from tests.readonly import read_only_directory


def small(root: Path) -> StoreConfig:
    return StoreConfig(
        store_path=root,
        commitlog_file_size_bytes=1 << 20,
        consume_queue_entries_per_file=1000,
        index_hash_slots=100,
        index_max_entries=400,
    )


def message(body: bytes) -> MessageToStore:
    return MessageToStore("T", 0, body)


def test_a_second_open_is_refused_and_leaves_the_live_store_alone(tmp_path: Path) -> None:
    with MessageStore.open(small(tmp_path)) as store:
        assert store.put_message(message(b"one")).ok
        abort = tmp_path / "abort"
        before = abort.stat().st_mtime_ns
        with pytest.raises(StoreInUseError) as refused:
            MessageStore.open(small(tmp_path))
        text = str(refused.value)
        assert f"the store {tmp_path} is in use by pid {os.getpid()} (rocklet store started " in (
            text
        )
        assert "stop it or choose another data directory" in text
        assert refused.value.holder["program"] == "rocklet store"
        # The refused open ran no recovery: the marker of the running store is intact,
        # and it keeps working.
        assert abort.exists() and abort.stat().st_mtime_ns == before
        assert store.put_message(message(b"two")).ok
    assert (tmp_path / "lock").read_text() == ""  # released, the file stays
    with MessageStore.open(small(tmp_path)) as reopened:
        assert reopened.max_offset("T", 0) == 2
        assert "pid=" in (tmp_path / "lock").read_text()


def test_release_is_idempotent_and_frees_the_lock(tmp_path: Path) -> None:
    lock = StoreLock.acquire(tmp_path, "test")
    lock.release()
    lock.release()
    with StoreLock.acquire(tmp_path, "again") as again:
        assert "program=again" in again.path.read_text()


def test_holder_details_not_written_yet(tmp_path: Path) -> None:
    # The holder locks before it writes its details: a refusal in between still says
    # something sensible.
    with StoreLock.acquire(tmp_path, "first") as lock:
        lock.path.write_text("")
        with pytest.raises(StoreInUseError, match="another process"):
            StoreLock.acquire(tmp_path, "second")


def test_a_read_only_root_is_reported_with_the_fix(tmp_path: Path) -> None:
    root = tmp_path / "ro"
    with read_only_directory(root):
        with pytest.raises(StoreDirectoryError) as refused:
            StoreLock.acquire(root, "test")
        assert f"cannot write to {root} (the store)" in str(refused.value)
        assert "make it writable" in str(refused.value)
        with pytest.raises(StoreDirectoryError, match=r"cannot write to .*sub"):
            check_writable(root / "sub", "something")
    check_writable(root, "the store")
    assert list(root.iterdir()) == []  # the probe cleans up after itself


def test_a_shared_lock_keeps_a_broker_out_and_names_the_check(tmp_path: Path) -> None:
    StoreLock.acquire(tmp_path, "rocklet broker").release()  # the file a broker leaves
    check = StoreLock.acquire_shared(tmp_path, "rocklet store check")
    assert check is not None
    try:
        with pytest.raises(StoreInUseError, match=r"\(rocklet store check started"):
            StoreLock.acquire(tmp_path, "rocklet broker")
        second = StoreLock.acquire_shared(tmp_path, "rocklet store check")
        assert second is not None  # two checks may run together
        second.release()
    finally:
        check.release()
    StoreLock.acquire(tmp_path, "rocklet broker").release()
    with StoreLock.acquire(tmp_path, "rocklet broker"), pytest.raises(StoreInUseError):
        StoreLock.acquire_shared(tmp_path, "rocklet store check")
    assert StoreLock.acquire_shared(tmp_path / "no-lock-file", "rocklet store check") is None


def test_a_commitlog_outside_the_root_is_locked_too(tmp_path: Path) -> None:
    commitlog = tmp_path / "shared" / "commitlog"
    first = dataclasses.replace(small(tmp_path / "a"), commitlog_path=commitlog)
    second = dataclasses.replace(small(tmp_path / "b"), commitlog_path=commitlog)
    with MessageStore.open(first) as store:
        assert store.put_message(message(b"one")).ok
        with pytest.raises(StoreInUseError) as refused:
            MessageStore.open(second)
        assert refused.value.path == commitlog
        assert str(refused.value).startswith(f"the commitlog directory {commitlog} is in use by ")
        assert not (tmp_path / "b" / "abort").exists()  # refused before any recovery
        # A check of the other root (shared) is refused while the store writes.
        with pytest.raises(StoreInUseError):
            StoreLock.acquire_shared(tmp_path / "a", "rocklet store check", commitlog)
    with MessageStore.open(second) as reopened:  # released with the first store
        assert reopened.put_message(message(b"two")).ok
    check = StoreLock.acquire_shared(tmp_path / "b", "rocklet store check", commitlog)
    assert check is not None
    with check, pytest.raises(StoreInUseError):
        MessageStore.open(first)


#: What a RocketMQ broker does to ``<store>/lock`` (Java's ``FileChannel.tryLock``: a
#: classic POSIX record lock on the whole file), in a child process that then waits.
_JAVA_LIKE_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    print("refused", flush=True)
    sys.exit(0)
print("locked", flush=True)
sys.stdin.read()
"""


def _java_like(lock_file: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _JAVA_LIKE_HOLDER, str(lock_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_store_a_rocketmq_broker_holds_is_refused_untouched(tmp_path: Path) -> None:
    # A RocketMQ broker's lock is invisible to flock: Rocklet used to recover the live
    # store (deleting its abort marker, rewriting its checkpoint) before failing on the
    # port.
    holder = _java_like(tmp_path / "lock")
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        (tmp_path / "abort").touch()
        before = sorted(p.name for p in tmp_path.iterdir())
        with pytest.raises(StoreInUseError) as refused:
            MessageStore.open(small(tmp_path))
        assert f"in use by pid {holder.pid} " in str(refused.value)
        with pytest.raises(StoreInUseError):
            StoreLock.acquire_shared(tmp_path, "rocklet store check")
        assert sorted(p.name for p in tmp_path.iterdir()) == before
    finally:
        holder.communicate("")
    with MessageStore.open(small(tmp_path)) as store:
        assert store.put_message(message(b"mine now")).ok
        # And the other way round: RocketMQ's tryLock fails while Rocklet runs.
        late = _java_like(tmp_path / "lock")
        assert late.communicate("")[0] == "refused\n"


def test_a_refused_second_open_in_the_same_process_keeps_the_record_lock(tmp_path: Path) -> None:
    # Closing any descriptor of a file drops a process's classic POSIX locks on it; the
    # open-file-description lock survives the refused open's close.
    with MessageStore.open(small(tmp_path)):
        with pytest.raises(StoreInUseError):
            MessageStore.open(small(tmp_path))
        late = _java_like(tmp_path / "lock")
        assert late.communicate("")[0] == "refused\n"
