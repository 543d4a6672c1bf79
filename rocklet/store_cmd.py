"""``rocklet store check``: check a stopped broker's store files, offline.

The parser is built here without loading the store package; :func:`run_store` loads
it when the command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO

if TYPE_CHECKING:
    from rocklet.store.config import StoreConfig

__all__ = ["add_store_parser", "run_store"]

#: Exit status: nothing wrong, problems found, cannot check (arguments, store in use).
EXIT_CLEAN: Final = 0
EXIT_PROBLEMS: Final = 1
EXIT_USAGE: Final = 2

_CHECK_HELP: Final = """\
Check every file of a store the way a broker's recovery does, without changing any:
commitlog records (magic, size, body CRC, offsets, segment ends), segment names, sizes
and continuity, consume queues against the commitlog (both ways, tags codes included),
index files, the checkpoint, and the JSON files under config/.

Give the broker's configuration with -c so file sizes are the ones it uses (without
it they are guessed from the files, and index files are checked only if they have the
default size). The store must not be in use: while a broker runs, ask it instead with
  rocklet admin storeCheck -b HOST:PORT

Examples:
  rocklet store check --data-dir ./data
  rocklet store check -c conf/broker.conf --json

Exit status: 0 no problems (warnings allowed), 1 problems found, 2 cannot check (bad
arguments or configuration, no store there, or a broker holds it)."""


def add_store_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``store`` and its commands to the ``rocklet`` parser.

    Args:
        sub: The ``rocklet`` parser's subcommands.
    """
    store = sub.add_parser("store", help="check a stopped broker's store files")
    commands = store.add_subparsers(dest="store_command", required=True, metavar="COMMAND")
    check = commands.add_parser(
        "check",
        help="check every file of a store, offline (exit 1 when problems are found)",
        description=_CHECK_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument(
        "--data-dir",
        type=Path,
        help="the store root (default: the config's storePathRootDir, else ./data)",
    )
    check.add_argument(
        "-c", "--config", type=Path, help="the broker.conf the store was written with"
    )
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument(
        "--force",
        action="store_true",
        help="check even while a broker holds the store (its newest bytes may be "
        "reported as a torn tail)",
    )


def _most_common_size(paths: list[Path]) -> int | None:
    sizes = Counter(p.stat().st_size for p in paths if p.name.isdigit() and p.is_file())
    return sizes.most_common(1)[0][0] if sizes else None


def _index_geometry(path: Path) -> tuple[int, int] | None:
    """(hash slots, max entries) an index file was written with, if it can be told.

    Its size is ``40 + 4 * slots + 20 * entries``; the right split is the one where the
    newest entry heads its slot's chain (each key goes first in its slot). RocketMQ's
    default is 1 slot to 4 entries, tried first.
    """
    data = path.read_bytes()
    room = len(data) - 40
    count = int.from_bytes(data[36:40], "big")
    if room <= 0 or room % 4 or count < 2:
        return None

    def fits(slots: int) -> bool:
        entries = (room - 4 * slots) // 20
        if slots <= 0 or entries < count or 4 * slots + 20 * entries != room:
            return False
        at = 40 + 4 * slots + (count - 1) * 20
        key_hash = int.from_bytes(data[at : at + 4], "big", signed=True)
        slot = 40 + 4 * (key_hash % slots)
        return key_hash >= 0 and int.from_bytes(data[slot : slot + 4], "big") == count - 1

    if room % 84 == 0 and fits(room // 84):
        return room // 84, room // 84 * 4
    candidates = range(room // 4, 0, -5) if room // 4 <= 500_000 else range(0)
    for slots in candidates:
        if fits(slots):
            return slots, (room - 4 * slots) // 20
    return None


def _guessed_config(root: Path) -> StoreConfig:
    from rocklet.store.config import StoreConfig

    sizes: dict[str, int] = {}
    index = sorted(p for p in (root / "index").glob("*") if p.name.isdigit() and p.is_file())
    if index and (geometry := _index_geometry(index[-1])):
        sizes["index_hash_slots"], sizes["index_max_entries"] = geometry
    commitlog = root / "commitlog"
    if commitlog.is_dir() and (size := _most_common_size(list(commitlog.iterdir()))):
        sizes["commitlog_file_size_bytes"] = size
    queue_files = list((root / "consumequeue").glob("*/*/*"))
    if (size := _most_common_size(queue_files)) and size % 20 == 0:
        sizes["consume_queue_entries_per_file"] = size // 20
    try:
        return StoreConfig(root, **sizes)  # type: ignore[arg-type]
    except ValueError:
        return StoreConfig(root)  # sizes nobody configures: judge them by the defaults


def _store_config(args: argparse.Namespace) -> tuple[StoreConfig, bool]:
    if args.config is None:
        return _guessed_config(args.data_dir or Path("data")), False
    from rocklet.broker.config import load_broker_config

    overrides = {"store_path_root_dir": args.data_dir}
    config = load_broker_config(
        args.config, overrides, defaults={"store_path_root_dir": Path("data")}
    )
    return config.store_config(), True


def run_store(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run ``rocklet store check``.

    Args:
        args: Parsed arguments.
        out: Where the report goes.
        err: Where a refusal goes.

    Returns:
        The exit status.

    Raises:
        ConfigError: The configuration file cannot be read or is invalid.
    """
    from rocklet.store.check import check_store
    from rocklet.store.directory import StoreInUseError, StoreLock

    config, sizes_known = _store_config(args)
    root = config.store_path
    if not (root / "commitlog").is_dir() and not config.commitlog_dir.is_dir():
        err.write(f"rocklet store check: no store at {root} (no commitlog directory)\n")
        return EXIT_USAGE
    lock = None
    try:
        lock = StoreLock.acquire_shared(root, "rocklet store check", config.commitlog_dir)
    except StoreInUseError as exc:
        in_use = f"rocklet store check: {exc.path} is in use by {exc.who}"
        if not args.force:
            err.write(
                f"{in_use}; stop it first, or ask the running broker with "
                "'rocklet admin storeCheck -b HOST:PORT' (--force checks anyway)\n"
            )
            return EXIT_USAGE
        err.write(f"{in_use}; checking anyway (--force): its newest bytes may look torn\n")
    try:
        report = check_store(config, sizes_known=sizes_known)
    finally:
        if lock is not None:
            lock.release()
    data = report.to_json()
    if args.json:
        out.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        from rocklet.store_report import render

        out.write(render(data) + "\n")
    return EXIT_CLEAN if report.ok else EXIT_PROBLEMS
