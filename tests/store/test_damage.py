"""Damaged stores: recovery skips damaged records instead of truncating the log after them.

Each test damages real files of a store it wrote (or of a copy of RocketMQ's golden
store), opens it again, and checks what the report says and what is served. The
independent layout checker confirms the files afterwards.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from rocklet.protocol.message import decode_message, java_string_hash
from rocklet.store.config import StoreConfig
from rocklet.store.directory import StoreDamagedError
from rocklet.store.message_store import MessageStore
from rocklet.store.results import GetMessageStatus, PutResult
from tests.conftest import GOLDEN_STORE
from tests.store.helpers import GOLDEN_SIZES, copy_golden, message, small_config
from tests.store.layout_checker import check_store

SEG = 16 * 1024


def _fill(root: Path, count: int) -> list[PutResult]:
    with MessageStore.open(small_config(root)) as store:
        return [store.put_message(message(n, queue_id=n % 2, size=150)) for n in range(count)]


def _seqs(store: MessageStore, topic: str = "T") -> set[int]:
    """Every message served by queue, read as a consumer does: past blank-only runs."""
    seqs: set[int] = set()
    for q in (0, 1):
        offset = 0
        while offset < store.max_offset(topic, q):
            got = store.get_messages(topic, q, offset, 1000, max_bytes=1 << 30)
            assert got.status in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE)
            seqs.update(int(m.properties["seq"]) for m in map(decode_message, got.buffers))
            offset = got.next_begin_offset
    return seqs


def _only_damage_errors(errors: list[str], offset: int) -> None:
    """The layout oracle's errors: the damaged record, and index entries naming it."""
    assert errors and all(str(offset) in e for e in errors), errors


def _overwrite(root: Path, offset: int, data: bytes) -> None:
    with open(root / "commitlog" / f"{offset - offset % SEG:020d}", "r+b") as f:
        f.seek(offset % SEG)
        f.write(data)


def _segments(root: Path) -> list[Path]:
    return sorted((root / "commitlog").iterdir())


def _crash(root: Path) -> None:
    """What kill -9 leaves, with a checkpoint that sends the scan to the first segment."""
    (root / "abort").touch()
    (root / "checkpoint").write_bytes(bytes(4096))


@pytest.mark.parametrize("crashed", [False, True])
def test_damaged_header_in_the_oldest_segment_is_skipped_not_truncated(
    tmp_path: Path, crashed: bool
) -> None:
    # RocketMQ (and Rocklet before) stopped the scan at the bad record and deleted
    # every segment after it: 3 segments of acknowledged messages for 8 bad bytes.
    puts = _fill(tmp_path, 120)
    assert len(_segments(tmp_path)) == 3
    end = puts[-1].wrote_offset + puts[-1].wrote_bytes
    _overwrite(tmp_path, puts[3].wrote_offset, b"\xff" * 8)
    if crashed:
        _crash(tmp_path)
    with capture_logs() as logs, MessageStore.open(small_config(tmp_path)) as store:
        rep = store.recovery_report
        assert rep.truncated_bytes == 0 and rep.commitlog_max_offset == end
        assert [(r.offset, r.length) for r in rep.damaged] == [
            (puts[3].wrote_offset, puts[3].wrote_bytes)
        ]
        assert "bad magic" in rep.damaged[0].reason
        assert _seqs(store) == set(range(120)) - {3}
        # Its queue keeps its offsets: the entry is a blank, the next one is served.
        assert rep.consume_queue_entries_blanked == 1
        got = store.get_messages("T", 1, 1, 2)
        assert [int(m.properties["seq"]) for m in map(decode_message, got.buffers)] == [5, 7]
        new = [store.put_message(message(1000 + n, queue_id=n % 2)) for n in range(50)]
        assert all(r.ok for r in new)
    warned = [e for e in logs if e["event"] == "damaged commitlog bytes skipped"]
    assert warned and warned[0]["offset"] == puts[3].wrote_offset
    with MessageStore.open(small_config(tmp_path)) as store:
        assert _seqs(store) == (set(range(120)) - {3}) | set(range(1000, 1050))
        assert [r.offset for r in store.recovery_report.damaged] == [puts[3].wrote_offset]
    errors = check_store(tmp_path, SEG, 16, 32, 40).errors
    assert f"{_segments(tmp_path)[0].name}@{puts[3].wrote_offset}: bad magic 0xffffffff" in errors
    _only_damage_errors(errors, puts[3].wrote_offset)


