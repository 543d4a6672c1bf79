"""ProcessQueue (seed 004): each operation, the commit-offset rule, thread safety."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.client.message import MessageExt
from rocklet.client.process_queue import ProcessQueue
from rocklet.transport.clock import ManualClock


def msgs(offsets: range | list[int], size: int = 10) -> list[MessageExt]:
    return [MessageExt("T", b"x" * size, {}, queue_offset=o) for o in offsets]


def test_put_counts_new_messages_and_asks_for_one_dispatch() -> None:
    pq: ProcessQueue[MessageExt] = ProcessQueue()
    assert pq.put(msgs(range(0, 4))) is True
    assert pq.consuming
    # Already consuming: no second dispatch; duplicates are not counted twice.
    assert pq.put(msgs(range(2, 6))) is False
    assert (pq.count, pq.size, pq.queue_offset_max) == (6, 60, 5)
    assert pq.put([]) is False


def test_put_records_lag_from_the_brokers_max_offset() -> None:
    pq: ProcessQueue[MessageExt] = ProcessQueue()
    pq.put(msgs(range(0, 10)), broker_max_offset=110)
    assert pq.msg_acc_cnt == 101
    # Java's formula counts maxOffset (the next index to write) minus the last offset.
    pq.put(msgs(range(10, 20)), broker_max_offset=20)
    assert pq.msg_acc_cnt == 1


def test_remove_returns_the_lowest_unfinished_offset() -> None:
    pq: ProcessQueue[MessageExt] = ProcessQueue()
    batch = msgs(range(10, 20))
    assert pq.remove(batch) == -1  # nothing cached yet
    pq.put(batch)
    # Finishing later messages first must not let the commit pass message 10.
    assert pq.remove(batch[5:]) == 10
    assert pq.remove(batch[1:5]) == 10
    assert pq.max_span() == 0
    assert pq.remove(batch[:1]) == 20  # empty: one past the highest ever cached
    assert (pq.count, pq.size) == (0, 0)


def test_max_span_is_distance_between_lowest_and_highest() -> None:
    pq: ProcessQueue[MessageExt] = ProcessQueue()
    assert pq.max_span() == 0
    batch = msgs(range(100, 3000))
    pq.put(batch)
    assert pq.max_span() == 2899
    pq.remove(batch[:-1])
    assert pq.max_span() == 0
    assert not pq.is_empty()


def test_take_commit_and_consume_again_for_orderly() -> None:
    pq: ProcessQueue[MessageExt] = ProcessQueue()
    assert pq.put(msgs(range(0, 5))) is True
    first = pq.take(3)
    assert [m.queue_offset for m in first] == [0, 1, 2]
    assert pq.count == 5  # taken messages are still cached until commit
    assert pq.snapshot(0).transaction_msg_count == 3
    pq.make_consume_again(first)  # SUSPEND: the same batch comes back first
    again = pq.take(3)
    assert [m.queue_offset for m in again] == [0, 1, 2]
    assert pq.commit() == 3
    assert (pq.count, pq.size) == (2, 20)
    assert pq.commit() == -1  # nothing taken
    assert [m.queue_offset for m in pq.take(10)] == [3, 4]
    assert pq.commit() == 5
    assert pq.consuming
    assert pq.take(10) == []
    assert not pq.consuming  # drained: the next put asks for a dispatch again
    assert pq.put(msgs([5])) is True


def test_expired_heads_only_reports_batches_in_the_listener_too_long() -> None:
    clock = ManualClock()
    pq: ProcessQueue[MessageExt] = ProcessQueue(clock=clock)
    batch = msgs(range(0, 4))
    pq.put(batch)
    assert pq.expired_heads(1000) == []  # not handed to the listener yet
    pq.mark_consume_start(batch[:2])
    clock.advance(1000)
    assert pq.expired_heads(1000) == []  # exactly at the limit is not expired
    clock.advance(1)
    heads = pq.expired_heads(1000)
    assert [m.queue_offset for m in heads] == [0]
    assert pq.remove_if_head(heads[0]) == 1  # message 1 is now the lowest cached
    assert pq.remove_if_head(heads[0]) == -1
    # The rest of the batch inherits its start time once it becomes the head.
    assert [m.queue_offset for m in pq.expired_heads(1000)] == [1]
    assert pq.remove(batch[1:2]) == 2
    assert pq.count == 2


def test_lock_and_pull_expiry_follow_the_clock() -> None:
    clock = ManualClock()
    pq: ProcessQueue[MessageExt] = ProcessQueue(
        clock=clock, lock_max_live_ms=30_000, pull_max_idle_ms=120_000
    )
    pq.set_locked(True)
    clock.advance(30_001)
    assert pq.is_lock_expired()
    pq.set_locked(True)
    assert not pq.is_lock_expired() and pq.locked
    pq.set_locked(False)
    assert not pq.locked
    clock.advance(120_001)
    assert pq.is_pull_expired()
    pq.touch_pull()
    assert not pq.is_pull_expired()


def test_snapshot_matches_running_info_fields() -> None:
    clock = ManualClock(5000)
    pq: ProcessQueue[MessageExt] = ProcessQueue(clock=clock)
    pq.put(msgs(range(7, 12), size=1024 * 1024))
    pq.take(2)
    pq.dropped = True
    info = pq.snapshot(commit_offset=7)
    assert info.commit_offset == 7
    assert (info.cached_msg_min_offset, info.cached_msg_max_offset) == (9, 11)
    assert (info.cached_msg_count, info.cached_msg_size_in_mib) == (3, 5)
    assert (info.transaction_msg_min_offset, info.transaction_msg_max_offset) == (7, 8)
    assert info.dropped and not info.locked
    assert info.last_pull_timestamp == 5000


def test_clear_forgets_everything() -> None:
    pq: ProcessQueue[MessageExt] = ProcessQueue()
    pq.put(msgs(range(0, 5)))
    pq.take(2)
    pq.clear()
    assert (pq.count, pq.size, pq.queue_offset_max, pq.max_span()) == (0, 0, 0, 0)
    assert pq.commit() == -1


def test_concurrent_removes_from_threads_keep_counts_exact() -> None:
    pq: ProcessQueue[MessageExt] = ProcessQueue()
    threads, per_thread, batch = 8, 2000, 16
    everything = msgs(range(threads * per_thread), size=3)
    pq.put(everything)
    barrier = threading.Barrier(threads)
    results: list[list[int]] = [[] for _ in range(threads)]

    def worker(index: int) -> None:
        # Interleaved slices: thread i owns offsets i, i+threads, ... so removals race
        # on neighbouring keys of the same tree.
        mine = everything[index::threads]
        barrier.wait()
        for start in range(0, len(mine), batch):
            results[index].append(pq.remove(mine[start : start + batch]))

    with ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(worker, i) for i in range(threads)]:
            future.result()
    assert (pq.count, pq.size, pq.max_span()) == (0, 0, 0)
    # Whoever removed last saw an empty tree: the commit offset covers everything.
    assert max(max(r) for r in results) == threads * per_thread
    for r in results:
        assert all(0 <= offset <= threads * per_thread for offset in r)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_remove_matches_a_model_under_random_order(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 60))
    order = data.draw(st.permutations(range(n)))
    chunk = data.draw(st.integers(1, 5))
    pq: ProcessQueue[MessageExt] = ProcessQueue()
    batch = msgs(range(n))
    pq.put(batch)
    remaining = set(range(n))
    for start in range(0, n, chunk):
        done = [batch[i] for i in order[start : start + chunk]]
        remaining -= {m.queue_offset for m in done}
        expected = min(remaining) if remaining else n
        assert pq.remove(done) == expected
        assert pq.count == len(remaining)
