"""The put path dispatches from encoder data; recovery dispatches by parsing records.

Both must build byte-identical consume queues and index files, or a crash would change
what consumers see.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rocklet.protocol.message import SysFlag, decode_message, java_string_hash
from rocklet.protocol.names import SCHEDULE_TOPIC
from rocklet.store._hashing import index_key_hash
from rocklet.store.message_store import MessageStore
from rocklet.store.results import MessageToStore
from rocklet.transport.clock import ManualClock
from tests.store.helpers import BORN, STORE_HOST, message, small_config
from tests.store.layout_checker import check_store

START = 1_700_000_000_000


def _msg(topic: str, queue_id: int, props: dict[str, str], size: int = 60) -> MessageToStore:
    return MessageToStore(
        topic, queue_id, b"b" * size, props, born_host=BORN, store_host=STORE_HOST
    )


def _odd_messages(n: int) -> list[MessageToStore]:
    """Messages whose dispatch data is easy to get wrong."""
    return [
        _msg("T", 0, {}),  # no tags, keys or UNIQ_KEY
        _msg("T", 0, {"TAGS": "", "KEYS": "", "UNIQ_KEY": ""}),  # empty values dropped
        _msg("T", 1, {"TAGS": "ключ", "KEYS": "ключ 😀 x", "UNIQ_KEY": f"é{n}"}),
        # A separator inside a value: readers parse TAGS=evil and KEYS=k2.
        _msg("T", 1, {"TAGS": "a", "x": "y\x02TAGS\x01evil\x02KEYS\x01k2"}),
        _msg("T", 1, {"TAGS\x01z": "q", "KEYS": "a\x01b  c"}),  # \x01 in a name
        _msg("T", 0, {"KEYS": "  many   spaced\tkeys  ", "UNIQ_KEY": "polygenelubricants"}),
        _msg("Üñí", 3, {"TAGS": "t", "KEYS": "k" * 300}, size=10),
        # Not str, against the type: stored as text, dispatched as parsed.
        _msg("T", 0, {"TAGS": 5, "KEYS": 6, "UNIQ_KEY": 7}),  # type: ignore[dict-item]
    ]


def _fill(store: MessageStore, clock: ManualClock) -> None:
    # A batch spanning three consume-queue files (16 entries each).
    assert store.put_messages([message(900 + i, queue_id=1, size=20) for i in range(40)]).ok
    for n in range(30):
        clock.advance(700)  # index time diffs and deliver times vary
        store.put_message(message(n, queue_id=n % 3, size=40 + n * 11))
        assert store.put_messages([message(100 + n * 4 + i, queue_id=2) for i in range(4)]).ok
        for m in _odd_messages(n):
            assert store.put_message(m).ok
        delayed = message(500 + n)
        delayed.properties["DELAY"] = str(n % 20)  # 0 = not delayed; above 18 clamps
        assert store.put_message(delayed).ok
        half = message(600 + n)
        half.sys_flag = SysFlag.TRANSACTION_PREPARED if n % 2 else SysFlag.TRANSACTION_ROLLBACK
        assert store.put_message(half).ok


def _derived(root: Path) -> dict[str, bytes]:
    cq = root / "consumequeue"
    files = {str(p.relative_to(cq)): p.read_bytes() for p in cq.rglob("*") if p.is_file()}
    # Index files are named by creation time; compare them in order.
    for n, p in enumerate(sorted((root / "index").iterdir())):
        files[f"index#{n}"] = p.read_bytes()
    return files


def test_put_path_and_recovery_build_identical_files(tmp_path: Path) -> None:
    """CQ and index files from puts equal those recovery rebuilds from the commitlog."""
    live, rebuilt = tmp_path / "live", tmp_path / "rebuilt"
    clock = ManualClock(START)
    with MessageStore.open(small_config(live), clock=clock) as store:
        _fill(store, clock)
        assert len(store.index.files) > 3 and len(store.commitlog.files.files) > 3
    shutil.copytree(live, rebuilt)
    shutil.rmtree(rebuilt / "consumequeue")
    shutil.rmtree(rebuilt / "index")
    with MessageStore.open(small_config(rebuilt), clock=ManualClock(START)) as store:
        assert store.recovery_report.redispatched > 300
    assert _derived(live) == _derived(rebuilt)
    assert check_store(live, 16 * 1024, 16, 32, 40).errors == []


def test_dispatch_data_follows_what_readers_parse(tmp_path: Path) -> None:
    """Tags codes and index keys come from the properties as stored, not as passed."""
    with MessageStore.open(small_config(tmp_path)) as store:
        res = store.put_message(_odd_messages(0)[3])
        entry = store.queues[("T", 1)].entry(res.queue_offset)
        assert entry is not None and entry[2] == java_string_hash("evil")
        found = store.query_by_key("T", "k2", 10)
        assert [decode_message(v).physical_offset for v in found] == [res.wrote_offset]


def test_schedule_tags_code_is_deliver_time(tmp_path: Path) -> None:
    """A delayed put's consume-queue entry holds store time + the level's delay."""
    clock = ManualClock(START)
    with MessageStore.open(small_config(tmp_path), clock=clock) as store:
        m = message(1)
        m.properties["DELAY"] = "3"
        res = store.put_message(m)
        entry = store.queues[(SCHEDULE_TOPIC, 2)].entry(res.queue_offset)
        assert entry is not None and entry[2] == START + 10_000


def test_batch_refuses_mixed_delay_and_transaction_types(tmp_path: Path) -> None:
    """A batch that would land in two queues, or mixes transaction types, is refused."""
    with MessageStore.open(small_config(tmp_path)) as store:
        delayed = message(1)
        delayed.properties["DELAY"] = "2"
        assert not store.put_messages([message(0), delayed]).ok
        half = message(2)
        half.sys_flag = SysFlag.TRANSACTION_PREPARED
        assert not store.put_messages([message(0), half]).ok
        assert store.commitlog_max_offset() == 0


def test_index_key_hash_matches_java() -> None:
    """The fast index hash equals abs(Java hashCode), 0 for Integer.MIN_VALUE."""
    for text in ("", "T#k", "polygenelubricants", "T#ключ", "T#😀", "T#\ud800", "x" * 5000):
        h = java_string_hash(text)
        assert index_key_hash(text) == (0 if h == -(2**31) else abs(h))
