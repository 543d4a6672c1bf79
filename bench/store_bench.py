"""Store benchmark (not a test): append, read, SYNC_FLUSH acks, recovery, vs. dd.

Usage: python bench/store_bench.py [--dir DIR] [--mb 64]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from store.config import FlushDiskType, StoreConfig
from store.message_store import MessageStore
from store.results import MessageToStore

SEG = 64 * 1024 * 1024


def _config(path: Path, **kw: object) -> StoreConfig:
    return StoreConfig(path, commitlog_file_size_bytes=SEG, **kw)  # type: ignore[arg-type]


def _msg(n: int, body: bytes) -> MessageToStore:
    return MessageToStore("Bench", n % 4, body, {"TAGS": "t", "KEYS": f"k{n}", "UNIQ_KEY": f"U{n}"})


def _timed(fn: Callable[[], int]) -> tuple[int, float]:
    t0 = time.perf_counter()
    n = fn()
    return n, time.perf_counter() - t0


def bench_append(root: Path, size: int, batch: int, total_mb: int) -> tuple[float, float]:
    """Records/s and MB/s appending ``size``-byte bodies, one by one or in batches."""
    count = total_mb * 1024 * 1024 // size
    body = b"x" * size
    with MessageStore.open(_config(root)) as store:

        def run() -> int:
            n = 0
            while n < count:
                if batch == 1:
                    store.put_message(_msg(n, body))
                    n += 1
                else:
                    store.put_messages([_msg(n, body) for _ in range(batch)])
                    n += batch
            return n

        n, secs = _timed(run)
    return n / secs, n * size / secs / 1e6


def bench_read(root: Path) -> float:
    """Records/s reading queue by queue (store left by a previous append run)."""
    with MessageStore.open(_config(root)) as store:

        def run() -> int:
            n = 0
            for q in range(4):
                off = 0
                while True:
                    got = store.get_messages("Bench", q, off, 32, 1 << 30)
                    if not got.buffers:
                        break
                    n += len(got.buffers)
                    off = got.next_begin_offset
            return n

        n, secs = _timed(run)
    return n / secs


def bench_sync(root: Path, writers: int, per_writer: int) -> float:
    """Acknowledged puts/s under SYNC_FLUSH with ``writers`` threads."""
    body = b"y" * 1024
    with MessageStore.open(_config(root, flush_disk_type=FlushDiskType.SYNC_FLUSH)) as store:

        def work() -> None:
            for n in range(per_writer):
                res = store.put_message(_msg(n, body))
                assert res.durable is not None
                res.durable.result()

        def run() -> int:
            threads = [threading.Thread(target=work) for _ in range(writers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return writers * per_writer

        n, secs = _timed(run)
    return n / secs


def bench_recovery(root: Path) -> tuple[float, float]:
    """Seconds per GB for clean and crash (abort marker) recovery of ``root``."""
    size = sum(p.stat().st_blocks * 512 for p in (root / "commitlog").iterdir())
    with MessageStore.open(_config(root)) as store:
        clean_ms = store.recovery_report.elapsed_ms
    (root / "abort").touch()
    (root / "checkpoint").write_bytes(bytes(4096))  # force a scan from the first segment
    t0 = time.perf_counter()
    with MessageStore.open(_config(root)):
        crash_s = time.perf_counter() - t0
    gb = size / 1e9
    return clean_ms / 1000 / gb, crash_s / gb


def bench_dd(directory: Path) -> float:
    """MB/s of ``dd bs=1M count=256 conv=fdatasync`` in the same directory."""
    target = directory / "dd.out"
    t0 = time.perf_counter()
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={target}", "bs=1M", "count=256", "conv=fdatasync"],
        check=True,
        capture_output=True,
    )
    secs = time.perf_counter() - t0
    target.unlink()
    return 256 * 1024 * 1024 / secs / 1e6


def main() -> None:
    """Run every benchmark and print a table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--mb", type=int, default=64, help="MB appended per append run")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(dir=args.dir))
    rows: list[tuple[str, str]] = []
    try:
        dd = bench_dd(base)
        rows.append(("dd bs=1M count=256 conv=fdatasync", f"{dd:,.0f} MB/s"))
        for size in (100, 1024, 16 * 1024):
            for batch in (1, 64):
                d = base / f"a{size}-{batch}"
                rps, mbs = bench_append(d, size, batch, args.mb)
                label = f"append {size} B, {'single' if batch == 1 else 'batch 64'}"
                rows.append((label, f"{rps:,.0f} rec/s  {mbs:,.1f} MB/s  ({mbs / dd:.0%} of dd)"))
                if size == 1024 and batch == 64:
                    rows.append(("read by queue (1 KiB records)", f"{bench_read(d):,.0f} rec/s"))
                    clean, crash = bench_recovery(d)
                    rows.append(("recovery clean / crash", f"{clean:.2f} s/GB / {crash:.2f} s/GB"))
                shutil.rmtree(d)
        for writers in (1, 64):
            acks = bench_sync(base / f"s{writers}", writers, max(1, 2000 // writers))
            rows.append((f"SYNC_FLUSH acks, {writers} writer(s)", f"{acks:,.0f} acks/s"))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    width = max(len(r[0]) for r in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")


if __name__ == "__main__":
    main()
