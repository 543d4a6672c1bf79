"""A consume queue's min offset after retention: the first entry still stored, found by search."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rocklet.store._consume_queue import (
    BLANK_ENTRY_SIZE,
    ENTRY,
    ENTRY_SIZE,
    ConsumeQueue,
    _first_live,
)


def _linear(entries: list[tuple[int, int]], commitlog_min: int) -> int | None:
    """What the search must answer: the first real entry at or past ``commitlog_min``."""
    for n, (phy, size) in enumerate(entries):
        if size != BLANK_ENTRY_SIZE and phy >= commitlog_min:
            return n
    return None


@st.composite
def _queue(draw: st.DrawFn) -> tuple[list[tuple[int, int]], int]:
    """Ascending records of 1-2000 bytes, some entries blank (damaged records), and a min."""
    sizes = draw(st.lists(st.integers(1, 2000), max_size=300))
    blanks = draw(st.lists(st.booleans(), min_size=len(sizes), max_size=len(sizes)))
    entries, phy = [], draw(st.integers(0, 10_000))
    for size, blank in zip(sizes, blanks, strict=True):
        entries.append((0, BLANK_ENTRY_SIZE) if blank else (phy, size))
        phy += size
    return entries, draw(st.integers(0, phy + 10))


@given(_queue())
def test_the_search_finds_what_a_scan_finds(case: tuple[list[tuple[int, int]], int]) -> None:
    entries, commitlog_min = case
    view = memoryview(b"".join(ENTRY.pack(phy, size, 0) for phy, size in entries))
    assert _first_live(view, commitlog_min) == _linear(entries, commitlog_min)


def test_min_offset_across_files_after_most_records_expired(tmp_path: Path) -> None:
    """300,000 entries over files of 20,000: the min lands on the first live entry."""
    cq = ConsumeQueue("T", 0, tmp_path / "0", 20_000 * ENTRY_SIZE)
    for n in range(300_000):
        cq.put(n * 1000, 1000, 0, n)
    try:
        for live in (0, 1, 19_999, 20_000, 123_457, 299_999):
            cq.correct_min_offset(live * 1000 - 500)  # inside record live - 1: it is gone
            assert cq.min_logic_offset == live * ENTRY_SIZE
        cq.correct_min_offset(300_000 * 1000)  # every record gone: min is the max
        assert cq.min_logic_offset == cq.files.max_offset()
    finally:
        cq.close()
