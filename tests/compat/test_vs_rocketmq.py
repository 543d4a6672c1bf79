"""``rocklet bench vs-rocketmq`` end to end, against a real RocketMQ 4.x release.

One short Java-tool case and two short C++-client cases (the official client, PyPI
``rocketmq``, from the dev extras), each against both systems.

The release is ``$ROCKETMQ_HOME``, else the workspace's ``/tmp/anchor/rocketmq-4.9.4``.
A release whose ``lib/`` lacks jars (that snapshot has no netty-all, bcprov or
zstd-jni) gets them from ``$ROCKETMQ_EXTRA_CLASSPATH``, else from the classpath file
the anchor's setup wrote beside it. Without a release or Java the test is skipped and
says why (``-ra`` prints it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.java.javatier import RELEASE, extra_classpath

RUN_TIMEOUT_S = 280


def _missing() -> str | None:
    if not (RELEASE / "lib").is_dir():
        return f"no RocketMQ release at {RELEASE} (set ROCKETMQ_HOME)"
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        return "no java (set JAVA_HOME or put java on PATH)"
    return None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.compat,
    pytest.mark.skipif(_missing() is not None, reason=_missing() or ""),
    pytest.mark.timeout(RUN_TIMEOUT_S + 20),
]


def vs_rocketmq(results: Path, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the command against the release, one pair; it must succeed."""
    argv = [
        sys.executable, "-m", "rocklet", "bench", "vs-rocketmq",
        "--rocketmq-home", str(RELEASE), "--extra-classpath", extra_classpath(),
        "--pairs", "1", "--json", str(results), "--work-dir", str(work), *args,
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_a_short_producer_comparison_measures_both_systems(tmp_path: Path) -> None:
    results = tmp_path / "vs.json"
    work = tmp_path / "work"
    work.mkdir()
    proc = vs_rocketmq(results, work, "--seconds", "10", "--cases", "producer16")
    assert "binds 0.0.0.0" in proc.stderr
    assert "[1/2] producer16 pair 1: starting rocklet" in proc.stderr
    assert "[2/2] producer16 pair 1: starting rocketmq" in proc.stderr

    document = json.loads(results.read_text())
    assert document["python"]["executable"] == os.path.realpath(sys.executable)
    assert f"run on Python {document['python']['version']} (" in proc.stderr
    runs = document["runs"]
    assert [r["system"] for r in runs] == ["rocklet", "rocketmq"]
    for r in runs:
        assert r["case"] == "producer16" and r["pair"] == 1
        assert r["messages"] > 1000, r  # stored in the run's topic, read back from the broker
        assert r["msgs_per_s"] and r["msgs_per_s"] > 0, r
        assert 0 < r["cpu_us_per_msg"] < 100_000, r
        assert r["peak_rss_mib"] > 10, r
    assert runs[1]["peak_rss_mib"] > 100  # a JVM with a 512 MiB heap, not the Python process

    out = proc.stdout
    assert "### Java benchmark Producer, 16 threads, 1 KiB (`producer16`)" in out
    assert out.count("| 1 | rocklet |") == 1 and out.count("| 1 | rocketmq |") == 1
    assert "| median |" in out
    assert list(work.iterdir()) == []  # stores and logs removed


def test_the_cpp_client_cases_measure_both_systems_and_the_client(tmp_path: Path) -> None:
    results = tmp_path / "vs.json"
    proc = vs_rocketmq(
        results, tmp_path, "--seconds", "3", "--warmup", "1", "--backlog", "3000",
        "--cases", "cpp1,cpppull",
    )  # fmt: skip
    assert "[1/4] cpp1 pair 1: rocklet up; 3 s of the C++ client" in proc.stderr
    assert "[4/4] cpppull pair 1: rocketmq up; writing the backlog, then 3 s" in proc.stderr

    runs = json.loads(results.read_text())["runs"]
    assert [(r["case"], r["system"]) for r in runs] == [
        ("cpp1", "rocklet"), ("cpp1", "rocketmq"), ("cpppull", "rocklet"), ("cpppull", "rocketmq"),
    ]  # fmt: skip
    for r in runs:
        assert r["messages"] > 50 and r["msgs_per_s"] > 0, r
        assert 0 < r["cpu_us_per_msg"] < 100_000, r
        assert 0 < r["client_cpu_us_per_msg"] < 100_000, r  # the driver process's CPU
    for r in runs[:2]:
        assert r["wall_s"] >= 3, r  # the driver's life: at least the run's length of sends
    for r in runs[2:]:
        # The pull reads from offset 0 in a new group: a 3,000-message backlog is drained
        # (the backlog tool writes batches of 32, so a little more is stored).
        assert r["messages"] >= 3000 and "drained" in r["notes"][0], r

    out = proc.stdout
    assert "send_sync, 1 thread sharing one producer, 1 KiB (`cpp1`)" in out
    assert "PullConsumer draining a backlog, 1 KiB (`cpppull`)" in out
    assert out.count("the busier side is") == 4 and out.count("| median |") == 2


def test_the_sdk_case_measures_the_latency_each_broker_adds(tmp_path: Path) -> None:
    results = tmp_path / "vs.json"
    proc = vs_rocketmq(results, tmp_path, "--seconds", "2", "--cases", "sdke2e")
    assert "[2/2] sdke2e pair 1: rocketmq up; 2 s of the Rocklet SDK" in proc.stderr

    runs = json.loads(results.read_text())["runs"]
    assert [r["system"] for r in runs] == ["rocklet", "rocketmq"]
    for r in runs:
        # 5,000 msg/s for the warm-up second and the 2 measured ones, every one received.
        assert r["messages"] == 15_000 and r["notes"] == [], r
        latency = r["latency_ms"]
        assert latency["count"] >= 9000, r  # the warm-up's messages are left out
        assert 0 < latency["p50"] <= latency["p99"] <= latency["p999"] < 1000, r
        assert 0 < r["cpu_us_per_msg"] < 100_000 and 0 < r["client_cpu_us_per_msg"] < 100_000, r

    out = proc.stdout
    assert "### Rocklet SDK end to end, 5,000 msg/s" in out and "(`sdke2e`)" in out
    assert out.count("| 1 | rocklet | ") == 1 and out.count("| 1 | rocketmq | ") == 1
    assert "| median |" in out and "Median rocketmq: p50 " in out
