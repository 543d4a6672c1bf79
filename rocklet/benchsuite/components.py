"""The component benchmarks of ``bench/`` (store, codecs, broker, SDK, Spark), collected.

Those scripts belong to the issues that built each component; ``rocklet bench
--components`` runs each one present in the checkout as a child process, in its short
mode, bounded in time, and keeps the markdown table rows it prints (they have no JSON
output), so one results file holds every figure of the session. They are not part of
the default run: together they take several minutes and each starts its own broker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

__all__ = ["COMPONENTS", "run_components"]

_BENCH_DIR: Final = Path(__file__).resolve().parents[2] / "bench"
_TIMEOUT_S: Final = 900.0

#: Script and arguments (the short mode of each).
COMPONENTS: Final[dict[str, list[str]]] = {
    "store": ["store_bench.py", "--mb", "32", "--sync-puts", "1000"],
    "header_codecs": ["header_codecs.py", "--seconds", "0.2"],
    "broker_cpp": ["broker_bench.py", "--quick"],
    "hotpath": ["hotpath.py", "--quick"],
    "sdk_produce": ["sdk_bench.py", "--quick"],
    "sdk_consume": ["sdk_consume_bench.py", "--quick"],
    "spark": ["spark_bench.py", "--quick"],
}


def _table_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.lstrip().startswith("|")]


def run_components(
    workdir: Path, on_step: Callable[[str, Any], None] | None = None
) -> dict[str, Any]:
    """Run every component benchmark found in ``bench/``; missing ones are skipped.

    Args:
        workdir: Their working directory (``TMPDIR`` for their scratch data).
        on_step: Progress: ``(name, None)`` before and ``(name, result)`` after each.

    Returns:
        Per name: the command, seconds, exit code, the table rows and the output's tail.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    for name, (script, *args) in COMPONENTS.items():
        path = _BENCH_DIR / script
        if not path.exists():
            continue
        if on_step is not None:
            on_step(name, None)
        began = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, str(path), *args],
                capture_output=True,
                text=True,
                timeout=_TIMEOUT_S,
                check=False,
                cwd=workdir,
                env={**os.environ, "TMPDIR": str(workdir)},
            )
            found: dict[str, Any] = {
                "returncode": done.returncode,
                "table": _table_lines(done.stdout),
                "tail": (done.stdout + done.stderr)[-1500:],
            }
        except subprocess.TimeoutExpired:
            found = {"returncode": None, "table": [], "tail": f"timed out after {_TIMEOUT_S} s"}
        found |= {"command": [script, *args], "seconds": round(time.monotonic() - began, 1)}
        results[name] = found
        if on_step is not None:
            on_step(name, found)
    return results
