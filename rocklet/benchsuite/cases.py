"""Running one case: its child processes, their output, and the CPU around them.

A case is one or more worker processes (or the C++ driver) started together against a
running server. The CPU the server's process group, the children and everything else
used meanwhile is measured around them (:class:`~rocklet.benchsuite.measure.CpuWindow`).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from rocklet.benchsuite.measure import CpuWindow, HiccupMeter
from rocklet.benchsuite.peers.rocklet import QUEUES
from rocklet.benchsuite.plan import Case

__all__ = [
    "CPP_DRIVER",
    "CaseError",
    "backlog_count",
    "cpp_argv",
    "parse_cpp_output",
    "run_case",
    "run_children",
    "worker_argv",
    "worker_result",
]

#: The official C++ client's driver (a test helper of this repository).
CPP_DRIVER: Final = Path(__file__).resolve().parents[2] / "tests" / "compat" / "cpp_driver.py"


class CaseError(RuntimeError):
    """A case's child failed or timed out (the message says how)."""


def backlog_count(case: Case, source: Mapping[str, Any] | None) -> int:
    """How many messages a consume case expects, from its producer's result (0 = unknown)."""
    if source is None or not source.get("ok"):
        return 0
    if case.tag is not None:
        return int(source.get("tag_counts", {}).get(case.tag, 0))
    return int(source.get("messages", 0))


def _worker_jobs(
    case: Case, address: Mapping[str, Any], pgid: int | None, count: int
) -> list[dict[str, Any]]:
    jobs = []
    for index in range(case.processes):
        job = dict(case.job) | {"address": dict(address), "server_pgid": pgid}
        args = dict(job.get("args", {}))
        if case.kind == "consume" and case.processes > 1:
            # N consumers: each reads a fixed share of the queues to its end.
            args["queues"] = [q for q in range(QUEUES) if q % case.processes == index]
        elif case.kind == "consume":
            args["count"] = count
        if case.tag is not None:
            args["tag"] = case.tag
        job["args"] = args
        jobs.append(job)
    return jobs


def cpp_argv(job: Mapping[str, Any], namesrv: str) -> list[str]:
    """The command line running the C++ driver for one job, quietly (no per-message lines).

    Args:
        job: The driver's command (``op`` and its fields, see ``cpp_driver.py``).
        namesrv: The name server's ``host:port``.

    Returns:
        The argv (this interpreter, the driver, the JSON command).
    """
    command = dict(job) | {"namesrv": namesrv, "quiet": True}
    return [sys.executable, str(CPP_DRIVER), json.dumps(command)]


def _cpp_job(case: Case, count: int) -> dict[str, Any]:
    job = dict(case.job)
    if job["op"] == "push":
        job |= {"expect_count": count, "timeout_s": case.timeout_s / 2}
    return job


def _argv(case: Case, address: Mapping[str, Any], pgid: int | None, count: int) -> list[list[str]]:
    if case.system == "rocklet-cpp":
        return [cpp_argv(_cpp_job(case, count), address["namesrv"])]
    return [worker_argv(job) for job in _worker_jobs(case, address, pgid, count)]


def worker_argv(job: Mapping[str, Any]) -> list[str]:
    """The command line running one job in a worker (:mod:`rocklet.benchsuite.worker`)."""
    return [sys.executable, "-m", "rocklet.benchsuite.worker", json.dumps(job)]


def run_children(argvs: Sequence[list[str]], home: Path, timeout_s: float) -> list[str]:
    """Start every child at once, with ``$HOME`` at ``home``; their stdouts, in order.

    Raises:
        CaseError: A child printed nothing, or they did not all end within ``timeout_s``.
    """
    env = {**os.environ, "HOME": str(home)}  # the C++ client logs under $HOME
    children = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for argv in argvs
    ]
    outputs: list[str] = []
    try:
        for child in children:
            out, err = child.communicate(timeout=timeout_s)
            if not out.strip():
                raise CaseError(f"no output (exit {child.returncode}): {err[-1500:]}")
            outputs.append(out)
    except subprocess.TimeoutExpired:
        raise CaseError(f"timed out after {timeout_s:.0f} s") from None
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate()
    return outputs


