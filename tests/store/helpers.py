"""Shared helpers for the store tests: small configs and message builders."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rocklet.protocol.message import StoredMessage, decode_message, pack_host
from rocklet.store._mapped_file import MappedFile
from rocklet.store.config import FlushDiskType, StoreConfig
from rocklet.store.message_store import MessageStore
from rocklet.store.results import GetMessageStatus, MessageToStore

BORN = pack_host("127.0.0.1", 5555)
STORE_HOST = pack_host("127.0.0.1", 10911)

#: File sizes of the golden store's broker.conf (tests/data/README.md).
GOLDEN_SIZES = {
    "commitlog_file_size_bytes": 1048576,
    "consume_queue_entries_per_file": 300,
    "index_hash_slots": 1000,
    "index_max_entries": 4000,
}


def small_config(path: Path, **overrides: object) -> StoreConfig:
    """A config with tiny files so tests roll segments quickly."""
    values: dict[str, object] = {
        "commitlog_file_size_bytes": 16 * 1024,
        "consume_queue_entries_per_file": 16,
        "index_hash_slots": 32,
        "index_max_entries": 40,
        "max_message_size_bytes": 8 * 1024,
        "flush_disk_type": FlushDiskType.ASYNC_FLUSH,
    }
    values.update(overrides)
    return StoreConfig(path, **values)  # type: ignore[arg-type]


def message(
    n: int, *, topic: str = "T", queue_id: int = 0, size: int = 100, tags: str | None = None
) -> MessageToStore:
    """Message number ``n`` with keys ``k-n`` and ``group-(n%3)`` and a UNIQ_KEY."""
    props = {"KEYS": f"k-{n} group-{n % 3}", "UNIQ_KEY": f"U{n:08d}", "seq": str(n)}
    props["TAGS"] = tags if tags is not None else ("even" if n % 2 == 0 else "odd")
    body = (f"m-{n}-".encode() * (size // 4 + 1))[:size]
    return MessageToStore(
        topic, queue_id, body, props, born_timestamp=1, born_host=BORN, store_host=STORE_HOST
    )


def decoded(views: list[memoryview]) -> list[StoredMessage]:
    """Decode record views."""
    return [decode_message(v) for v in views]


def copy_golden(golden: Path, dest: Path) -> Path:
    """Copy the golden store to ``dest`` (never open the original)."""
    shutil.copytree(golden, dest)
    for p in dest.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    dest.chmod(0o755)
    return dest


def read_all(store: MessageStore, topic: str, queue_id: int, start: int = 0) -> list[StoredMessage]:
    """Every record of a queue from ``start``, following next_begin_offset."""
    out: list[StoredMessage] = []
    offset = start
    while True:
        got = store.get_messages(topic, queue_id, offset, 1000, max_bytes=1 << 30)
        if got.status is not GetMessageStatus.FOUND:
            return out
        out += decoded(got.buffers)
        offset = got.next_begin_offset


def record_populates(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Note the ``(start, length)`` of every ``MappedFile.populate`` call from now on.

    The calls still populate; the list fills as they happen.
    """
    calls: list[tuple[int, int]] = []
    real = MappedFile.populate

    def recording(self: MappedFile, start: int, length: int) -> None:
        calls.append((start, length))
        real(self, start, length)

    monkeypatch.setattr(MappedFile, "populate", recording)
    return calls
