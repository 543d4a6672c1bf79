"""Queues dropped with their topic stay dropped: through restarts, crashes and a slave's dispatch.

A dropped queue's records stay in the commitlog until retention. Before the drops were
written down, the next start took them for a queue whose files were lost: it
dispatched the whole commitlog again and gave the deleted topic its messages back, and
a topic made again under the name got the old messages mixed into its new ones.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from rocklet.store.check import check_store
from rocklet.store.dropped_queues import FILE_NAME
from rocklet.store.maintenance import clean_unused_topics
from rocklet.store.message_store import MessageStore
from rocklet.store.replica import append_replica
from tests.store.helpers import message, read_all, small_config


def _seqs(store: MessageStore, topic: str) -> list[int]:
    return [int(m.properties["seq"]) for m in read_all(store, topic, 0)]


def _fill(store: MessageStore, topic: str, seqs: range) -> None:
    for n in seqs:
        assert store.put_message(message(n, topic=topic, size=300)).ok


def _warnings(logs: list[MutableMapping[str, Any]]) -> list[object]:
    return [e["event"] for e in logs if e["log_level"] in ("warning", "error")]


@pytest.mark.parametrize("crash", [False, True])
def test_a_dropped_topic_is_not_brought_back_by_a_start(tmp_path: Path, crash: bool) -> None:
    config = small_config(tmp_path)
    with MessageStore.open(config) as store:
        _fill(store, "Gone", range(60))  # over several segments
        _fill(store, "Keep", range(5))
        assert clean_unused_topics(store, lambda t: t == "Keep") == ["Gone"]
    if crash:
        (tmp_path / "abort").touch()  # recovery from the checkpoint, as after kill -9
    with capture_logs() as logs, MessageStore.open(config) as store:
        assert ("Gone", 0) not in store.queues
        assert not (tmp_path / "consumequeue" / "Gone").exists()
        assert _seqs(store, "Keep") == list(range(5))
        if not crash:
            assert store.recovery_report.redispatched == 0
    assert _warnings(logs) == []
    report = check_store(config)
    assert report.ok, report.problems
    assert report.summary["dropped_queue_records"] == 60


@pytest.mark.parametrize("crash", [False, True])
def test_a_topic_made_again_holds_only_its_new_messages(tmp_path: Path, crash: bool) -> None:
    config = small_config(tmp_path)
    with MessageStore.open(config) as store:
        _fill(store, "Again", range(50))
        clean_unused_topics(store, lambda t: False)
        _fill(store, "Again", range(100, 103))
        assert store.max_offset("Again", 0) == 3  # numbered from 0, as in RocketMQ
    if crash:
        (tmp_path / "abort").touch()
    with capture_logs() as logs, MessageStore.open(config) as store:
        assert _seqs(store, "Again") == [100, 101, 102]
        assert store.max_offset("Again", 0) == 3
    assert _warnings(logs) == []
    assert check_store(config).ok


def test_a_slave_follows_a_queue_its_master_dropped_and_made_again(tmp_path: Path) -> None:
    # The slave sees no drop, only the records: the queue numbered from 0 again, at
    # higher commitlog offsets than its old entries.
    master_config = small_config(tmp_path / "master")
    slave_config = small_config(tmp_path / "slave")
    with MessageStore.open(master_config) as master:
        _fill(master, "Again", range(40))
        clean_unused_topics(master, lambda t: False)
        _fill(master, "Again", range(200, 204))
        end = master.commitlog_max_offset()
        data = b"".join(bytes(mf.view[: mf.wrote_position]) for mf in master.commitlog.files.files)
    with capture_logs() as logs, MessageStore.open(slave_config) as slave:
        append_replica(slave, 0, data)
        assert slave.commitlog_max_offset() == end
        assert _seqs(slave, "Again") == [200, 201, 202, 203]
    assert "queue numbered from a lower offset again: its old files go" in _warnings(logs)
    with capture_logs() as logs, MessageStore.open(slave_config) as slave:
        assert _seqs(slave, "Again") == [200, 201, 202, 203]
    assert _warnings(logs) == []


def test_marks_are_kept_until_retention_passes_them(tmp_path: Path) -> None:
    config = small_config(tmp_path)
    with MessageStore.open(config) as store:
        _fill(store, "Gone", range(10))
        clean_unused_topics(store, lambda t: False)
        rows = json.loads((tmp_path / FILE_NAME).read_bytes())["queues"]
        assert rows == [["Gone", 0, store.commitlog_max_offset()]]
        mark = rows[0][2]
        # A later drop, once the commitlog starts above the mark, forgets it.
        _fill(store, "Later", range(3))
        store.dropped.add([("Later", 0)], store.commitlog_max_offset(), mark)
        assert [r[0] for r in json.loads((tmp_path / FILE_NAME).read_bytes())["queues"]] == [
            "Later"
        ]


def test_an_unreadable_marks_file_falls_back_to_its_bak(tmp_path: Path) -> None:
    config = small_config(tmp_path)
    with MessageStore.open(config) as store:
        _fill(store, "First", range(5))
        clean_unused_topics(store, lambda t: t != "First")
        _fill(store, "Second", range(5))
        clean_unused_topics(store, lambda t: t != "Second")
    (tmp_path / FILE_NAME).write_bytes(b"{not json")
    with capture_logs() as logs, MessageStore.open(config) as store:
        # The .bak holds the first drop: its records stay dropped.
        assert ("First", 0) not in store.queues
        assert store.dropped.below(("First", 0), 0)
    assert "dropped-queue marks unreadable" in _warnings(logs)


def test_a_queue_made_again_but_empty_gets_no_old_entry_from_a_crash_recovery(
    tmp_path: Path,
) -> None:
    # The queue's directory exists again (made for a put that a crash cut short) and
    # holds nothing: the re-dispatch after the crash meets the old records first.
    config = small_config(tmp_path)
    with MessageStore.open(config) as store:
        _fill(store, "Again", range(30))
        clean_unused_topics(store, lambda t: False)
    (tmp_path / "consumequeue" / "Again" / "0").mkdir(parents=True)
    (tmp_path / "abort").touch()
    with MessageStore.open(config) as store:
        assert store.max_offset("Again", 0) == 0
        assert _seqs(store, "Again") == []
        _fill(store, "Again", range(300, 302))
        assert _seqs(store, "Again") == [300, 301]
