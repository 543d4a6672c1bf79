"""Micro-benchmark: what a pull's filter costs per record, in the store's read loop.

Fills a store with 1 KiB messages (tags A/B/C, properties ``a`` and ``s`` besides the
system ones) and reads one queue to its end 32 records at a time, as pulls do: with no
filter, with a tag filter (``A || B``), and with an SQL92 selector
(``(TAGS IN ('A','B')) AND a BETWEEN 2 AND 6``, the broker's record filter). Prints µs
per record scanned for each, per round.

Run: ``.venv/bin/python bench/filter_bench.py [--messages 50000] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rocklet.broker.processors.property_filter import PropertyFilters
from rocklet.protocol.message import java_string_hash
from rocklet.store.config import StoreConfig
from rocklet.store.message_store import MessageStore
from rocklet.store.results import MessageToStore

SELECTOR = "(TAGS IN ('A','B')) AND a BETWEEN 2 AND 6"


def fill(store: MessageStore, count: int) -> None:
    """Store ``count`` messages in queue 0 of topic ``T``."""
    body = b"x" * 1024
    for i in range(count):
        props = {
            "TAGS": "ABC"[i % 3],
            "KEYS": f"k{i}",
            "UNIQ_KEY": f"U{i:020d}",
            "a": str(i % 10),
            "s": "xyz"[i % 3],
        }
        store.put_message(MessageToStore(topic="T", queue_id=0, body=body, properties=props))


def scan(store: MessageStore, count: int, **how: Any) -> tuple[float, int]:
    """µs per record scanned reading the queue to its end, and records returned."""
    offset, returned = 0, 0
    began = time.perf_counter()
    while offset < count:
        result = store.get_messages("T", 0, offset, 32, **how)
        if result.next_begin_offset <= offset:
            break
        returned += len(result.buffers)
        offset = result.next_begin_offset
    return (time.perf_counter() - began) / count * 1e6, returned


def main(argv: Sequence[str] | None = None) -> int:
    """Fill a store in a temporary directory, then time each filter's reads."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="rocklet-filter-bench-"))
    try:
        with MessageStore.open(StoreConfig(root)) as store:
            print(f"filling {args.messages} messages ...", file=sys.stderr)
            fill(store, args.messages)
            cases = {
                "none": {},
                "tags": {"tag_codes": frozenset({java_string_hash("A"), java_string_hash("B")})},
                "sql92": {
                    "record_filter": PropertyFilters(enabled=True).from_pull("SQL92", SELECTOR)
                },
            }
            for n in range(args.rounds):
                for name, how in cases.items():
                    us, returned = scan(store, args.messages, **how)
                    line = f"round {n}  {name:<6} {us:6.2f} µs per record scanned"
                    print(f"{line} ({returned} returned)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