def test_body_crc_damage_in_a_sealed_segment_is_never_served(tmp_path: Path) -> None:
    puts = _fill(tmp_path, 120)
    victim = puts[40]
    _overwrite(tmp_path, victim.wrote_offset + 100, b"\x00\x01\x02")  # inside the body
    with MessageStore.open(small_config(tmp_path)) as store:
        rep = store.recovery_report
        assert [(r.offset, r.length, r.reason) for r in rep.damaged] == [
            (victim.wrote_offset, victim.wrote_bytes, "body CRC mismatch")
        ]
        assert _seqs(store) == set(range(120)) - {40}
        assert store.read_record(victim.wrote_offset) is not None  # the bytes are kept
        assert store.query_by_key("T", "k-40", 5) != []  # ...and found by key, as stored


def test_damage_in_the_last_segment_keeps_the_records_after_it(tmp_path: Path) -> None:
    puts = _fill(tmp_path, 120)
    last_seg = int(_segments(tmp_path)[-1].name)
    in_last = [p for p in puts if p.wrote_offset >= last_seg]
    victim = in_last[2]
    _overwrite(tmp_path, victim.wrote_offset, os.urandom(40))
    _crash(tmp_path)
    with MessageStore.open(small_config(tmp_path)) as store:
        rep = store.recovery_report
        assert rep.truncated_bytes == 0
        assert [r.offset for r in rep.damaged] == [victim.wrote_offset]
        assert _seqs(store) == set(range(120)) - {puts.index(victim)}


def test_a_torn_tail_is_still_cut_off(tmp_path: Path) -> None:
    # Nothing whole follows the bad record in the last segment: a torn write.
    puts = _fill(tmp_path, 60)
    last = puts[-1]
    _overwrite(tmp_path, last.wrote_offset + 30, bytes(last.wrote_bytes - 30))
    _crash(tmp_path)
    with MessageStore.open(small_config(tmp_path)) as store:
        rep = store.recovery_report
        assert rep.damaged == () and rep.commitlog_max_offset == last.wrote_offset
        assert 0 < rep.truncated_bytes <= 30  # to the last non-zero byte
        assert _seqs(store) == set(range(59))


def test_a_zeroed_page_inside_a_sealed_segment_is_skipped(tmp_path: Path) -> None:
    # A page a power cut never wrote: zeros where records were, whole records after.
    puts = _fill(tmp_path, 120)
    start = puts[20].wrote_offset
    _overwrite(tmp_path, start, bytes(4096))
    lost = {n for n, p in enumerate(puts) if start <= p.wrote_offset < start + 4096}
    with MessageStore.open(small_config(tmp_path)) as store:
        rep = store.recovery_report
        (damage,) = rep.damaged
        assert damage.offset == start and damage.end == puts[max(lost) + 1].wrote_offset
        assert damage.reason == "zeros where a record or the end-of-segment blank should be"
        assert _seqs(store) == set(range(120)) - lost


def test_damage_just_before_a_segment_end_resyncs_on_the_blank(tmp_path: Path) -> None:
    puts = _fill(tmp_path, 120)
    second = int(_segments(tmp_path)[1].name)
    victim = max((p for p in puts if p.wrote_offset < second), key=lambda p: p.wrote_offset)
    _overwrite(tmp_path, victim.wrote_offset + 4, b"\x00\x00\x00\x01")  # the magic
    with MessageStore.open(small_config(tmp_path)) as store:
        (damage,) = store.recovery_report.damaged
        assert (damage.offset, damage.length) == (victim.wrote_offset, victim.wrote_bytes)
        assert _seqs(store) == set(range(120)) - {puts.index(victim)}


