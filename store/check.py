"""Checking a store's files, read-only, by the rules recovery applies, over all of them.

Recovery trusts most of a cleanly stopped store (it scans the last three segments), so
damage elsewhere shows only when a read meets it. :func:`check_store` reads everything:

- commitlog: segment names, sizes and continuity; every record whole (magic, lengths,
  body CRC) at the offset it names, queue offsets ascending, sealed segments ending with
  their blank; damage and a torn tail told apart as recovery does;
- consume queues: file names, sizes and continuity; every entry pointing at its record
  (size, topic, queue, queue offset) and every record's entry holding its offset, size
  and tags code; nothing but zeros after a queue's end;
- index files: size, header, hash slots, and every entry pointing at a record with a
  key of its hash;
- the checkpoint (one 4 KiB page whose times are not past the newest record) and the
  JSON files under ``config/`` (each, or its ``.bak``, parses).

``rocklet store check`` runs it on a stopped store; a broker runs it on its own store
for the admin request ``ROCKLET_STORE_CHECK`` with :func:`live_limits`: the write
positions taken under the store lock, below which a live store's files do not change,
so the check itself runs without the lock and writers go on. Findings are problems
(what a broker refuses, loses or would serve wrong) or warnings (stray files, what
crash recovery repairs after a crash).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rocklet.protocol import fastjson
from rocklet.store._check_index import check_index
from rocklet.store._check_io import PROBLEM, WARNING, CheckContext, Finding, LiveLimits, MapCache
from rocklet.store._check_log import check_commitlog
from rocklet.store._check_queues import QueueFiles, check_queues
from rocklet.store._checkpoint import CHECKPOINT_SIZE
from rocklet.store.config import StoreConfig
from rocklet.store.config_files import shape_error
from rocklet.store.message_store import MessageStore

__all__ = [
    "SUMMARY_KEYS",
    "Finding",
    "LiveLimits",
    "StoreCheckReport",
    "check_store",
    "live_limits",
]

_CHECKPOINT = struct.Struct(">qqq")
#: Figures every report carries, in the order a table shows them.
SUMMARY_KEYS: Final = (
    "segments",
    "records",
    "record_bytes",
    "damaged_ranges",
    "damaged_bytes",
    "torn_tail_bytes",
    "queues",
    "entries",
    "blank_entries",
    "entries_damaged",
    "records_without_entry",
    "dropped_queue_records",
    "index_files",
    "index_entries",
    "index_entries_bad",
    "index_entries_damaged",
    "config_files",
    "ignored_files",
)


@dataclass(slots=True)
class StoreCheckReport:
    """What :func:`check_store` found.

    Attributes:
        store: The store root.
        live: Checked on a running broker (below the write positions at the start).
        clean_stop: Offline: whether the last run stopped cleanly (no abort marker).
        summary: Figures (:data:`SUMMARY_KEYS`).
        findings: Problems and warnings, in the order found.
    """

    store: str
    live: bool
    clean_stop: bool | None
    summary: dict[str, int]
    findings: list[Finding] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        """Findings of severity problem."""
        return [f for f in self.findings if f.severity == PROBLEM]

    @property
    def ok(self) -> bool:
        """No problems (warnings allowed)."""
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """The report as JSON values (the admin request's body, ``--json`` output)."""
        return {
            "store": self.store,
            "live": self.live,
            "cleanStop": self.clean_stop,
            "ok": self.ok,
            "problems": len(self.problems),
            "warnings": len(self.findings) - len(self.problems),
            "summary": self.summary,
            "findings": [
                {
                    "severity": f.severity,
                    "area": f.area,
                    "path": f.path,
                    "offset": f.offset,
                    "message": f.message,
                }
                for f in self.findings
            ],
        }


def live_limits(store: MessageStore) -> LiveLimits:
    """A running store's write positions, read under its lock (briefly).

    Args:
        store: The open store.

    Returns:
        The limits for :func:`check_store`.
    """
    with store.lock:
        return LiveLimits(
            commitlog_min=store.commitlog.min_offset(),
            commitlog_end=store.commitlog.max_offset(),
            queue_ends={key: cq.files.max_offset() for key, cq in store.queues.items()},
            index_counts={f.path.name: f.index_count for f in store.index.files},
        )


def check_store(
    config: StoreConfig, *, live: LiveLimits | None = None, sizes_known: bool = True
) -> StoreCheckReport:
    """Check every file of a store. Reads only; runs in the caller's thread.

    Args:
        config: The store's paths and file sizes.
        live: The limits of a running store (:func:`live_limits`), or None for a
            stopped one.
        sizes_known: The sizes in ``config`` are the broker's settings; when they are
            guesses, a file of another size is a warning, not a problem.

    Returns:
        The report.
    """
    root = config.store_path
    crashed = (root / "abort").exists()
    ctx = CheckContext(config, live, crashed, sizes_known)
    log_maps, queue_maps, index_maps = MapCache(4), MapCache(16), MapCache(2)
    try:
        queues = QueueFiles(ctx, queue_maps)
        check_commitlog(ctx, log_maps, queues)
        check_queues(ctx, queues, queue_maps, log_maps)
        check_index(ctx, index_maps, log_maps)
    finally:
        for cache in (log_maps, queue_maps, index_maps):
            cache.close()
    _check_checkpoint(ctx)
    _check_config(ctx)
    if crashed and live is None:
        message = "the last run did not stop cleanly: a start runs crash recovery"
        ctx.add(WARNING, "directory", root / "abort", None, message)
    ctx.close()
    summary = {key: ctx.counts.get(key, 0) for key in SUMMARY_KEYS}
    clean_stop = None if live is not None else not crashed
    return StoreCheckReport(str(root), live is not None, clean_stop, summary, ctx.findings)


def _check_checkpoint(ctx: CheckContext) -> None:
    path = ctx.root / "checkpoint"
    if not path.exists():
        return
    data = path.read_bytes()
    if len(data) != CHECKPOINT_SIZE:
        message = f"{len(data)} bytes, not one {CHECKPOINT_SIZE}-byte page"
        ctx.add(PROBLEM, "checkpoint", path, None, message)
        return
    names = ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp")
    for name, value in zip(names, _CHECKPOINT.unpack_from(data), strict=True):
        # The times of the newest flushed record of each kind: none can be newer than
        # the newest record, unless flushed records were lost.
        if value < 0 or (ctx.live is None and value > ctx.newest_store_ts):
            ctx.add(
                PROBLEM,
                "checkpoint",
                path,
                None,
                f"{name} is {value}, but the newest record is from {ctx.newest_store_ts}: "
                "records the checkpoint says were flushed are missing",
            )


def _check_config(ctx: CheckContext) -> None:
    directory = ctx.root / "config"
    if not directory.is_dir():
        return
    names = {p.name.removesuffix(".bak") for p in directory.iterdir() if p.is_file()}
    for name in sorted(n for n in names if n.endswith(".json")):
        path = directory / name
        main, backup = _parses(path), _parses(path.with_name(name + ".bak"))
        ctx.count("config_files")
        if isinstance(main, str) and backup is True:
            message = f"{main}; a broker reads {name}.bak instead"
            ctx.add(WARNING, "config", path, None, message)
        elif isinstance(main, str) or (main is None and isinstance(backup, str)):
            whose = "its .bak neither" if backup is not None else "there is no .bak"
            message = (
                f"{main if isinstance(main, str) else 'empty'}, and {whose}: a broker "
                "refuses to start; repair it or restore it from a backup"
            )
            ctx.add(PROBLEM, "config", path, None, message)
        elif isinstance(backup, str):
            ctx.add(WARNING, "config", path.with_name(name + ".bak"), None, backup)


def _parses(path: Path) -> bool | str | None:
    """True if the file is what the broker reads, None if missing or empty, else why not."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        return "not UTF-8 text"
    if not text.strip():
        return None
    try:
        obj = fastjson.loads(text)
    except ValueError:
        return "does not parse"
    problem = shape_error(path.name.removesuffix(".bak"), obj)
    return True if problem is None else f"not what a broker reads ({problem})"
