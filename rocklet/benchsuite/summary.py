"""Medians over runs, noise, ratios and the goals, from a results document.

Runs in which other processes used more than :data:`CLEAN_OTHER_CORES` of a core
(the median over the run's cases) are *disturbed*; medians use the clean runs when
there is at least one, else every run (and say so). Ratios are computed within each
run and then their median is taken: only figures of one run are ever compared
(this machine class varies 10-20 % between runs; see BENCHMARKS.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

__all__ = [
    "CLEAN_OTHER_CORES",
    "GOALS",
    "headline",
    "metric",
    "run_ratio",
    "stat",
    "summarise",
]

#: A run whose cases saw more other load than this (cores) is disturbed.
CLEAN_OTHER_CORES: Final = 0.33
KIB: Final = 1024

Run = Mapping[str, Any]


def stat(values: Iterable[float | None]) -> dict[str, float] | None:
    """Median, min, max and spread (``(max - min) / median`` in %) of the non-None values."""
    found = [v for v in values if v is not None]
    if not found:
        return None
    median = statistics.median(found)
    spread = (max(found) - min(found)) / median * 100 if median else 0.0
    return {
        "median": median,
        "min": min(found),
        "max": max(found),
        "spread_pct": round(spread, 1),
        "n": len(found),
    }


def metric(run: Run, key: str, name: str) -> float | None:
    """One figure of a case in one run (None when the case failed).

    Names: ``rate`` (msg/s), ``p50``/``p99``/``p999`` (ms), ``server_us``/``client_us``
    (CPU µs per message), ``other_cores``, or ``stall_ms``: the machine's longest
    stall within a latency case's window (None where it was not measured).
    """
    result = run["cases"].get(key)
    if not result or not result.get("ok") or not result.get("messages"):
        return None
    if name == "rate":
        return float(result["rate"])
    if name in ("p50", "p99", "p999"):
        value = (result.get("latency_ms") or {}).get(name)
        return None if value is None else float(value)
    if name == "stall_ms":
        value = (result.get("hiccups") or {}).get("max_ms")
        return None if value is None else float(value)
    # The worker's own window when there is one (the C++ driver has only the lifetime).
    cpu = result.get("window_cpu") or result.get("cpu", {})
    if name == "other_cores":
        return float(cpu.get("other_cores", 0.0))
    if name in ("server_us", "client_us"):
        seconds = cpu.get("server_cpu_s" if name == "server_us" else "client_cpu_s", 0.0)
        return float(seconds) / int(result["messages"]) * 1e6
    raise KeyError(name)


def limit(run: Run, name: str) -> float | None:
    """A limit's headline figure in one run (MB/s, Gbit/s or per second)."""
    found = run["limits"].get(name, {})
    for key in ("mb_s", "gbit_s", "rate"):
        if key in found:
            return float(found[key])
    return None


def run_ratio(
    runs: Sequence[Run], top: Callable[[Run], float | None], bottom: Callable[[Run], float | None]
) -> dict[str, float] | None:
    """The median (and spread) over runs of ``top(run) / bottom(run)``."""
    ratios = []
    for run in runs:
        a, b = top(run), bottom(run)
        if a is not None and b:
            ratios.append(a / b)
    return stat(ratios)


def headline(system: str, kind: str, size: int = KIB) -> str:
    """The case key of a system's headline figure."""
    if system == "rocklet-cpp":
        return f"rocklet-cpp/{kind}/{'sync8' if kind == 'produce' else 'pull'}/{size}"
    variant = {"produce": "batch", "consume": "main", "e2e": "e2e"}[kind]
    return f"{system}/{kind}/{variant}/{size}"