def test_damage_outside_the_scanned_segments_is_never_served(tmp_path: Path) -> None:
    # After a clean stop only the last 3 segments are scanned, so recovery does not see
    # damage in the first of 5; reads check records there and skip it.
    puts = _fill(tmp_path, 200)
    assert len(_segments(tmp_path)) == 4
    _overwrite(tmp_path, puts[3].wrote_offset, b"\xff" * 8)
    with capture_logs() as logs, MessageStore.open(small_config(tmp_path)) as store:
        assert store.recovery_report.damaged == ()
        assert _seqs(store) == set(range(200)) - {3}
        got = store.get_messages("T", 1, 0, 32)  # the run with the damaged record
        # The first consume-queue file holds entries 0-15; its entry 1 is the damaged one.
        assert got.queue_offsets == [0, *range(2, 16)] and got.next_begin_offset == 16
        assert [decode_message(v).queue_offset for v in got.buffers] == got.queue_offsets
    skipped = [e for e in logs if e["event"] == "damaged record skipped by a read"]
    assert {(e["queue"], e["queue_offset"]) for e in skipped} == {(1, 1)}


def test_rebuilding_a_queue_over_old_damage_resyncs_there(tmp_path: Path) -> None:
    # Consume queues lost after a clean stop: the re-dispatch reads every segment and
    # meets the damage the scan of the last 3 did not; it is skipped and reported.
    puts = _fill(tmp_path, 200)
    _overwrite(tmp_path, puts[3].wrote_offset, b"\xff" * 8)
    shutil.rmtree(tmp_path / "consumequeue")
    with MessageStore.open(small_config(tmp_path)) as store:
        rep = store.recovery_report
        assert [r.offset for r in rep.damaged] == [puts[3].wrote_offset]
        assert rep.redispatched == 199
        assert _seqs(store) == set(range(200)) - {3}
    _only_damage_errors(check_store(tmp_path, SEG, 16, 32, 40).errors, puts[3].wrote_offset)


def test_a_missing_segment_refuses_to_open_naming_it(tmp_path: Path) -> None:
    _fill(tmp_path, 120)
    missing = _segments(tmp_path)[1]
    missing.unlink()
    with pytest.raises(StoreDamagedError) as refused:
        MessageStore.open(small_config(tmp_path))
    text = str(refused.value)
    assert str(missing) in text and f"offsets {SEG} to {2 * SEG - 1}" in text
    assert "\n" not in text
    # The lock is released: the directory can be opened once the file is back.