def worker_result(output: str) -> dict[str, Any]:
    """A worker's result, from the last line it printed.

    Raises:
        CaseError: The worker reported a failure.
    """
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    if not result.get("ok"):
        raise CaseError(f"{result.get('error')}\n{result.get('trace', '')}")
    return result


def parse_cpp_output(output: str) -> dict[str, Any]:
    """The C++ driver's summary as a case result: messages, seconds, rate, latencies.

    Raises:
        CaseError: The driver reported a fatal error or no summary.
    """
    events = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    done = next((e for e in events if e.get("event") in ("done", "fatal")), None)
    if done is None or done["event"] != "done":
        raise CaseError(f"C++ driver failed: {done}")
    messages = int(done.get("sent", done.get("consumed", 0)))
    seconds = float(done["seconds"])
    result: dict[str, Any] = {
        "ok": True,
        "messages": messages,
        "seconds": seconds,
        "rate": round(messages / seconds, 1) if seconds else 0.0,
    }
    if "p50_ms" in done:
        # The driver reports p50 and p99 of its send_sync calls, not p99.9.
        result["latency_ms"] = {"count": messages, "p50": done["p50_ms"], "p99": done["p99_ms"]}
    if done.get("errors"):
        result["errors"] = done["errors"]
        result["error_samples"] = done.get("error_samples", [])
    return result


def _merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One result from several processes: their total over the union of their windows."""
    if len(parts) == 1:
        return parts[0]
    messages = sum(int(p["messages"]) for p in parts)
    began, ended = min(p["began"] for p in parts), max(p["ended"] for p in parts)
    seconds = max(ended - began, 1e-9)
    merged: dict[str, Any] = {"ok": True, "messages": messages, "seconds": round(seconds, 4)}
    merged |= {"rate": round(messages / seconds, 1), "processes": len(parts)}
    windows = [p["window_cpu"] for p in parts if "window_cpu" in p]
    if windows:  # overlapping windows: the server's and the others' CPU do not add up
        merged["window_cpu"] = {
            "wall_s": round(seconds, 3),
            "client_cpu_s": round(sum(w["client_cpu_s"] for w in windows), 3),
            "server_cpu_s": max(w["server_cpu_s"] for w in windows),
            "other_cores": max(w["other_cores"] for w in windows),
        }
    latencies = [p["latency_ms"] for p in parts if p.get("latency_ms")]
    if latencies:  # percentiles do not add up: report the worst process's
        merged["latency_ms"] = {
            k: max(lat[k] for lat in latencies) for k in ("p50", "p99", "p999")
        } | {"count": sum(lat["count"] for lat in latencies), "worst_process": True}
    return merged


def run_case(
    case: Case,
    address: Mapping[str, Any],
    server_pgid: int | None,
    home: Path,
    source: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``case`` against a started server and return its result with CPU figures.

    Args:
        case: The case.
        address: The server's address mapping.
        server_pgid: The server's process group (CPU accounting).
        home: ``$HOME`` for the children (the C++ client writes its logs there).
        source: The result of the case that produced this consume case's backlog.

    Raises:
        CaseError: A child failed, printed nothing, or timed out.
    """
    count = backlog_count(case, source)
    if case.kind == "consume" and case.tag is not None and count == 0:
        raise CaseError("the producer reported no message with this tag")
    argvs = _argv(case, address, server_pgid, count)
    hiccups = HiccupMeter() if case.kind == "e2e" else None
    with CpuWindow(server_pgid) as cpu, hiccups or contextlib.nullcontext():
        outputs = run_children(argvs, home, case.timeout_s)
    parse = parse_cpp_output if case.system == "rocklet-cpp" else worker_result
    result = _merge([parse(out) for out in outputs])
    if hiccups is not None:
        result["hiccups"] = hiccups.summary(result.get("began"), result.get("ended"))
    if case.kind == "consume" and count:
        result["expected"] = count
    return result | {"cpu": cpu.as_dict()}
