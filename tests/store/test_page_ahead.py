"""Page cache ahead of the writer: commitlog page-ahead, and no read-around for queues.

Residency is read from the kernel with ``mincore`` over a separate map of the file, so
these tests see what the writer's next fault would find, not what the code thinks.
"""

from __future__ import annotations

import ctypes
import itertools
import mmap
import os
import queue
import sys
from pathlib import Path

import pytest

from rocklet.broker.config import BrokerConfig, ConfigError
from rocklet.store._consume_queue import ConsumeQueue
from rocklet.store._mapped_file import _LOAD_STEP, MappedFile, MappedFileQueue
from rocklet.store._page_ahead import PageAhead
from rocklet.store.message_store import MessageStore
from tests.store.helpers import message, read_all, small_config

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="mincore and fadvise: Linux")

MIB = 1024 * 1024
PAGE = mmap.PAGESIZE


def resident_pages(path: Path, start: int, length: int) -> int:
    """Pages of ``path``'s ``[start, start+length)`` in the page cache (``mincore``)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, start)
        assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        try:
            pages = (length + PAGE - 1) // PAGE
            vec = (ctypes.c_ubyte * pages)()
            assert libc.mincore(addr, length, vec) == 0, os.strerror(ctypes.get_errno())
            return sum(b & 1 for b in vec)
        finally:
            libc.munmap(addr, length)
    finally:
        os.close(fd)


def fresh_queue(directory: Path, file_size: int) -> MappedFileQueue:
    """A queue with one new file holding one page, the rest not cached yet.

    The page is written with ``pwrite`` (an append of a page or more): a store into
    the map would fault and read around, caching the next pages itself.
    """
    files = MappedFileQueue(directory, file_size)
    mf = files.create_file(0)
    mf.append(b"x" * PAGE)
    if resident_pages(mf.path, PAGE, file_size - PAGE):
        pytest.skip("this file system caches the pages of a new file (tmpfs?)")
    return files


def rounds_of(ahead: PageAhead) -> queue.Queue[int]:
    """A queue told ``loaded_to`` after each round the page-ahead thread runs."""
    done: queue.Queue[int] = queue.Queue()
    run_once = ahead.run_once

    def counted() -> int:
        asked = run_once()
        done.put(ahead.loaded_to)
        return asked

    ahead.run_once = counted  # type: ignore[method-assign]
    return done


def test_one_round_loads_the_window_and_no_more(tmp_path: Path) -> None:
    """The window past the write position is cached; the pages past it are not."""
    files = fresh_queue(tmp_path, 32 * MIB)
    ahead = PageAhead(files, 8 * MIB)
    assert ahead.run_once() == 8 * MIB  # from the write position on
    path = files.files[0].path
    assert resident_pages(path, 0, PAGE + 8 * MIB) == 1 + 8 * MIB // PAGE
    assert resident_pages(path, PAGE + 8 * MIB, 8 * MIB) == 0
    assert ahead.loaded_to == PAGE + 8 * MIB
    assert ahead.due == PAGE + 4 * MIB  # half the window: the writer wakes the thread there
    assert ahead.run_once() == 0  # nothing new written: nothing asked again


def test_the_window_stops_at_the_segment_end_and_the_roll_wakes_it(tmp_path: Path) -> None:
    """Near a segment's end only the segment's rest is asked for; the next one on the roll."""
    files = fresh_queue(tmp_path, 4 * MIB)
    ahead = PageAhead(files, 16 * MIB)
    ahead.run_once()
    assert ahead.loaded_to == 4 * MIB
    assert ahead.due == 4 * MIB  # the next segment's first byte
    files.files[0].append(b"y" * (4 * MIB - PAGE))
    nxt = files.create_file(4 * MIB)
    nxt.append(b"z" * PAGE)
    assert nxt.wrote_offset >= ahead.due
    assert resident_pages(nxt.path, PAGE, 4 * MIB - PAGE) == 0
    assert ahead.run_once() == 4 * MIB - PAGE
    assert resident_pages(nxt.path, 0, 4 * MIB) == 4 * MIB // PAGE


def test_writes_wake_the_thread_and_bytes_are_unchanged(tmp_path: Path) -> None:
    """Puts that cross half the window wake the thread; it never changes a stored byte."""
    cfg = small_config(
        tmp_path, commitlog_file_size_bytes=64 * MIB, commitlog_page_ahead_bytes=2 * MIB
    )
    with MessageStore.open(cfg) as store:
        ahead = store.commitlog.page_ahead
        rounds = rounds_of(ahead)
        store.put_message(message(0, size=1000))
        first = rounds.get(timeout=10)  # the first put found the window unloaded
        n = 1
        while store.commitlog_max_offset() < first:  # past half the window: a wake-up
            store.put_message(message(n, size=1000))
            n += 1
        loaded = rounds.get(timeout=10)  # woken by the put that used half the window
        assert loaded > first
        end = store.commitlog_max_offset()
        path = store.commitlog.files.files[0].path
        start = end - end % PAGE + PAGE
        assert resident_pages(path, start, loaded - start - PAGE) > 0
        stored = read_all(store, "T", 0)
        assert [m.body for m in stored] == [message(i, size=1000).body for i in range(n)]


def test_pwrite_appends_do_not_wake_it(tmp_path: Path) -> None:
    """Appends of a page or more use pwrite, which never reads around: nothing to do.

    (Reading ahead for them would make the kernel fill each page twice.)
    """
    cfg = small_config(
        tmp_path, commitlog_file_size_bytes=64 * MIB, commitlog_page_ahead_bytes=2 * MIB
    )
    with MessageStore.open(cfg) as store:
        ahead = store.commitlog.page_ahead
        for n in range(3):
            store.put_message(message(n, size=5000))
        assert ahead.due == 0  # poke() would have set it to "never" at once
        store.put_message(message(3, size=1000))
        assert ahead.due != 0


def test_page_ahead_off_starts_no_thread(tmp_path: Path) -> None:
    """A window of 0 turns it off: no thread, no wake-ups."""
    files = fresh_queue(tmp_path, 4 * MIB)
    ahead = PageAhead(files, 0)
    ahead.start()
    assert ahead.due == sys.maxsize
    assert ahead.run_once() == 0
    assert resident_pages(files.files[0].path, 2 * MIB, 2 * MIB) == 0
    ahead.stop()


def test_load_ahead_asks_in_steps_that_tile_the_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window is asked for in short calls, so no one call holds a vCPU for long.

    The calls are recorded on their way to the real ``posix_fadvise``: they must
    cover the range exactly, none longer than the step, and leave it cached.
    """
    calls: list[tuple[int, int]] = []
    real = os.posix_fadvise

    def recording(fd: int, offset: int, length: int, advice: int) -> None:
        calls.append((offset, length))
        real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", recording)
    mf = MappedFile(tmp_path / "f", 8 * MIB, 0)
    start, length = PAGE, 3 * MIB + 5 * PAGE  # not a multiple of the step
    mf.load_ahead(start, length)
    assert len(calls) > 1
    assert all(0 < n <= _LOAD_STEP for _, n in calls)
    assert calls[0][0] == start
    assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(calls))
    assert calls[-1][0] + calls[-1][1] == start + length
    assert resident_pages(mf.path, start, length) == length // PAGE
    assert mf.try_close()


