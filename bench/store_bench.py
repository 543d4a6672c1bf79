"""Store benchmark (not a test): append, read, SYNC_FLUSH acks, recovery, vs. dd.

Usage: python bench/store_bench.py [--dir DIR] [--mb 64] [--sync-puts 2000]

Every figure is re-measured beside ``dd conv=fdatasync`` in the same directory and run,
because this machine class varies between runs (docs/benchmarks.md): compare ratios
from one run only. dd runs three times (start, middle, end); ratios use the median.
Messages are built inside the timed loops (the broker builds them too), each with its
own KEYS and UNIQ_KEY, so the index does real work. Appends run with ASYNC_FLUSH, as
the peers in docs/benchmarks.md; SYNC_FLUSH is measured separately. A full run takes
1-2 minutes on 2 cores (up to 4 under heavy load).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from rocklet.store.config import FlushDiskType, StoreConfig
from rocklet.store.message_store import MessageStore
from rocklet.store.results import MessageToStore

SEG = 64 * 1024 * 1024


def _config(path: Path, **kw: object) -> StoreConfig:
    return StoreConfig(path, commitlog_file_size_bytes=SEG, **kw)  # type: ignore[arg-type]


def _msg(n: int, body: bytes, queue_id: int) -> MessageToStore:
    # Distinct keys per message: repeated keys would all hit one index slot.
    return MessageToStore(
        "Bench", queue_id, body, {"TAGS": "t", "KEYS": f"k{n}", "UNIQ_KEY": f"U{n}"}
    )


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
                    res = store.put_message(_msg(n, body, n % 4))
                    n += 1
                else:
                    q = n // batch % 4
                    res = store.put_messages([_msg(n + i, body, q) for i in range(batch)])
                    n += batch
                if not res.ok:
                    raise RuntimeError(f"put failed: {res.status}")
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
                res = store.put_message(_msg(n, body, n % 4))
                if not res.ok or res.durable is None:
                    raise RuntimeError(f"put failed: {res.status}")
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
    parser = argparse.ArgumentParser(
        description="Benchmark the store: appends (100 B, 1 KiB, 16 KiB bodies; single and "
        "batches of 64), reads by queue, recovery and SYNC_FLUSH acks, beside dd.",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="parent of the scratch directory, on the disk to measure (default: $TMPDIR)",
    )
    parser.add_argument(
        "--mb", type=int, default=64, help="MiB of bodies appended per append run (default 64)"
    )
    parser.add_argument(
        "--sync-puts",
        type=int,
        default=2000,
        help="acknowledged puts per SYNC_FLUSH run, split over the writers (default 2000)",
    )
    args = parser.parse_args()
    # Recovery logs one line per open; keep the table readable.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    base = Path(tempfile.mkdtemp(dir=args.dir))
    rows: list[tuple[str, str | Callable[[float], str]]] = []
    dd_runs: list[float] = []
    try:
        dd_runs.append(bench_dd(base))
        for size in (100, 1024, 16 * 1024):
            for batch in (1, 64):
                d = base / f"a{size}-{batch}"
                rps, mbs = bench_append(d, size, batch, args.mb)
                label = f"append {size} B, {'single' if batch == 1 else 'batch 64'}"
                rows.append((label, _vs_dd(rps, mbs)))
                if size == 1024 and batch == 64:
                    rows.append(("read by queue (1 KiB records)", f"{bench_read(d):,.0f} rec/s"))
                    clean, crash = bench_recovery(d)
                    rows.append(("recovery clean / crash", f"{clean:.2f} s/GB / {crash:.2f} s/GB"))
                shutil.rmtree(d)
            if size == 1024:
                dd_runs.append(bench_dd(base))
        for writers in (1, 64):
            acks = bench_sync(base / f"s{writers}", writers, max(1, args.sync_puts // writers))
            rows.append((f"SYNC_FLUSH acks, {writers} writer(s)", f"{acks:,.0f} acks/s"))
        dd_runs.append(bench_dd(base))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    # One dd sample swings 2-3x on this machine class; the median of three spread over
    # the run (start, middle, end) is the reference for every ratio.
    dd = statistics.median(dd_runs)
    samples = " / ".join(f"{x:,.0f}" for x in dd_runs)
    table = [("dd bs=1M count=256 conv=fdatasync", f"{dd:,.0f} MB/s  (median of {samples})")]
    table += [(label, value if isinstance(value, str) else value(dd)) for label, value in rows]
    width = max(len(label) for label, _ in table)
    for label, text in table:
        print(f"{label:<{width}}  {text}")


def _vs_dd(rps: float, mbs: float) -> Callable[[float], str]:
    # The ratio waits for the median dd, known only at the end of the run.
    return lambda dd: f"{rps:,.0f} rec/s  {mbs:,.1f} MB/s  ({mbs / dd:.0%} of dd)"


if __name__ == "__main__":
    main()
