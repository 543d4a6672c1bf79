"""The store check on real stores: clean, RocketMQ's golden store, and damaged copies.

Every damaged case is also judged by the independent layout checker, so the two agree
on what is wrong; the check must find it, name the file and offset, and change nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from rocklet.store.check import StoreCheckReport, check_store, live_limits
from rocklet.store.config import StoreConfig
from rocklet.store.message_store import MessageStore
from rocklet.store.results import PutResult
from rocklet.transport.clock import ManualClock
from tests.conftest import GOLDEN_STORE
from tests.store.helpers import GOLDEN_SIZES, message, small_config
from tests.store.layout_checker import check_store as oracle

SEG = 16 * 1024


def _fill(root: Path, count: int = 120, clock: ManualClock | None = None) -> list[PutResult]:
    with MessageStore.open(small_config(root), clock=clock) as store:
        return [store.put_message(message(n, queue_id=n % 2, size=150)) for n in range(count)]


def _check(root: Path) -> StoreCheckReport:
    return check_store(small_config(root))


def _problems(report: StoreCheckReport) -> list[tuple[str, str, int | None]]:
    return [(f.area, f.path, f.offset) for f in report.problems]


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "lock"
    }


def test_a_clean_store_has_no_findings_and_is_left_as_it_was(tmp_path: Path) -> None:
    _fill(tmp_path)
    before = _digest(tmp_path)
    report = _check(tmp_path)
    assert report.ok and report.findings == [] and report.clean_stop is True
    figures = report.summary
    assert figures["records"] == figures["entries"] == 120
    assert figures["segments"] == 3 and figures["queues"] == 2
    assert figures["index_entries"] == oracle(tmp_path, SEG, 16, 32, 40).index_entries == 360
    assert _digest(tmp_path) == before


def test_the_golden_rocketmq_store_is_clean() -> None:
    # The shared original, read-only: the check writes nothing and needs no lock file.
    report = check_store(StoreConfig(GOLDEN_STORE, **GOLDEN_SIZES))  # type: ignore[arg-type]
    assert report.ok and report.findings == []
    assert report.summary["records"] == len(oracle(GOLDEN_STORE, 1048576, 300, 1000, 4000).records)
    assert report.summary["entries"] == 2033 and report.summary["config_files"] == 5
    assert report.summary["index_entries"] == 6064


def test_a_damaged_record_is_a_problem_at_its_offset(tmp_path: Path) -> None:
    puts = _fill(tmp_path)
    with open(tmp_path / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(puts[3].wrote_offset)
        f.write(b"\xff" * 8)
    report = _check(tmp_path)
    assert _problems(report) == [("commitlog", f"commitlog/{0:020d}", puts[3].wrote_offset)]
    assert "292 damaged bytes (bad magic 0xffffffff)" in report.problems[0].message
    assert report.summary["damaged_bytes"] == puts[3].wrote_bytes == 292
    assert report.summary["records"] == 119
    # Its entry and index entries point at the damage: counted, not a second problem.
    assert report.summary["index_entries_damaged"] == 3
    # Recovery skips it and blanks its entry; the check still reports the lost bytes.
    with MessageStore.open(small_config(tmp_path)) as store:
        assert [r.offset for r in store.recovery_report.damaged] == [puts[3].wrote_offset]
    again = _check(tmp_path)
    assert _problems(again) == _problems(report) and again.summary["blank_entries"] == 1


def test_a_crc_mismatch_is_found_anywhere(tmp_path: Path) -> None:
    # Recovery after a clean stop reads the last 3 segments; the check reads all 5.
    puts = _fill(tmp_path, 200)
    with open(tmp_path / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(puts[5].wrote_offset + 120)
        f.write(b"\x00")
    report = _check(tmp_path)
    assert _problems(report) == [("commitlog", f"commitlog/{0:020d}", puts[5].wrote_offset)]
    assert "body CRC mismatch" in report.problems[0].message
    assert any("BODYCRC" in e for e in oracle(tmp_path, SEG, 16, 32, 40).errors)


def test_missing_and_wrong_size_segments_are_problems(tmp_path: Path) -> None:
    _fill(tmp_path, 200)
    segments = sorted((tmp_path / "commitlog").iterdir())
    segments[1].unlink()
    os.truncate(segments[3], 100)
    report = _check(tmp_path)
    messages = {f.path: f.message for f in report.problems}
    assert messages[f"commitlog/{SEG:020d}"].startswith(f"missing (offsets {SEG} to {2 * SEG - 1})")
    assert messages[f"commitlog/{3 * SEG:020d}"].startswith("100 bytes, but segments are 16384")


def test_findings_of_one_file_are_listed_up_to_a_limit_then_counted(tmp_path: Path) -> None:
    # A segment lost in the middle of 11: each queue file pointing into it would list
    # every entry (hundreds of lines for a real segment); 20 are listed, then a count.
    config = small_config(tmp_path, consume_queue_entries_per_file=1024)
    with MessageStore.open(config) as store:
        for n in range(600):
            assert store.put_message(message(n, queue_id=n % 2, size=150)).ok
    (tmp_path / "commitlog" / f"{5 * SEG:020d}").unlink()
    report = check_store(config)
    per_file: dict[str, int] = {}
    for f in report.problems:
        per_file[f.path] = per_file.get(f.path, 0) + 1
    assert max(per_file.values()) == 21, per_file
    more = [f for f in report.problems if f.message.startswith("and ")]
    assert more and all(
        f.offset is None and f.message.endswith(" more problems like these in this file")
        for f in more
    )
    assert sum(int(f.message.split()[1]) for f in more) + len(report.problems) - len(more) > 60


def test_stray_files_are_warnings(tmp_path: Path) -> None:
    _fill(tmp_path)
    strays = [
        tmp_path / "commitlog" / f"{0:020d}~",
        tmp_path / "consumequeue" / "README",
        tmp_path / "consumequeue" / "T" / "0" / "x.tmp",
        tmp_path / "index" / "notes",
    ]
    for path in strays:
        path.write_text("stray")
    report = _check(tmp_path)
    assert report.ok and report.summary["ignored_files"] == 4
    assert sorted(f.path for f in report.findings) == sorted(
        str(p.relative_to(tmp_path)) for p in strays
    )


def test_consume_queue_entries_are_checked_both_ways(tmp_path: Path) -> None:
    puts = _fill(tmp_path, 60)
    cq = tmp_path / "consumequeue" / "T" / "0"
    with open(cq / f"{16 * 20:020d}", "r+b") as f:
        f.seek(3 * 20 + 12)
        f.write((12345).to_bytes(8, "big"))  # entry 19's tags code
    with open(cq / f"{0:020d}", "r+b") as f:
        f.seek(4 * 20 + 8)
        f.write((7).to_bytes(4, "big"))  # entry 4's size
    report = _check(tmp_path)
    by_offset = {f.offset: f.message for f in report.problems}
    assert set(by_offset) == {4, 19}
    assert "tags code 12345; its record is at" in by_offset[19]
    assert by_offset[4] == (
        "the entry says 7 bytes; the record there is queue 0 offset 4 of "
        f"{puts[8].wrote_bytes} bytes"
    )


def _lose(root: Path, case: str) -> None:
    queue = root / "consumequeue" / "T" / "1"
    files = sorted(queue.iterdir())
    if case == "queue":
        for path in files:
            path.unlink()
        queue.rmdir()
    elif case == "first file":
        files[0].unlink()
    else:  # "last files"
        for path in files[-2:]:
            path.unlink()


@pytest.mark.parametrize(
    ("case", "rebuilt", "text"),
    [
        ("queue", True, "missing, while the commitlog holds its records (from "),
        ("last files", True, "the queue ends before the commitlog's records of it"),
        ("first file", False, "its files start at entry 16, but the commitlog still holds"),
    ],
)
def test_records_without_entries_say_whether_a_start_rebuilds_them(
    tmp_path: Path, case: str, rebuilt: bool, text: str
) -> None:
    _fill(tmp_path, 600)  # 11 segments: the first queue files' records are not scanned
    _lose(tmp_path, case)
    (finding,) = _check(tmp_path).problems
    assert (finding.area, finding.path) == ("consumequeue", "consumequeue/T/1")
    assert text in finding.message
    assert finding.message.endswith(" (rebuilt at start)") == rebuilt
    assert ("delete consumequeue/ and start it" in finding.message) == (not rebuilt)
    # What the finding says is what a start does, and the advice works.
    with MessageStore.open(small_config(tmp_path)) as store:
        served = store.max_offset("T", 1) - store.min_offset("T", 1)
    assert (served == 300) == rebuilt
    if not rebuilt:
        shutil.rmtree(tmp_path / "consumequeue")
        with MessageStore.open(small_config(tmp_path)) as store:
            assert (store.min_offset("T", 1), store.max_offset("T", 1)) == (0, 300)
    assert _check(tmp_path).problems == []


def test_what_crash_recovery_repairs_is_a_warning_after_a_crash(tmp_path: Path) -> None:
    # One store time for all: a torn last record younger than the rest would also make
    # the checkpoint's flushed time newer than any whole record (a second problem).
    puts = _fill(tmp_path, 60, ManualClock(1_700_000_000_000))
    last = puts[-1]
    with open(
        tmp_path / "commitlog" / f"{last.wrote_offset - last.wrote_offset % SEG:020d}", "r+b"
    ) as f:
        f.seek(last.wrote_offset % SEG + 40)
        f.write(bytes(last.wrote_bytes - 40))  # a torn last record
    clean = _check(tmp_path)
    newest_index = sorted((tmp_path / "index").iterdir())[-1].name
    assert [(f.area, f.path, f.offset) for f in clean.problems] == [
        (
            "commitlog",
            f"commitlog/{last.wrote_offset - last.wrote_offset % SEG:020d}",
            last.wrote_offset,
        ),
        ("consumequeue", f"consumequeue/T/1/{16 * 20:020d}", 29),  # the torn record's entry
        ("index", f"index/{newest_index}", 22),  # and its keys (3 entries, reported once)
    ]
    assert clean.problems[0].message.startswith("torn tail: ")
    (tmp_path / "abort").touch()
    crashed = _check(tmp_path)
    assert crashed.ok and crashed.clean_stop is False
    assert {f.message.split(":")[0] for f in crashed.findings} >= {"torn tail"}
    assert crashed.summary["torn_tail_bytes"] == clean.summary["torn_tail_bytes"] > 0


def test_a_checkpoint_ahead_of_the_records_is_a_problem(tmp_path: Path) -> None:
    _fill(tmp_path)
    page = bytearray((tmp_path / "checkpoint").read_bytes())
    page[0:8] = (2**62).to_bytes(8, "big")
    (tmp_path / "checkpoint").write_bytes(page)
    (problem,) = _check(tmp_path).problems
    assert problem.area == "checkpoint" and "physicMsgTimestamp" in problem.message


@pytest.mark.parametrize(("backup", "severity"), [(True, "warning"), (False, "problem")])
def test_config_files_must_parse(tmp_path: Path, backup: bool, severity: str) -> None:
    _fill(tmp_path)
    config = tmp_path / "config"
    config.mkdir()
    (config / "topics.json").write_text('{"topicConfigTable": {')
    if backup:
        (config / "topics.json.bak").write_text('{"topicConfigTable": {}}')
    (config / "consumerOffset.json").write_text('{"offsetTable": {"T@G": {0: 12}}}')  # fastjson
    (finding,) = _check(tmp_path).findings
    assert (finding.severity, finding.path) == (severity, "config/topics.json")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[]", "not a JSON object but list"),
        ('{"topicConfigTable": []}', '"topicConfigTable" is not an object'),
        (
            '{"topicConfigTable": {"T": {"topicName": "T", "readQueueNums": "x"}}}',
            "entry 'T': ",
        ),
    ],
)
def test_a_config_file_of_the_wrong_shape_is_a_problem(tmp_path: Path, text: str, why: str) -> None:
    # Valid JSON that is not a topic table: a broker refuses it as it refuses bad JSON.
    _fill(tmp_path)
    config = tmp_path / "config"
    config.mkdir()
    (config / "topics.json").write_text(text)
    (finding,) = _check(tmp_path).findings
    assert (finding.severity, finding.path) == ("problem", "config/topics.json")
    assert why in finding.message
    assert finding.message.endswith(
        "and there is no .bak: a broker refuses to start; repair it or restore it from a backup"
    )
    (config / "topics.json.bak").write_text('{"topicConfigTable": {}}')
    (finding,) = _check(tmp_path).findings
    assert finding.severity == "warning" and "a broker reads topics.json.bak instead" in (
        finding.message
    )


def test_garbage_index_entries_are_problems(tmp_path: Path) -> None:
    _fill(tmp_path)
    newest = sorted((tmp_path / "index").iterdir())[-1]
    with open(newest, "r+b") as f:
        f.seek(40 + 32 * 4 + 20)  # entry 1
        f.write(os.urandom(20))
    report = _check(tmp_path)
    assert [(f.area, f.offset) for f in report.problems] == [("index", 1)]
    assert report.summary["index_entries_bad"] == 1


def test_a_live_check_reads_below_the_write_positions_taken_at_its_start(tmp_path: Path) -> None:
    # What the broker's check sees when writers go on: new segments, queue files and
    # index files appear after the positions were taken, and are not judged.
    with MessageStore.open(small_config(tmp_path)) as store:
        for n in range(120):
            store.put_message(message(n, queue_id=n % 2, size=150))
        limits = live_limits(store)
        index_files = len(list((tmp_path / "index").iterdir()))
        for n in range(120, 240):
            store.put_message(message(n, queue_id=n % 2, size=150))
        assert len(list((tmp_path / "index").iterdir())) > index_files
        report = check_store(small_config(tmp_path), live=limits)
    assert report.live and report.clean_stop is None
    assert report.findings == [] and report.summary["records"] == 120
    assert report.summary["entries"] == 120


def test_an_allocating_file_is_a_warning_when_stopped_and_expected_when_live(
    tmp_path: Path,
) -> None:
    # A running broker reserves its next segment under the allocating name; a stopped
    # store only has one if a crash interrupted the reservation.
    _fill(tmp_path)
    reserved = [
        tmp_path / "commitlog" / f"{8 * SEG:020d}.allocating",
        tmp_path / "index" / "20261125000000000.allocating",
    ]
    for path in reserved:
        path.write_bytes(b"\0" * 64)
    stopped = _check(tmp_path)
    assert stopped.ok and stopped.summary.get("ignored_files", 0) == 0
    assert sorted(f.path for f in stopped.findings) == sorted(
        str(p.relative_to(tmp_path)) for p in reserved
    )
    assert all("a crash interrupted" in f.message for f in stopped.findings)
    with MessageStore.open(small_config(tmp_path)) as store:
        for path in reserved:  # the start removed them; the allocator makes them again
            path.write_bytes(b"\0" * 64)
        report = check_store(small_config(tmp_path), live=live_limits(store))
    assert report.findings == []
