"""Index files: how a new file's pages are faulted in ahead of the writer."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocklet.store._index_file import HEADER_SIZE, IndexFile
from tests.store.helpers import record_populates

_PIECE = 256 * 1024


def test_a_new_files_slot_table_is_faulted_in_a_piece_per_put(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole table, contiguously, but never more than 256 KiB in one call.

    The call holds the event loop and the GIL: the default 20 MB table in one call
    held them 21 ms.
    """
    calls = record_populates(monkeypatch)
    slots = 300_000  # 1.2 MB of slots: five pieces
    table_end = HEADER_SIZE + 4 * slots
    index = IndexFile(tmp_path / "idx", slots=slots, max_entries=1000)
    assert [c for c in calls if c[0] < table_end] == [(0, _PIECE)]  # the header's page
    for i in range(10):
        assert index.put_keys([i * 7919], [1000 + 100 * i], 0, 1_700_000_000_000) == 1
    pieces = [c for c in calls if c[0] < table_end]
    assert [start for start, _ in pieces] == list(range(0, table_end, _PIECE))
    assert all(0 < length <= _PIECE for _, length in pieces)
    assert sum(length for _, length in pieces) == table_end
    assert index.index_count == 11

    index.file.view.release()
    assert index.file.try_close()
    calls.clear()
    reopened = IndexFile(tmp_path / "idx", slots=slots, max_entries=1000)
    assert reopened.index_count == 11
    reopened.put_keys([5], [99_999], 0, 1_700_000_001_000)
    assert [c for c in calls if c[0] < table_end] == []  # an existing file's slots stay as they are
    reopened.file.view.release()
    assert reopened.file.try_close()
