"""``rocklet bench --smoke``: the whole suite with tiny counts, Rocklet and the limits only.

The real command in a child process (a real broker on loopback, real worker processes,
real dd and fdatasync), then the files it leaves: results, report and chart. The peers
are not needed here; ``make bench`` runs them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rocklet.benchsuite.summary import summarise

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run_smoke(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "out"
    work = tmp_path / "work"
    work.mkdir()
    argv = [sys.executable, "-m", "rocklet", "bench", "--smoke", "--systems", "rocklet"]
    argv += ["--out", str(out), "--work-dir", str(work), "--chart", str(tmp_path / "c.png")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    return done, out


def _case(run: dict[str, Any], key: str) -> dict[str, Any]:
    result: dict[str, Any] = run["cases"][key]
    assert result["ok"], (key, result.get("error"))
    return result


def test_smoke_run_measures_rocklet_and_the_limits(tmp_path: Path) -> None:
    done, out = _run_smoke(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads((out / "results.json").read_text())
    assert document["profile"] == "smoke"
    assert [run["index"] for run in document["runs"]] == [1]
    run = document["runs"][0]
    # The record names the interpreter's binary: builds of one version differ in speed.
    python = document["machine"]["interpreter"]
    assert python["executable"] == os.path.realpath(sys.executable)
    assert python["version"] == document["machine"]["python"]

    # Every planned case ran, and each one's figures add up.
    keys = {case["key"] for case in document["plan"]}
    assert keys == set(run["cases"])
    produced = _case(run, "rocklet/produce/batch/1024")
    assert produced["messages"] == 2000
    assert produced["rate"] > 0
    assert produced["latency_ms"]["p50"] <= produced["latency_ms"]["p99"]
    consumed = _case(run, "rocklet/consume/main/1024")
    assert consumed["messages"] >= consumed["expected"] == 2000
    pulled = _case(run, "rocklet/consume/pull/1024")
    assert pulled["messages"] == 2001  # the backlog read to its end: 2000 + the warm-up
    e2e = _case(run, "rocklet/e2e/e2e/1024")
    assert e2e["received"] == e2e["messages"] > 0
    assert 0 < e2e["latency_ms"]["p50"] <= e2e["latency_ms"]["p999"]
    # The machine's stalls beside it, from the runner's hiccup meter, and the steal.
    assert set(e2e["hiccups"]) == {"max_ms", "stalls", "stalled_ms", "realtime"}
    assert e2e["hiccups"]["stalls"] == 0 or e2e["hiccups"]["stalled_ms"] >= e2e["hiccups"]["max_ms"]
    assert e2e["window_cpu"]["steal_cores"] >= 0.0
    assert "hiccups" not in produced  # throughput cases run without the meter
    tagged = _case(run, "rocklet/produce/tags/1024")
    only_a = _case(run, "rocklet/consume/tagA/1024")
    assert only_a["messages"] >= tagged["tag_counts"]["TagA"] == only_a["expected"]
    assert only_a["messages"] < tagged["messages"]  # the broker filtered the other tags
    many = _case(run, "rocklet/produce/2procs/1024")
    assert many["processes"] == 2
    assert _case(run, "rocklet/consume/2procs/1024")["messages"] == many["messages"] + 2
    assert produced["cpu"]["server_cpu_s"] > 0  # the broker's own process group
    for result in run["cases"].values():
        assert result["window_cpu"]["client_cpu_s"] > 0

    # Every limit was measured.
    limits = run["limits"]
    assert all("error" not in found for found in limits.values()), limits
    assert limits["dd_fdatasync"]["mb_s"] > 0
    assert limits["fdatasync_append_1024"]["appends"] > 0
    assert limits["loopback"]["gbit_s"] > 0
    assert limits["echo_frame_1024"]["frames"] > 0
    assert limits["echo_batch_100"]["frames"] > 0

    # The summary, the report and the chart.
    goals = {goal["goal"]: goal for goal in document["summary"]["goals"]}
    assert goals["produce"]["met"] is None  # no peer ran: nothing to compare with
    assert goals["batch_vs_dd"]["measured"]["median"] > 0
    report = (out / "report.md").read_text()
    assert "## Goals" in report
    assert f"(`{python['executable']}`, {python['compiler']}, built " in report
    assert "| Rocklet SDK |" in report
    assert "/s machine stall max ms |" in report
    assert (out / "benchmarks.png").read_bytes().startswith(PNG_MAGIC)
    assert (tmp_path / "c.png").read_bytes() == (out / "benchmarks.png").read_bytes()
    assert list((tmp_path / "work").iterdir()) == []  # data directories removed


def _result(rate: float, other: float) -> dict[str, Any]:
    cpu = {"server_cpu_s": 1.0, "client_cpu_s": 1.0, "other_cores": other}
    return {"ok": True, "messages": 1000, "rate": rate, "cpu": cpu}


def test_summary_uses_clean_runs_and_per_run_ratios() -> None:
    plan = [
        {"key": "rocklet/produce/batch/1024", "system": "rocklet", "peer": False},
        {"key": "redis/produce/batch/1024", "system": "redis", "peer": True},
        {"key": "nats/produce/batch/1024", "system": "nats", "peer": True},
    ]

    def run(index: int, ours: float, redis: float, nats: float, other: float) -> dict[str, Any]:
        cases = {
            "rocklet/produce/batch/1024": _result(ours, other),
            "redis/produce/batch/1024": _result(redis, other),
            "nats/produce/batch/1024": _result(nats, other),
        }
        return {"index": index, "cases": cases, "limits": {"dd_fdatasync": {"mb_s": 100.0}}}

    document = {
        "plan": plan,
        # Run 2 is disturbed (a core of other load) and must not count.
        "runs": [
            run(1, 200.0, 100.0, 50.0, 0.1),
            run(2, 10.0, 100.0, 50.0, 1.0),
            run(3, 300.0, 100.0, 200.0, 0.2),
        ],
    }
    summary = summarise(document)
    assert summary["clean_runs"] == [1, 3]
    assert not summary["disturbed"]
    produce = next(g for g in summary["goals"] if g["goal"] == "produce")
    # Per run: 200/100 = 2.0 and 300/200 = 1.5; median 1.75 (not 250/150).
    assert produce["measured"]["median"] == 1.75
    assert produce["met"] is True
    assert summary["cases"]["rocklet/produce/batch/1024"]["rate"]["median"] == 250.0
    dd = next(g for g in summary["goals"] if g["goal"] == "batch_vs_dd")
    assert dd["measured"]["median"] == pytest.approx(250.0 * 1024 / 1e6 / 100.0)
    assert dd["met"] is False


def test_tls_bench_runs_both_modes_and_sums_up() -> None:
    script = Path(__file__).resolve().parents[1] / "bench" / "tls_bench.py"
    argv = [sys.executable, str(script), "--rounds", "1", "--single", "300", "--batched", "1280"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    table = done.stdout.split("| case |", 1)[1]
    # One row per case, each with plain and TLS figures.
    assert table.count("\n| ") == 3
    assert "pull consumer" in done.stdout and " TLS " in done.stdout


def test_e2e_seconds_sets_the_latency_case_length(tmp_path: Path) -> None:
    """``--e2e-seconds`` replaces the profile's length of the end-to-end case only."""
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "rocklet", "bench", "--smoke", "--systems", "rocklet"]
    argv += ["--cases", "rocklet/e2e/e2e/1024", "--e2e-seconds", "1.5", "--no-chart"]
    argv += ["--out", str(out), "--work-dir", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((out / "results.json").read_text())["runs"][0]
    assert set(run["cases"]) == {"rocklet/e2e/e2e/1024"}
    e2e = _case(run, "rocklet/e2e/e2e/1024")
    assert 1.4 <= e2e["seconds"] <= 2.0  # the smoke profile's own is 0.5
    bad = subprocess.run(
        [*argv[:5], "--e2e-seconds", "0"], capture_output=True, text=True, timeout=60, check=False
    )
    assert bad.returncode == 2 and "--e2e-seconds" in bad.stderr
