"""Puts, reads by queue, statuses, rolling, batches, keys, time look-ups."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from rocklet.protocol.message import SysFlag, decode_message, java_string_hash
from rocklet.store.message_store import MessageStore
from rocklet.store.results import GetMessageStatus, MessageToStore, PutMessageStatus
from rocklet.transport.clock import ManualClock
from tests.store.helpers import decoded, message, read_all, small_config
from tests.store.layout_checker import check_store


class Arrivals:
    """Records listener calls: each message's, and the runs the store reported."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, int, int]] = []
        self.runs: list[tuple[str, int, int, list[int]]] = []

    def arriving(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int, store_timestamp: int
    ) -> None:
        self.calls.append((topic, queue_id, max_offset, tags_code, store_timestamp))

    def arrived(
        self, topic: str, queue_id: int, first_offset: int, tags_codes: Sequence[int],
        store_timestamp: int,
    ) -> None:  # fmt: skip
        self.runs.append((topic, queue_id, first_offset, list(tags_codes)))
        for n, code in enumerate(tags_codes, first_offset + 1):
            self.arriving(topic, queue_id, n, code, store_timestamp)


def _check(path: Path) -> None:
    assert check_store(path, 16 * 1024, 16, 32, 40).errors == []


def test_put_then_read_immediately_and_listener(tmp_path: Path) -> None:
    """A put is readable at once and the listener hears the new max offset."""
    clock = ManualClock(1_700_000_000_000)
    arrivals = Arrivals()
    with MessageStore.open(small_config(tmp_path), listener=arrivals, clock=clock) as store:
        res = store.put_message(message(0, queue_id=2))
        assert res.status is PutMessageStatus.PUT_OK and res.queue_offset == 0
        assert res.store_timestamp == clock.now_ms() and res.durable is None
        got = store.get_messages("T", 2, 0, 10)
        assert got.status is GetMessageStatus.FOUND and got.next_begin_offset == 1
        msg = decode_message(got.buffers[0])
        assert msg.physical_offset == res.wrote_offset and msg.store_timestamp == clock.now_ms()
        assert arrivals.calls == [("T", 2, 1, java_string_hash("even"), clock.now_ms())]
    _check(tmp_path)


def test_rolls_segments_with_blank_and_queue_files(tmp_path: Path) -> None:
    """Many records roll commitlog segments and consume-queue files; all stay readable."""
    with MessageStore.open(small_config(tmp_path)) as store:
        for n in range(300):
            assert store.put_message(message(n, queue_id=n % 2, size=100 + n)).ok
        assert len(list((tmp_path / "commitlog").iterdir())) > 3
        seen = []
        offset = 0
        while True:
            got = store.get_messages("T", 1, offset, 7)
            if got.status is not GetMessageStatus.FOUND:
                assert got.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
                break
            seen += [int(m.properties["seq"]) for m in decoded(got.buffers)]
            offset = got.next_begin_offset
        assert seen == list(range(1, 300, 2))
    _check(tmp_path)


def test_statuses_and_next_begin_offsets(tmp_path: Path) -> None:
    """Empty, overflow by one, overflow badly, and unknown queue follow getMessage."""
    with MessageStore.open(small_config(tmp_path)) as store:
        assert store.get_messages("X", 0, 0, 1).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        for n in range(3):
            store.put_message(message(n))
        one = store.get_messages("T", 0, 3, 1)
        assert (one.status, one.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_ONE, 3)
        bad = store.get_messages("T", 0, 9, 1)
        assert bad.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
        assert (bad.min_offset, bad.max_offset) == (0, 3)


def test_tag_filter_counts_scanned_entries(tmp_path: Path) -> None:
    """Filtered-out entries advance next_begin_offset; no match gives NO_MATCHED_MESSAGE."""
    with MessageStore.open(small_config(tmp_path)) as store:
        for n in range(6):
            store.put_message(message(n))
        odd = {java_string_hash("odd")}
        got = store.get_messages("T", 0, 0, 2, tag_codes=odd)
        assert [m.properties["seq"] for m in decoded(got.buffers)] == ["1", "3"]
        assert got.queue_offsets == [1, 3] and got.next_begin_offset == 4
        none = store.get_messages("T", 0, 0, 5, tag_codes={12345})
        assert none.status is GetMessageStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 6


def test_max_bytes_limits_but_first_always_fits(tmp_path: Path) -> None:
    """max_bytes caps a read after the first record."""
    with MessageStore.open(small_config(tmp_path)) as store:
        for n in range(4):
            store.put_message(message(n, size=500))
        assert len(store.get_messages("T", 0, 0, 10, max_bytes=10).buffers) == 1
        assert len(store.get_messages("T", 0, 0, 10, max_bytes=1300).buffers) == 2


def test_refusals_are_statuses(tmp_path: Path) -> None:
    """Oversized bodies and properties are refused with a status, not an exception."""
    with MessageStore.open(small_config(tmp_path)) as store:
        big = MessageToStore("T", 0, b"x" * (8 * 1024 + 1))
        assert store.put_message(big).status is PutMessageStatus.MESSAGE_ILLEGAL
        props = MessageToStore("T", 0, b"x", {"p": "v" * 40000})
        assert store.put_message(props).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        assert store.put_message(MessageToStore("t" * 200, 0, b"x")).status is (
            PutMessageStatus.MESSAGE_ILLEGAL
        )
        assert store.max_offset("T", 0) == 0


