"""The markdown report of a session: the tables ``BENCHMARKS.md`` quotes.

Every figure is the median over the runs used (see :mod:`rocklet.benchsuite.summary`),
with its spread where it matters; ratios are medians of per-run ratios.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from rocklet.benchsuite.summary import KIB, headline, limit, metric, run_ratio, summarise

__all__ = ["render_markdown", "summarise"]

_LIMITS: Final = (
    ("dd_fdatasync", "dd 1 MiB blocks, conv=fdatasync", "MB/s"),
    ("dd_direct", "dd 1 MiB blocks, oflag=direct", "MB/s"),
    ("fdatasync_append_100", "append 100 B + fdatasync, one writer", "appends/s"),
    ("fdatasync_append_1024", "append 1 KiB + fdatasync, one writer", "appends/s"),
    ("loopback", "loopback TCP, one stream", "Gbit/s"),
    ("echo_frame_100", "uvloop echo, one write per frame, 100 B", "frames/s"),
    ("echo_frame_1024", "uvloop echo, one write per frame, 1 KiB", "frames/s"),
    ("echo_batch_100", "uvloop echo, one write per read, 100 B", "frames/s"),
    ("echo_batch_1024", "uvloop echo, one write per read, 1 KiB", "frames/s"),
)
_SIZES: Final = {100: "100 B", 1024: "1 KiB", 16384: "16 KiB"}

Run = Mapping[str, Any]


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _med(found: Mapping[str, float] | None, digits: int = 0) -> str:
    return "-" if found is None else _num(found["median"], digits)


def _spread(found: Mapping[str, float] | None) -> str:
    return "" if found is None or found["n"] < 2 else f" ±{found['spread_pct'] / 2:.0f}%"


def _ratio(found: Mapping[str, float] | None) -> str:
    return "-" if found is None else f"{found['median']:.2f}x"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _systems(document: Mapping[str, Any]) -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for case in document["plan"]:
        seen.setdefault(case["system"], case["title"])
    return list(seen.items())


def _interpreter(machine: Mapping[str, Any]) -> str:
    """`` (binary, compiler, build date)``; empty for a record from before it was kept."""
    found = machine.get("interpreter")
    if not found:
        return ""
    return f" (`{found['executable']}`, {found['compiler']}, built {found['built']})"


def _session(document: Mapping[str, Any], summary: Mapping[str, Any]) -> list[str]:
    m = document["machine"]
    loads = ", ".join(f"run {k}: {v:.2f}" for k, v in summary["run_other_cores"].items())
    used = ", ".join(str(i) for i in summary["used_runs"])
    lines = [
        f"- Machine: {m['cpus']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB, "
        f"Linux {m['kernel']}, Python {m['python']}{_interpreter(m)}; tree {m['revision']}.",
        f"- Command: `{document['command']}` (profile {document['profile']}), "
        f"started {document['runs'][0]['started'] if document['runs'] else '?'}.",
        f"- Other load (median cores used by other processes during the cases): {loads}. "
        f"Medians below are over run(s) {used}"
        + (
            " — every run was disturbed, so the figures are pessimistic."
            if summary["disturbed"]
            else "."
        ),
    ]
    for system, why in document.get("skipped", {}).items():
        lines.append(f"- Skipped {system}: {why}.")
    return lines


def _limits_table(summary: Mapping[str, Any]) -> list[str]:
    rows = []
    for name, text, unit in _LIMITS:
        found = summary["limits"].get(name)
        if found is not None:
            digits = 1 if unit == "Gbit/s" else 0
            rows.append([text, f"{_med(found, digits)} {unit}{_spread(found)}"])
    return _table(["limit", "median (± half the range)"], rows)


def _throughput(document: Mapping[str, Any], kind: str) -> list[str]:
    summary = document["summary"]
    runs = [r for r in document["runs"] if r["index"] in summary["used_runs"]]
    sizes = sorted({c["size"] for c in document["plan"] if c["kind"] == kind})
    rows = []
    for system, title in _systems(document):
        cells = []
        for size in sizes:
            found = summary["cases"].get(headline(system, kind, size), {}).get("rate")
            mb = "" if found is None else f" ({found['median'] * size / 1e6:,.0f} MB/s)"
            cells.append(_med(found) + mb + _spread(found))
        if any(cell != "-" for cell in cells):
            ratio = run_ratio(
                runs,
                lambda r: metric(r, headline("rocklet", kind), "rate"),
                lambda r, s=system: metric(r, headline(s, kind), "rate"),  # type: ignore[misc]
            )
            rows.append([title, *cells, _ratio(ratio)])
    header = ["system", *(f"{_SIZES.get(s, s)} msg/s" for s in sizes), "Rocklet ÷ it, 1 KiB"]
    return _table(header, rows)


def _latency_table(document: Mapping[str, Any]) -> list[str]:
    summary = document["summary"]
    rows = []
    for system, title in _systems(document):
        e2e = summary["cases"].get(headline(system, "e2e"))
        low = summary["cases"].get(f"{system}/e2e/e2e_low/{KIB}")
        send = summary["cases"].get(headline(system, "produce"))
        if e2e is None and send is None:
            continue
        e2e, low, send = e2e or {}, low or {}, send or {}
        rows.append(
            [
                title,
                *(_med(e2e.get(p), 2) for p in ("p50", "p99", "p999")),
                _med(e2e.get("stall_ms"), 1),
                *(_med(low.get(p), 2) for p in ("p50", "p99")),
                *(_med(send.get(p), 2) for p in ("p50", "p99")),
            ]
        )
    rate = next((c["label"] for c in document["plan"] if c["variant"] == "e2e"), "")
    low_rate = next((c["label"] for c in document["plan"] if c["variant"] == "e2e_low"), "")
    fast, slow = rate.split(" ")[0], low_rate.split(" ")[0]
    header = ["system", *(f"{fast}/s {p}" for p in ("p50", "p99", "p99.9"))]
    header += [f"{fast}/s machine stall max ms"]
    header += [f"{slow}/s {p}" for p in ("p50", "p99")]
    return _table([*header, "send→ack p50", "send→ack p99"], rows)


def _variants_table(document: Mapping[str, Any]) -> list[str]:
    summary = document["summary"]
    rows = []
    for case in document["plan"]:
        if not case["system"].startswith("rocklet"):
            continue
        found = summary["cases"][case["key"]]
        rate = found["rate"]
        rows.append(
            [
                f"{case['title']}: {case['kind']}, {case['label']}, {_SIZES.get(case['size'])}",
                _med(rate) + _spread(rate),
                *(_med(found.get(p), 2) for p in ("p50", "p99", "p999")),
                _med(found.get("server_us"), 1),
                _med(found.get("client_us"), 1),
                _med(found.get("other_cores"), 2),
            ]
        )
    header = ["case", "msg/s", "p50 ms", "p99 ms", "p99.9 ms", "server µs/msg", "client µs/msg"]
    return _table([*header, "other load"], rows)


def _peer_ratios(document: Mapping[str, Any]) -> list[str]:
    """Each Rocklet headline figure divided by each peer's (per run, then median)."""
    summary = document["summary"]
    runs = [r for r in document["runs"] if r["index"] in summary["used_runs"]]
    peers = [(s, t) for s, t in _systems(document) if not s.startswith("rocklet")]
    sizes = sorted({c["size"] for c in document["plan"] if c["kind"] == "produce"})
    rows = []
    for kind in ("produce", "consume"):
        for size in sizes:
            ours = headline("rocklet", kind, size)
            cells = [
                _ratio(
                    run_ratio(
                        runs,
                        lambda r, k=ours: metric(r, k, "rate"),  # type: ignore[misc]
                        lambda r, p=p, kind=kind, size=size: metric(  # type: ignore[misc]
                            r, headline(p, kind, size), "rate"
                        ),
                    )
                )
                for p, _ in peers
            ]
            rows.append([f"{kind} msg/s, {_SIZES.get(size, size)}", *cells])
    for p_name in ("p50", "p99"):
        ours = headline("rocklet", "e2e")
        cells = [
            _ratio(
                run_ratio(
                    runs,
                    lambda r, k=ours, n=p_name: metric(r, k, n),  # type: ignore[misc]
                    lambda r, p=p, n=p_name: metric(r, headline(p, "e2e"), n),  # type: ignore[misc]
                )
            )
            for p, _ in peers
        ]
        rows.append([f"e2e latency {p_name} (lower is better)", *cells])
    return _table(["Rocklet figure ÷ peer's", *(t for _, t in peers)], rows)