def _peers(plan: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted({c["system"] for c in plan if c["peer"]})


def _best_peer(run: Run, peers: Sequence[str], kind: str) -> float | None:
    rates = [metric(run, headline(p, kind), "rate") for p in peers]
    found = [r for r in rates if r is not None]
    return max(found) if found else None


_PULL: Final = f"rocklet/consume/pull/{KIB}"


def _rocklet_consume(run: Run) -> float | None:
    """The SDK's best consumer in the run (push consumer or pull consumer)."""
    rates = [metric(run, k, "rate") for k in (headline("rocklet", "consume"), _PULL)]
    found = [r for r in rates if r is not None]
    return max(found) if found else None


def _mb_s(run: Run, key: str) -> float | None:
    rate = metric(run, key, "rate")
    return None if rate is None else rate * KIB / 1e6


#: (name, description, target, comparison) of each goal of issue 7.
GOALS: Final = (
    ("produce", "SDK produce ≥ 1.3 times the best peer (1 KiB)", 1.3, ">="),
    ("consume", "SDK consume ≥ 1.3 times the best peer (1 KiB)", 1.3, ">="),
    ("e2e_p99", "end-to-end p99 ≤ 1.5 ms at 5k msg/s (1 KiB)", 1.5, "<="),
    ("batch_vs_dd", "batch produce ≥ 50 % of dd's fdatasync bandwidth (1 KiB)", 0.5, ">="),
)


def _goals(runs: Sequence[Run], peers: Sequence[str]) -> list[dict[str, Any]]:
    produce = headline("rocklet", "produce")
    measured = {
        "produce": run_ratio(
            runs, lambda r: metric(r, produce, "rate"), lambda r: _best_peer(r, peers, "produce")
        ),
        "consume": run_ratio(runs, _rocklet_consume, lambda r: _best_peer(r, peers, "consume")),
        "e2e_p99": stat(metric(r, headline("rocklet", "e2e"), "p99") for r in runs),
        "batch_vs_dd": run_ratio(
            runs, lambda r: _mb_s(r, produce), lambda r: limit(r, "dd_fdatasync")
        ),
    }
    goals = []
    for name, text, target, op in GOALS:
        found = measured[name]
        value = None if found is None else found["median"]
        met = None if value is None else (value >= target if op == ">=" else value <= target)
        goals.append({"goal": name, "text": text, "target": target, "measured": found, "met": met})
    return goals


def _case_stats(runs: Sequence[Run], key: str) -> dict[str, Any]:
    names = ("rate", "p50", "p99", "p999", "server_us", "client_us", "other_cores", "stall_ms")
    found: dict[str, Any] = {n: stat(metric(r, key, n) for r in runs) for n in names}
    errors = [
        str(r["cases"][key].get("error", ""))[:300]
        for r in runs
        if key in r["cases"] and not r["cases"][key].get("ok")
    ]
    found["errors"] = errors
    return found


def _run_load(run: Run) -> float:
    loads = [
        float(c["cpu"]["other_cores"]) for c in run["cases"].values() if c.get("ok") and "cpu" in c
    ]
    return statistics.median(loads) if loads else 0.0


def summarise(document: Mapping[str, Any]) -> dict[str, Any]:
    """Medians over the clean runs (or all), noise, limits, goals and failures."""
    runs: list[Run] = document["runs"]
    load = {run["index"]: round(_run_load(run), 3) for run in runs}
    clean = [run for run in runs if load[run["index"]] <= CLEAN_OTHER_CORES]
    used = clean or runs
    keys = [c["key"] for c in document["plan"]]
    limit_names = sorted({name for run in runs for name in run["limits"]})
    return {
        "run_other_cores": load,
        "clean_runs": [run["index"] for run in clean],
        "used_runs": [run["index"] for run in used],
        "disturbed": not clean,
        "cases": {key: _case_stats(used, key) for key in keys},
        "limits": {name: stat(limit(r, name) for r in used) for name in limit_names},
        "goals": _goals(used, _peers(document["plan"])),
        "failed_cases": sorted({k for r in runs for k, c in r["cases"].items() if not c.get("ok")}),
    }
