"""The README's two commands: `make run` installs only the runtime, `make test` the rest.

The install is real (a fresh virtual environment in a tmp dir, the Makefile's own
recipe); starting the server is checked from the recipe, since `make run` runs until
Ctrl-C (tests/test_cli.py starts the same command for real).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKE = shutil.which("make")


def _make(*args: str, venv: Path) -> subprocess.CompletedProcess[str]:
    assert MAKE is not None, "make is part of the README's set-up"
    return subprocess.run(
        [
            MAKE,
            "--no-print-directory",
            "-C",
            str(ROOT),
            f"VENV={venv}",
            f"PYTHON={sys.executable}",
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_make_run_starts_standalone_on_loopback(tmp_path: Path) -> None:
    plan = _make("-n", "run", venv=tmp_path / "venv")
    assert plan.returncode == 0, plan.stderr
    assert "rocklet standalone --data-dir ./data --host 127.0.0.1" in plan.stdout
    assert "[dev]" not in plan.stdout  # no test tools for someone who only runs it
    assert "apt-get" not in plan.stdout


def test_make_test_installs_the_test_tools_then_lints_and_tests(tmp_path: Path) -> None:
    plan = _make("-n", "test", venv=tmp_path / "venv")
    assert plan.returncode == 0, plan.stderr
    steps = plan.stdout
    assert steps.index("-e '.[dev]'") < steps.index("ruff check") < steps.index("-m pytest")
    assert "tools/typecheck.py" in steps


def test_make_bench_vs_rocketmq_runs_the_command_on_the_given_release(tmp_path: Path) -> None:
    plan = _make(
        "-n", "bench-vs-rocketmq", "ROCKETMQ_HOME=/opt/rmq", "VS_ROCKETMQ_ARGS=--pairs 3",
        venv=tmp_path / "venv",
    )  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert 'rocklet bench vs-rocketmq --rocketmq-home "/opt/rmq" --pairs 3' in plan.stdout
    refused = _make("-n", "bench-vs-rocketmq", "ROCKETMQ_HOME=", venv=tmp_path / "venv")
    assert refused.returncode != 0 and "give ROCKETMQ_HOME" in refused.stderr


@pytest.mark.slow
def test_make_install_puts_only_the_runtime_in_a_fresh_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    done = _make("install", venv=venv)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "==> installing rocklet and its runtime dependencies" in done.stdout  # progress
    listed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert {"rocklet", "msgpack", "structlog", "sortedcontainers"} <= names
    assert not names & {"pytest", "pyspark", "ruff", "mypy", "rocketmq", "prometheus-client"}
    version = subprocess.run(
        [str(venv / "bin" / "rocklet"), "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.startswith("rocklet ")
    # The normal install builds the compiled codecs (a C compiler is on every machine we
    # test on); without one the install still works and this would say "pure Python".
    assert "codecs: compiled" in version.stdout, version.stdout