def _limit_ratios(document: Mapping[str, Any]) -> list[str]:
    summary = document["summary"]
    runs = [r for r in document["runs"] if r["index"] in summary["used_runs"]]

    def mb(key: str) -> Callable[[Run], float | None]:
        def of(run: Run) -> float | None:
            rate = metric(run, key, "rate")
            size = int(key.rsplit("/", 1)[1])
            return None if rate is None else rate * size / 1e6

        return of

    def rate(key: str) -> Callable[[Run], float | None]:
        return lambda run: metric(run, key, "rate")

    def lim(name: str) -> Callable[[Run], float | None]:
        return lambda run: limit(run, name)

    batch, sync = f"rocklet/produce/batch/{KIB}", f"rocklet-sync/produce/batch/{KIB}"
    dd, echo_batch = lim("dd_fdatasync"), lim("echo_batch_1024")
    pairs = [
        ("batch produce MB/s, 1 KiB ÷ dd fdatasync", mb(batch), dd),
        ("batch produce MB/s, 16 KiB ÷ dd fdatasync", mb("rocklet/produce/batch/16384"), dd),
        ("batch produce msg/s, 1 KiB ÷ echo, one write per read", rate(batch), echo_batch),
        (
            "pipelined single sends, 1 KiB ÷ echo, one write per frame",
            rate(f"rocklet/produce/pipelined/{KIB}"),
            lim("echo_frame_1024"),
        ),
        (
            "consume msg/s, 1 KiB ÷ echo, one write per read",
            rate(f"rocklet/consume/main/{KIB}"),
            echo_batch,
        ),
        (
            "SYNC_FLUSH single sends ÷ fdatasync appends/s",
            rate(f"rocklet-sync/produce/pipelined/{KIB}"),
            lim("fdatasync_append_1024"),
        ),
        ("SYNC_FLUSH batch MB/s, 1 KiB ÷ dd fdatasync", mb(sync), dd),
    ]
    rows = [[text, _ratio(run_ratio(runs, top, bottom))] for text, top, bottom in pairs]
    return _table(["Rocklet figure ÷ limit", "ratio"], rows)


