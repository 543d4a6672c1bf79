"""Child of test_crash: appends with SYNC_FLUSH and prints each acknowledged put.

Usage: python -m tests.store.crash_child <store dir> <first seq>
Prints ``<seq> <commitlog offset>`` once the put's durable future completes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import structlog

from rocklet.store.config import FlushDiskType
from rocklet.store.message_store import MessageStore
from tests.store.helpers import message, small_config


def main() -> None:
    """Append forever (until killed)."""
    root, seq = Path(sys.argv[1]), int(sys.argv[2])
    # stdout carries the acknowledgements; logs go to stderr.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    store = MessageStore.open(small_config(root, flush_disk_type=FlushDiskType.SYNC_FLUSH))
    print("ready", flush=True)
    while True:
        res = store.put_message(message(seq, queue_id=seq % 3, size=50 + seq % 500))
        assert res.durable is not None and res.durable.result(timeout=30)
        sys.stdout.write(f"{seq} {res.wrote_offset}\n")
        sys.stdout.flush()
        seq += 1


if __name__ == "__main__":
    main()
