"""MappedFile: small appends through the map, large ones through pwrite, same result."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from rocklet.store._mapped_file import MappedFile
from tests.store.helpers import record_populates


def test_small_and_large_appends_are_visible_and_durable(tmp_path: Path) -> None:
    """Both write paths land in the shared page cache: the view and the file agree."""
    path = tmp_path / "f"
    mf = MappedFile(path, 64 * 1024, 0)
    small, large = b"s" * 100, os.urandom(20_000)
    assert mf.append(small) == 0
    assert mf.append(large) == 100  # page-sized or more: pwrite
    assert mf.append(small) == 20_100
    assert bytes(mf.view[: mf.wrote_position]) == small + large + small
    assert mf.flush() == 20_200
    assert mf.try_close()
    assert path.read_bytes()[:20_200] == small + large + small
    assert path.read_bytes()[20_200:] == bytes(64 * 1024 - 20_200)


def test_populate_changes_no_bytes(tmp_path: Path) -> None:
    """Pre-faulting a range (or a window ahead) leaves the file's contents alone."""
    mf = MappedFile(tmp_path / "f", 3 * 1024 * 1024, 0)
    mf.append(b"x" * 10)
    mf.populate(5, 100_000)
    mf.populate_ahead(10, 5000)
    mf.populate_ahead(10, 4000)  # already covered: nothing to do
    assert bytes(mf.view[:12]) == b"x" * 10 + b"\x00\x00"
    assert bytes(mf.view[10 : 2 * 1024 * 1024]) == bytes(2 * 1024 * 1024 - 10)
    assert mf.try_close()


def test_populate_ahead_prefaults_in_small_contiguous_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sequential writes are covered before they land, by windows of at most 128 KiB.

    The call runs on the event loop: a 1 MiB window stalled it for milliseconds.
    """
    calls = record_populates(monkeypatch)
    mf = MappedFile(tmp_path / "f", 4 * 1024 * 1024, 0)
    write = 7 * 20  # a batch of seven index entries
    pos = 100
    while pos + write <= 3 * 1024 * 1024:
        mf.populate_ahead(pos, pos + write)
        assert mf.populated >= pos + write
        pos += write
    assert len(calls) > 20
    assert all(length <= 128 * 1024 + write for _, length in calls)
    for (start, length), (following, _) in itertools.pairwise(calls):
        assert following == start + length  # no gap, no page populated twice
    assert mf.try_close()