def test_load_ahead_of_a_closed_file_does_nothing(tmp_path: Path) -> None:
    """A segment retention closed meanwhile is skipped (its descriptor is not used)."""
    mf = MappedFile(tmp_path / "f", 4 * MIB, 0)
    assert mf.try_close()
    mf.load_ahead(0, 4 * MIB)  # no EBADF, no other file's descriptor


def test_a_consume_queue_write_maps_its_page_without_read_around(tmp_path: Path) -> None:
    """The first entry of a fresh consume-queue file caches a page, not a read-ahead window.

    With read-around the fault would fill the device's read-ahead window (up to the
    whole 6 MB file) on the writer's thread.
    """
    cq = ConsumeQueue("T", 0, tmp_path / "0", 300_000)
    cq.put(0, 1024, 0, 0)  # offset 0 of the queue: the file's first entry
    path = cq.files.files[0].path
    assert resident_pages(path, 0, 300_000 * 20) <= 2
    cq.close()


def test_the_broker_key_sets_the_window_and_out_of_range_is_refused(tmp_path: Path) -> None:
    """``commitLogPageAheadBytes`` reaches the store; a negative or huge one is an error."""
    props = {"storePathRootDir": str(tmp_path), "commitLogPageAheadBytes": "0"}
    assert BrokerConfig.from_properties(props).store_config().commitlog_page_ahead_bytes == 0
    assert BrokerConfig.from_properties({}).store_config().commitlog_page_ahead_bytes == 16 * MIB
    for bad in ("-1", str(2 << 30)):
        with pytest.raises(ConfigError, match="commitlog_page_ahead_bytes"):
            BrokerConfig.from_properties({**props, "commitLogPageAheadBytes": bad}).store_config()