def _goals_table(summary: Mapping[str, Any]) -> list[str]:
    rows = []
    for goal in summary["goals"]:
        found = goal["measured"]
        digits = 2
        value = "-" if found is None else f"{found['median']:.{digits}f}{_spread(found)}"
        verdict = {True: "met", False: "**not met**", None: "not measured"}[goal["met"]]
        rows.append([goal["text"], value, verdict])
    return _table(["goal", "measured (median)", "verdict"], rows)


def _components(found: Mapping[str, Any]) -> list[str]:
    lines = ["## Component benchmarks (bench/*.py, short modes, as they printed them)"]
    for name, result in found.items():
        status = "" if result["returncode"] == 0 else f" (exit code {result['returncode']})"
        lines += ["", f"### {name}: `{' '.join(result['command'])}`, {result['seconds']} s{status}"]
        lines += ["", *result["table"]] if result["table"] else ["", "(no table printed)"]
    return lines


def render_markdown(document: Mapping[str, Any]) -> str:
    """The report: session, limits, throughput, latency, variants, ratios, goals."""
    if "summary" not in document:
        document = {**document, "summary": summarise(document)}
    summary = document["summary"]
    produce = "## Produce throughput (each client's usual fast mode)"
    consume = "## Consume throughput (a backlog, from its first message)"
    latency = "## Latency in ms, 1 KiB: end to end at fixed rates; send→ack of the produce case"
    parts: list[list[str]] = [
        ["## Session", "", *_session(document, summary)],
        ["## Physical limits", "", *_limits_table(summary)],
        [produce, "", *_throughput(document, "produce")],
        [consume, "", *_throughput(document, "consume")],
        [latency, "", *_latency_table(document)],
    ]
    if any(not c["system"].startswith("rocklet") for c in document["plan"]):
        ratios = "## Rocklet ÷ each peer (medians of per-run ratios)"
        parts.append([ratios, "", *_peer_ratios(document)])
    parts += [
        ["## Rocklet ÷ the limits", "", *_limit_ratios(document)],
        ["## Rocklet variants and the C++ client", "", *_variants_table(document)],
        ["## Goals", "", *_goals_table(summary)],
    ]
    if document.get("components"):
        parts.append(_components(document["components"]))
    if summary["failed_cases"]:
        parts.append(["## Failed cases", "", *(f"- {k}" for k in summary["failed_cases"])])
    return "\n\n".join("\n".join(part) for part in parts) + "\n"