def test_batch_is_contiguous_with_consecutive_offsets(tmp_path: Path) -> None:
    """A batch is one append with consecutive queue offsets, each record indexed, and
    one arrival run for the listener."""
    arrivals = Arrivals()
    with MessageStore.open(small_config(tmp_path), listener=arrivals) as store:
        store.put_message(message(100))
        res = store.put_messages([message(n) for n in range(5)])
        even, odd = java_string_hash("even"), java_string_hash("odd")
        assert arrivals.runs == [("T", 0, 0, [even]), ("T", 0, 1, [even, odd] * 2 + [even])]
        assert res.ok and res.queue_offset == 1 and res.msg_count == 5
        assert res.record_offsets[0] == res.wrote_offset
        got = store.get_messages("T", 0, 1, 10)
        msgs = decoded(got.buffers)
        assert [m.queue_offset for m in msgs] == [1, 2, 3, 4, 5]
        assert [m.physical_offset for m in msgs] == list(res.record_offsets)
        assert sum(m.size for m in msgs) == res.wrote_bytes
        mixed = [message(1), message(2, queue_id=1)]
        assert store.put_messages(mixed).status is PutMessageStatus.MESSAGE_ILLEGAL
    _check(tmp_path)


def test_transaction_half_and_rollback_not_in_queue(tmp_path: Path) -> None:
    """PREPARED and ROLLBACK records stay out of consume queues; rollback is not indexed."""
    with MessageStore.open(small_config(tmp_path)) as store:
        half = message(1)
        half.sys_flag = SysFlag.TRANSACTION_PREPARED
        rolled = message(2)
        rolled.sys_flag = SysFlag.TRANSACTION_ROLLBACK
        assert store.put_message(half).queue_offset == 0
        assert store.put_message(rolled).ok
        assert store.max_offset("T", 0) == 0
        assert store.query_by_key("T", "k-1", 5)
        assert store.query_by_key("T", "k-2", 5) == []
        assert store.read_record(store.put_message(message(3)).wrote_offset) is not None


def test_query_by_key_compares_real_key_and_time(tmp_path: Path) -> None:
    """Keys across index files, by UNIQ_KEY, and limited by time."""
    clock = ManualClock(1_700_000_000_000)
    with MessageStore.open(small_config(tmp_path), clock=clock) as store:
        for n in range(60):  # 3 keys each: rolls the 40-entry index files
            store.put_message(message(n))
            clock.advance(1000)
        assert len(list((tmp_path / "index").iterdir())) > 3
        assert len(store.query_by_key("T", "group-1", 100)) == 20
        assert len(store.query_by_key("T", "group-1", 3)) == 3
        (view,) = store.query_by_key("T", "U00000042", 5)
        assert decode_message(view).properties["seq"] == "42"
        start = 1_700_000_000_000
        recent = store.query_by_key("T", "group-0", 100, start + 30_000, start + 60_000)
        assert sorted(int(decode_message(v).properties["seq"]) for v in recent) == list(
            range(30, 60, 3)
        )
        assert store.query_by_key("Other", "k-1", 5) == []
    _check(tmp_path)


def test_offset_for_time_and_earliest(tmp_path: Path) -> None:
    """Binary search by store time; earliest store time of a queue."""
    clock = ManualClock(1_000_000)
    with MessageStore.open(small_config(tmp_path), clock=clock) as store:
        for n in range(10):
            store.put_message(message(n))
            clock.advance(100)
        assert store.offset_for_time("T", 0, 1_000_450) == 5
        assert store.offset_for_time("T", 0, 0) == 0
        assert store.offset_for_time("T", 0, 9_999_999) == 10
        assert store.earliest_store_time("T", 0) == 1_000_000
        assert store.earliest_store_time("none", 0) == -1


def test_concurrent_puts_keep_queue_offsets_dense(tmp_path: Path) -> None:
    """Puts from several threads produce offsets 0..n-1 without gaps."""
    with MessageStore.open(small_config(tmp_path)) as store:

        def work(base: int) -> None:
            for n in range(base, base + 25):
                assert store.put_message(message(n)).ok

        threads = [threading.Thread(target=work, args=(i * 100,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [m.queue_offset for m in read_all(store, "T", 0)] == list(range(100))
    _check(tmp_path)


def test_close_is_idempotent_and_refuses_puts(tmp_path: Path) -> None:
    """close() twice is fine; a closed store refuses puts; the abort marker is gone."""
    store = MessageStore.open(small_config(tmp_path))
    assert (tmp_path / "abort").exists()
    store.close()
    store.close()
    assert not (tmp_path / "abort").exists()
    assert store.put_message(message(1)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_fast_java_hash_matches_reference() -> None:
    """The index's hash loop equals the protocol's UTF-16 reference, non-BMP included."""
    from rocklet.store._index_service import fast_java_hash

    for text in ("", "T#k-1", "GoldenTopic#ключ", "x#\U0001f600y", "a" * 50):
        assert fast_java_hash(text) == java_string_hash(text)


def test_large_reads_match_single_reads_across_segments(tmp_path: Path) -> None:
    """Reads spanning several segments return what one-record reads return."""
    with MessageStore.open(small_config(tmp_path)) as store:
        for n in range(120):
            assert store.put_message(message(n, queue_id=n % 3, size=150 + n)).ok
        singles = [bytes(store.get_messages("T", 1, i, 1).buffers[0]) for i in range(40)]
        got: list[bytes] = []
        offset = 0
        while offset < 40:  # a read ends with its consume-queue file (16 entries here)
            res = store.get_messages("T", 1, offset, 1000, max_bytes=1 << 30)
            assert res.queue_offsets == list(range(offset, min(40, offset + 16 - offset % 16)))
            got += [bytes(b) for b in res.buffers]
            offset = res.next_begin_offset
        assert got == singles
        capped = store.get_messages("T", 1, 5, 1000, max_bytes=len(singles[5]) + len(singles[6]))
        assert capped.queue_offsets == [5, 6] and capped.next_begin_offset == 7
    _check(tmp_path)
