"""The PNG chart of a session (matplotlib, no display needed).

Four panels from the medians of the summary: produce and consume throughput per
system and body size, end-to-end latency per system, and Rocklet's variants beside
the echo ceilings measured in the same run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

__all__ = ["draw_chart"]

_SIZES: Final = {100: "100 B", 1024: "1 KiB", 16384: "16 KiB"}


def _median(summary: Mapping[str, Any], key: str, name: str) -> float:
    found = summary["cases"].get(key, {}).get(name)
    return 0.0 if found is None else float(found["median"])


def _systems(document: Mapping[str, Any]) -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for case in document["plan"]:
        seen.setdefault(case["system"], case["title"])
    return list(seen.items())


def _grouped(ax: Any, document: Mapping[str, Any], kind: str) -> None:
    from rocklet.benchsuite.summary import headline

    summary = document["summary"]
    sizes = sorted({c["size"] for c in document["plan"] if c["kind"] == kind})
    systems = [
        (s, t)
        for s, t in _systems(document)
        if any(_median(summary, headline(s, kind, z), "rate") for z in sizes)
    ]
    width = 0.8 / max(len(sizes), 1)
    for i, size in enumerate(sizes):
        values = [_median(summary, headline(s, kind, size), "rate") for s, _ in systems]
        xs = [j + i * width for j in range(len(systems))]
        ax.bar(xs, values, width, label=_SIZES.get(size, str(size)))
    ax.set_xticks([j + width * (len(sizes) - 1) / 2 for j in range(len(systems))])
    ax.set_xticklabels([t for _, t in systems], rotation=20, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("messages/s (median)")
    ax.set_title(f"{kind.capitalize()} throughput")
    ax.legend(fontsize=8)


def _latency(ax: Any, document: Mapping[str, Any]) -> None:
    from rocklet.benchsuite.summary import KIB, headline

    summary = document["summary"]
    rates = {c["variant"]: c["label"].split(" ")[0] for c in document["plan"] if c["kind"] == "e2e"}
    bars = (
        ("e2e", "p50", f"p50 at {rates.get('e2e', '?')}/s"),
        ("e2e", "p99", f"p99 at {rates.get('e2e', '?')}/s"),
        ("e2e_low", "p99", f"p99 at {rates.get('e2e_low', '?')}/s"),
    )
    systems = [(s, t) for s, t in _systems(document) if _median(summary, headline(s, "e2e"), "p50")]
    width = 0.8 / len(bars)
    for i, (variant, name, label) in enumerate(bars):
        values = [_median(summary, f"{s}/e2e/{variant}/{KIB}", name) for s, _ in systems]
        ax.bar([j + i * width for j in range(len(systems))], values, width, label=label)
    ax.axhline(1.5, color="grey", linestyle="--", linewidth=1, label="goal: p99 1.5 ms")
    ax.set_xticks([j + width for j in range(len(systems))])
    ax.set_xticklabels([t for _, t in systems], rotation=20, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("ms (median)")
    ax.set_title("End-to-end latency, 1 KiB, at fixed rates")
    ax.legend(fontsize=8)


def _variants(ax: Any, document: Mapping[str, Any]) -> None:
    summary = document["summary"]
    cases: Sequence[Mapping[str, Any]] = [
        c for c in document["plan"] if c["system"].startswith("rocklet") and c["size"] == 1024
    ]
    rows = [
        (f"{c['kind']}: {c['variant']}" + (" (C++)" if c["system"] == "rocklet-cpp" else "")
         + (" SYNC" if c["system"] == "rocklet-sync" else ""),
         _median(summary, c["key"], "rate"))
        for c in cases if c["kind"] != "e2e"
    ]  # fmt: skip
    ax.barh([r[0] for r in rows], [r[1] for r in rows], color="tab:green")
    for name, style in (("echo_frame_1024", ":"), ("echo_batch_1024", "--")):
        found = summary["limits"].get(name)
        if found is not None:
            ax.axvline(found["median"], color="grey", linestyle=style, label=name)
    ax.set_xscale("log")
    ax.set_xlabel("messages/s (median)")
    ax.set_title("Rocklet variants, 1 KiB, and the uvloop echo ceilings")
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=7)


def draw_chart(document: Mapping[str, Any], path: Path) -> None:
    """Draw the four panels of ``document`` (with its summary) into a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    _grouped(axes[0][0], document, "produce")
    _grouped(axes[0][1], document, "consume")
    _latency(axes[1][0], document)
    _variants(axes[1][1], document)
    machine = document["machine"]
    fig.suptitle(
        f"rocklet bench ({document['profile']}, runs {document['summary']['used_runs']}) — "
        f"{machine['cpus']} CPUs, {machine['cpu_model']}, Python {machine['python']}",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
