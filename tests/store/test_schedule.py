"""Delayed messages: rewritten at put, delivered by DelayDeliveryService when due."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from rocklet.protocol.message import decode_message
from rocklet.protocol.names import SCHEDULE_TOPIC
from rocklet.store.message_store import MessageStore
from rocklet.store.schedule import DelayDeliveryService, read_delay_offsets
from rocklet.transport.clock import ManualClock
from tests.store.helpers import message, read_all, small_config
from tests.store.layout_checker import check_store


def test_delay_rewrite_and_delivery(tmp_path: Path) -> None:
    """DELAY=2 waits 5 s in schedule queue 1, then lands in its real queue once."""
    clock = ManualClock(1_700_000_000_000)
    with MessageStore.open(small_config(tmp_path), clock=clock) as store:
        m = message(1, queue_id=3)
        m.properties["DELAY"] = "2"
        m.reconsume_times = 2
        res = store.put_message(m)
        assert res.ok and store.max_offset("T", 3) == 0
        assert store.max_offset(SCHEDULE_TOPIC, 1) == 1
        entry = store.queues[(SCHEDULE_TOPIC, 1)].entry(0)
        assert entry is not None and entry[2] == res.store_timestamp + 5000
        service = DelayDeliveryService(store)
        assert service.run_once(clock.now_ms() + 4999) == 0
        assert service.run_once(clock.now_ms() + 5000) == 1
        assert service.run_once(clock.now_ms() + 9000) == 0
        (delivered,) = read_all(store, "T", 3)
        assert delivered.reconsume_times == 2 and delivered.properties["seq"] == "1"
        # Stored as RocketMQ 4.9.4 stores it: the delay's properties stay, and are not
        # taken as a new delay.
        props = delivered.properties
        assert (props["DELAY"], props["REAL_TOPIC"], props["REAL_QID"]) == ("2", "T", "3")
        assert store.max_offset(SCHEDULE_TOPIC, 1) == 1 and store.max_offset("T", 3) == 1
        assert decode_message(store.query_by_key("T", "k-1", 5)[0]).topic in ("T", SCHEDULE_TOPIC)
    saved = json.loads((tmp_path / "config" / "delayOffset.json").read_text())
    assert saved == {"offsetTable": {"2": 1}}
    assert check_store(tmp_path, 16 * 1024, 16, 32, 40).errors == []


def test_reads_fastjson_offsets(tmp_path: Path) -> None:
    """delayOffset.json with unquoted integer keys (RocketMQ's form) is read."""
    path = tmp_path / "delayOffset.json"
    path.write_text('{\n\t"offsetTable":{1:1,3:7\n\t}\n}')
    assert read_delay_offsets(path) == {1: 1, 3: 7}


def test_delay_offsets_reach_the_disk_after_the_delivered_copies(tmp_path: Path) -> None:
    """delayOffset.json never runs ahead of the commitlog on disk, even in ASYNC_FLUSH.

    Otherwise a machine crash could keep the advanced offset but lose the copies, and
    those delayed messages would never be delivered.
    """
    clock = ManualClock(1_700_000_000_000)
    cfg = small_config(
        tmp_path, flush_interval_ms=60_000, flush_least_pages=1000, flush_thorough_interval_ms=10**6
    )
    with MessageStore.open(cfg, clock=clock) as store:
        m = message(1, queue_id=0)
        m.properties["DELAY"] = "1"
        store.put_message(m)
        service = DelayDeliveryService(store)
        assert service.run_once(clock.now_ms() + 1000) == 1
        path = tmp_path / "config" / "delayOffset.json"
        assert read_delay_offsets(path) == {1: 1}
        # The copy was synced before the file was written.
        assert store.flush_service.flushed_offset == store.commitlog_max_offset()
        # A second delivery within persist_interval_ms is not written yet ...
        m2 = message(2, queue_id=0)
        m2.properties["DELAY"] = "1"
        store.put_message(m2)
        assert service.run_once(clock.now_ms() + 1500) == 1
        assert read_delay_offsets(path) == {1: 1}
        # ... but at the next round past the interval, or at stop.
        assert service.run_once(clock.now_ms() + 2001) == 0
        assert read_delay_offsets(path) == {1: 2}


def test_delay_offsets_fall_back_to_the_backup(tmp_path: Path) -> None:
    """A crash between replace_file's two renames leaves only the .bak: it is read."""
    path = tmp_path / "delayOffset.json"
    path.with_name("delayOffset.json.bak").write_text('{"offsetTable":{"3":7}}')
    assert read_delay_offsets(path) == {3: 7}


def test_reading_while_the_service_persists_never_fails(tmp_path: Path) -> None:
    """A reader (GET_BROKER_RUNTIME_INFO) racing persist(): no file is just "no offsets".

    persist() renames the file to .bak, then the new one into place; a read between
    the two used to find no file after ``exists()`` said there was one (found by the
    fuzzer, tests/fuzzing.py). Each read sees the whole table or, in that gap, none.
    """
    with MessageStore.open(small_config(tmp_path)) as store:
        service = DelayDeliveryService(store)
        service.offsets = {1: 5, 2: 7}
        done = threading.Event()

        def persist_many() -> None:
            for _ in range(200):
                service.persist()
            done.set()

        writer = threading.Thread(target=persist_many)
        writer.start()
        seen = set()
        while not done.is_set():
            seen.add(tuple(sorted(read_delay_offsets(service.path).items())))
        writer.join()
    assert seen <= {(), ((1, 5), (2, 7))}


def test_a_round_has_work_only_while_something_waits(tmp_path: Path) -> None:
    """has_work: messages past a level's offset (due or not), or offsets not yet written.

    The broker skips the round (and its worker thread) whenever it is False, so it must
    never be False while a delayed message waits or delivered offsets are unwritten.
    """
    clock = ManualClock(1_700_000_000_000)
    with MessageStore.open(small_config(tmp_path), clock=clock) as store:
        service = DelayDeliveryService(store, persist_interval_ms=1000)
        assert not service.has_work()  # no schedule queue at all
        first = message(1, queue_id=0)
        first.properties["DELAY"] = "2"  # level 2: 5 s
        store.put_message(first)
        assert service.has_work()
        assert service.run_once(clock.now_ms() + 4999) == 0
        assert service.has_work()  # not due yet, still waiting
        assert service.run_once(clock.now_ms() + 5000) == 1
        assert not service.has_work()  # delivered, and the first write is at once
        second = message(2, queue_id=0)
        second.properties["DELAY"] = "2"
        store.put_message(second)
        assert service.run_once(clock.now_ms() + 5500) == 1
        assert service.has_work()  # delivered within the interval: its offset unwritten
        assert read_delay_offsets(tmp_path / "config" / "delayOffset.json") == {2: 1}
        assert service.run_once(clock.now_ms() + 6001) == 0
        assert read_delay_offsets(tmp_path / "config" / "delayOffset.json") == {2: 2}
        assert not service.has_work()
