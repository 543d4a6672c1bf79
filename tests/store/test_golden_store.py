"""A store written by RocketMQ 4.9.4 opens, serves every record, and keeps appending."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocklet.protocol.message import decode_message
from rocklet.store.config import StoreConfig
from rocklet.store.message_store import MessageStore
from tests.conftest import GOLDEN_STORE
from tests.store.helpers import GOLDEN_SIZES, copy_golden, decoded, message
from tests.store.layout_checker import check_store

MANIFEST = GOLDEN_STORE.parent / "rocketmq-4.9.4-store.manifest.json"


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    """A private copy of the golden store."""
    return copy_golden(GOLDEN_STORE, tmp_path / "store")


def _open(root: Path) -> MessageStore:
    return MessageStore.open(StoreConfig(root, **GOLDEN_SIZES))  # type: ignore[arg-type]


def test_layout_checker_accepts_golden_store(golden: Path) -> None:
    """Our checker, written from the format doc, finds RocketMQ's own store well-formed."""
    rep = check_store(golden, 1048576, 300, 1000, 4000)
    assert rep.errors == []
    assert len(rep.records) == 2033
    assert rep.index_entries > 4000


def test_recovers_cleanly_and_serves_manifest(golden: Path) -> None:
    """Every GoldenTopic message is served by queue and offset with its id and tags."""
    manifest = json.loads(MANIFEST.read_text())
    with _open(golden) as store:
        rep = store.recovery_report
        assert rep.clean and rep.truncated_bytes == 0 and rep.consume_queue_entries_dropped == 0
        by_id = {}
        for q in range(4):
            got = store.get_messages("GoldenTopic", q, 0, 10_000, 1 << 30)
            offset = 0
            while got.buffers:
                for qoff, msg in zip(got.queue_offsets, decoded(got.buffers), strict=True):
                    assert msg.queue_offset == qoff and msg.queue_id == q
                    by_id[msg.uniq_key] = msg
                offset = got.next_begin_offset
                got = store.get_messages("GoldenTopic", q, offset, 10_000, 1 << 30)
        assert len(by_id) == len(manifest) == 2001
        for entry in manifest:
            msg = by_id[entry["msg_id"]]
            assert msg.queue_offset == entry["queue_offset"]
            assert msg.tags == entry["tags"]


def test_every_record_served_by_queue(golden: Path) -> None:
    """All 2033 records that belong in a consume queue are reachable through it."""
    rep = check_store(golden, 1048576, 300, 1000, 4000)
    with _open(golden) as store:
        for rec in rep.records.values():
            got = store.get_messages(rec.topic, rec.queue_id, rec.queue_offset, 1)
            assert got.buffers, rec
            assert decode_message(got.buffers[0]).physical_offset == rec.offset


def test_keys_through_existing_index(golden: Path) -> None:
    """order-N, user-M, UNIQ_KEY and the non-ASCII key resolve through RocketMQ's index."""
    manifest = json.loads(MANIFEST.read_text())
    with _open(golden) as store:
        for n in (0, 1, 999, 1999):
            (view,) = store.query_by_key("GoldenTopic", f"order-{n}", 10)
            assert decode_message(view).properties["seq"] == str(n)
        assert len(store.query_by_key("GoldenTopic", "user-3", 1000)) == len(range(3, 2000, 7))
        (view,) = store.query_by_key("GoldenTopic", manifest[1234]["msg_id"], 5)
        assert decode_message(view).properties["seq"] == "1234"
        (view,) = store.query_by_key("GoldenTopic", "ключ", 5)
        assert decode_message(view).tags == "Täg"


def test_keeps_appending(golden: Path) -> None:
    """New messages continue the queue offsets and the commitlog, and survive reopen."""
    with _open(golden) as store:
        before = store.max_offset("GoldenTopic", 1)
        end = store.commitlog_max_offset()
        res = store.put_message(message(7, topic="GoldenTopic", queue_id=1))
        assert res.ok and res.queue_offset == before and res.wrote_offset >= end
        assert store.query_by_key("GoldenTopic", "k-7", 5)
    with _open(golden) as store:
        got = store.get_messages("GoldenTopic", 1, before, 5)
        assert [m.properties["seq"] for m in decoded(got.buffers)] == ["7"]
    assert check_store(golden, 1048576, 300, 1000, 4000).errors == []