def test_a_segment_of_the_wrong_size_refuses_to_open_naming_it(tmp_path: Path) -> None:
    _fill(tmp_path, 120)
    short = _segments(tmp_path)[0]
    os.truncate(short, SEG // 2)
    with pytest.raises(StoreDamagedError, match=f"{short} is {SEG // 2} bytes"):
        MessageStore.open(small_config(tmp_path))


def test_stray_files_are_ignored_with_a_warning(tmp_path: Path) -> None:
    _fill(tmp_path, 120)
    first = _segments(tmp_path)[0]
    strays = [
        first.with_name(first.name + "~"),
        tmp_path / "commitlog" / "notes.tmp",
        tmp_path / "commitlog" / f"{10**12:020d}",  # a directory named like a segment
        tmp_path / "consumequeue" / "README",
        tmp_path / "consumequeue" / "T" / "README",
        tmp_path / "consumequeue" / "T" / "0" / "00000000000000000000.tmp",
        tmp_path / "index" / "backup",
    ]
    for path in strays:
        if path.name.isdigit():
            path.mkdir()
        else:
            path.write_bytes(first.read_bytes()[:100])
    with capture_logs() as logs, MessageStore.open(small_config(tmp_path)) as store:
        assert sorted(store.recovery_report.ignored_files) == sorted(map(str, strays))
        assert _seqs(store) == set(range(120))
    # Only the stray-file warnings: others name paths too (a disk past its warning
    # ratio on a shared machine names the commitlog directory).
    warned = {
        e["path"] for e in logs if e["log_level"] == "warning" and e["event"].startswith("ignoring")
    }
    assert warned == {str(p) for p in strays}
    assert all(p.exists() for p in strays)  # left alone


def test_a_wrong_tags_code_in_a_consume_queue_is_rebuilt(tmp_path: Path) -> None:
    _fill(tmp_path, 60)
    cq_file = tmp_path / "consumequeue" / "T" / "0" / f"{16 * 20:020d}"
    with open(cq_file, "r+b") as f:
        f.seek(3 * 20 + 12)  # entry 19's tags code
        f.write((12345).to_bytes(8, "big"))
    assert any("tags code 12345" in e for e in check_store(tmp_path, SEG, 16, 32, 40).errors)
    with MessageStore.open(small_config(tmp_path)) as store:
        rep = store.recovery_report
        assert rep.consume_queues_truncated == 1 and rep.consume_queue_entries_dropped == 11
        assert _seqs(store) == set(range(60))
        even = {java_string_hash("even")}
        got = [store.get_messages("T", 0, n, 100, tag_codes=even) for n in (0, 16)]
        assert [len(g.buffers) for g in got] == [16, 14]
    assert check_store(tmp_path, SEG, 16, 32, 40).errors == []


def test_a_torn_consume_queue_tail_is_rebuilt(tmp_path: Path) -> None:
    _fill(tmp_path, 60)
    cq_file = tmp_path / "consumequeue" / "T" / "1" / f"{16 * 20:020d}"
    with open(cq_file, "r+b") as f:
        f.seek(5 * 20 + 7)  # half of entry 21, the rest of the file garbage
        f.write(os.urandom(16 * 20 - 5 * 20 - 7))
    (tmp_path / "abort").touch()
    with MessageStore.open(small_config(tmp_path)) as store:
        assert store.recovery_report.consume_queues_truncated == 1
        assert _seqs(store) == set(range(60))
    assert check_store(tmp_path, SEG, 16, 32, 40).errors == []


def test_golden_store_with_a_damaged_record_serves_every_other(tmp_path: Path) -> None:
    golden = copy_golden(GOLDEN_STORE, tmp_path / "store")
    before = check_store(golden, 1048576, 300, 1000, 4000).records
    victim = sorted(before)[10]
    with open(golden / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(victim)
        f.write(b"\x00\x00\x00\x07\xde\xad\xbe\xef")
    with MessageStore.open(StoreConfig(golden, **GOLDEN_SIZES)) as store:  # type: ignore[arg-type]
        rep = store.recovery_report
        assert rep.truncated_bytes == 0
        assert [(r.offset, r.length) for r in rep.damaged] == [(victim, before[victim].size)]
        served = 0
        for offset, rec in before.items():
            got = store.get_messages(rec.topic, rec.queue_id, rec.queue_offset, 1)
            if offset == victim:
                assert not got.buffers or decode_message(got.buffers[0]).physical_offset != offset
                continue
            assert decode_message(got.buffers[0]).physical_offset == offset
            served += 1
        assert served == len(before) - 1 == 2032


def test_an_entry_naming_another_topics_record_is_rebuilt(tmp_path: Path) -> None:
    # Same queue id, queue offset and size: only the topic tells the records apart.
    with MessageStore.open(small_config(tmp_path)) as store:
        for n in range(20):
            for topic in ("T", "U"):
                assert store.put_message(message(n, topic=topic, size=150)).ok
    t_file = tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}"
    u_entry = (tmp_path / "consumequeue" / "U" / "0" / f"{0:020d}").read_bytes()[5 * 20 : 6 * 20]
    with open(t_file, "r+b") as f:
        f.seek(5 * 20)
        f.write(u_entry)
    assert any(
        "cq T/0#5: points at U/0#5" in e for e in check_store(tmp_path, SEG, 16, 32, 40).errors
    )
    with MessageStore.open(small_config(tmp_path)) as store:
        assert store.recovery_report.consume_queues_truncated == 1
        got = store.get_messages("T", 0, 0, 100)
        assert [decode_message(v).topic for v in got.buffers] == ["T"] * 16
    assert check_store(tmp_path, SEG, 16, 32, 40).errors == []


def test_a_queue_deleted_after_a_clean_stop_is_rebuilt(tmp_path: Path) -> None:
    # The scan meets records whose queue has no files: re-dispatch from the first.
    _fill(tmp_path, 60)
    shutil.rmtree(tmp_path / "consumequeue" / "T" / "1")
    with MessageStore.open(small_config(tmp_path)) as store:
        assert store.recovery_report.clean
        assert _seqs(store) == set(range(60))
    assert check_store(tmp_path, SEG, 16, 32, 40).errors == []


def test_a_queue_deleted_is_rebuilt_from_segments_a_clean_start_does_not_scan(
    tmp_path: Path,
) -> None:
    # 11 segments: a clean start scans the last 3, and the queue's first records are
    # in the first ones. Every segment is dispatched again, not just the scanned ones.
    _fill(tmp_path, 600)
    assert len(_segments(tmp_path)) > 3
    shutil.rmtree(tmp_path / "consumequeue" / "T" / "1")
    with MessageStore.open(small_config(tmp_path)) as store:
        assert store.recovery_report.clean
        assert store.min_offset("T", 1) == 0
        assert _seqs(store) == set(range(600))
        assert len(store.query_by_key("T", "k-5", 10)) == 1  # the index skips replays
    assert check_store(tmp_path, SEG, 16, 32, 40).errors == []


@pytest.mark.parametrize("lost", [1, 3])
def test_consume_queue_files_lost_at_the_end_are_rebuilt(tmp_path: Path, lost: int) -> None:
    # The newest files of one queue are gone: the queue ends before its records, and a
    # clean start re-dispatches from its last entry (not from the other queue's end).
    _fill(tmp_path, 600)
    files = sorted((tmp_path / "consumequeue" / "T" / "0").iterdir())
    for path in files[-lost:]:
        path.unlink()
    with MessageStore.open(small_config(tmp_path)) as store:
        assert store.recovery_report.clean
        assert store.max_offset("T", 0) == 300
        assert _seqs(store) == set(range(600))
    assert check_store(tmp_path, SEG, 16, 32, 40).errors == []


def test_a_segment_allocated_ahead_by_rocketmq_is_not_damage(tmp_path: Path) -> None:
    # RocketMQ creates the next segment before it is needed; after kill -9 it is still
    # there, all zeros, behind a segment that ends in zeros without a blank. That is
    # the end of the log (RocketMQ's recovery deletes the empty file), not damage.
    puts = _fill(tmp_path, 60)
    last = _segments(tmp_path)[-1]
    ahead = last.with_name(f"{int(last.name) + SEG:020d}")
    ahead.write_bytes(bytes(SEG))
    _crash(tmp_path)
    with MessageStore.open(small_config(tmp_path)) as store:
        rep = store.recovery_report
        assert rep.damaged == () and rep.truncated_bytes == 0
        assert rep.commitlog_max_offset == puts[-1].wrote_offset + puts[-1].wrote_bytes
        assert store.put_message(message(60)).wrote_offset == rep.commitlog_max_offset
        assert _seqs(store) == set(range(61))
    assert not ahead.exists()


def test_a_blanked_last_entry_does_not_keep_a_queue_file_forever(tmp_path: Path) -> None:
    # Retention judges a consume-queue file by its last entry's record; a blank (the
    # entry of a damaged record) has none, so the last real entry decides.
    puts = _fill(tmp_path, 120)
    victim = puts[30]  # queue 0, offset 15: the last entry of its first file
    _overwrite(tmp_path, victim.wrote_offset, b"\xff" * 8)
    with MessageStore.open(small_config(tmp_path)) as store:
        assert store.recovery_report.consume_queue_entries_blanked == 1
        cq = store.queues[("T", 0)]
        with store.lock:
            assert cq.delete_expired(puts[28].wrote_offset + puts[28].wrote_bytes) == 1
        assert cq.min_offset() == 16


def test_a_wrong_tags_code_before_the_last_three_files_is_rebuilt(tmp_path: Path) -> None:
    # Start checks only a queue's last 3 files, but the scan compared the record with
    # its entry, so the queue is rebuilt from there all the same.
    _fill(tmp_path, 120)
    first_file = tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}"
    assert len(list(first_file.parent.iterdir())) == 4
    with open(first_file, "r+b") as f:
        f.seek(5 * 20 + 12)
        f.write((4242).to_bytes(8, "big"))
    with MessageStore.open(small_config(tmp_path)) as store:
        rep = store.recovery_report
        assert rep.consume_queues_truncated == 1 and rep.consume_queue_entries_dropped == 55
        even = {java_string_hash("even")}
        served = 0
        for start in range(0, 60, 16):
            served += len(store.get_messages("T", 0, start, 16, tag_codes=even).buffers)
        assert served == 60
    assert check_store(tmp_path, SEG, 16, 32, 40).errors == []
