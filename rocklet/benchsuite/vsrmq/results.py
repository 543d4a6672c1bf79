"""What one run measured, the cases, and the tables: per-run rows, per-pair ratios, medians.

A pair is one run of each system on the same case, back to back; ratios are taken
within a pair (the machine's load changes between pairs), then summarised by their
median over the pairs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

__all__ = [
    "BACKLOG_PER_SECOND",
    "CASES",
    "CPP_PULL_BACKLOG_PER_SECOND",
    "DEFAULT_CASES",
    "MIN_BACKLOG",
    "Case",
    "PairRatio",
    "Run",
    "case_markdown",
    "median_or_none",
    "pair_ratios",
    "parse_cases",
]

SYSTEMS: Final = ("rocklet", "rocketmq")

#: Consumer rate the Java consumer cases' default backlog is sized for: above the
#: fastest run of either system on a quiet 2-core machine (~185k msg/s, one Java
#: consumer thread), so a run's window ends before the backlog does.
BACKLOG_PER_SECOND: Final = 240_000
#: The same for cpppull: the C++ PullConsumer reads one queue after the other in one
#: thread, at ~30-40k msg/s on either system. Sizing it like the Java cases (7.2 million
#: messages for 30 s) made writing the backlog the longest part of the case.
CPP_PULL_BACKLOG_PER_SECOND: Final = 60_000
#: The default backlog's floor (short runs still read a real backlog).
MIN_BACKLOG: Final = 1_500_000


@dataclass(frozen=True)
class Case:
    """One workload: of the release's Java benchmark tool, or of the official C++ client.

    Attributes:
        name: As given to ``--cases``.
        tool: ``"producer"`` or ``"consumer"`` (the Java tools; the consumer reads a
            backlog written first), ``"cpp-producer"`` (the C++ client's synchronous
            sends), ``"cpp-pull"`` (its PullConsumer, reading a backlog written first)
            or ``"sdk-e2e"`` (Rocklet's SDK end to end at a fixed rate, :mod:`.sdkcase`).
        threads: The Java tool's ``-w``; the C++ producer's sending threads (one
            producer shared by all); 1 for the C++ PullConsumer (it pulls in one thread)
            and for the SDK case (one producer, one push consumer, one event loop).
    """

    name: str
    tool: str
    threads: int

    @property
    def cpp(self) -> bool:
        """Whether the official C++ client drives it (not the Java tools)."""
        return self.tool.startswith("cpp-")

    @property
    def driver(self) -> str:
        """What drives the system in this case, for progress lines."""
        if self.cpp:
            return "the C++ client"
        return "the Rocklet SDK" if self.tool == "sdk-e2e" else f"the Java {self.tool}"

    @property
    def backlog_first(self) -> bool:
        """Whether a backlog is written before the measured part (the consumer cases)."""
        return self.tool in ("consumer", "cpp-pull")

    def backlog_for(self, seconds: float) -> int:
        """The default backlog of this case (consumer cases) for runs of ``seconds``.

        A run that drains its backlog is measured over less than its window (and its
        rate from fewer of the tool's lines), so the default writes more than a consumer
        reads in the window: for 30 s runs, 7.2 million 1 KiB messages (~7.5 GiB,
        page-cached) for the Java consumers and 1.8 million for cpppull.

        Args:
            seconds: Length of each run.

        Returns:
            Messages to write first.
        """
        rate = CPP_PULL_BACKLOG_PER_SECOND if self.tool == "cpp-pull" else BACKLOG_PER_SECOND
        return max(MIN_BACKLOG, math.ceil(seconds * rate))

    @property
    def title(self) -> str:
        """A heading for the case's table."""
        threads = f"{self.threads} thread{'s' * (self.threads > 1)}"
        if self.tool == "cpp-producer":
            return f"C++ client (rocketmq 0.4.4), send_sync, {threads} sharing one producer, 1 KiB"
        if self.tool == "cpp-pull":
            return "C++ client (rocketmq 0.4.4), PullConsumer draining a backlog, 1 KiB"
        if self.tool == "sdk-e2e":
            return "Rocklet SDK end to end, 5,000 msg/s in ~1 ms batches, push consumer, 1 KiB"
        what = "Producer" if self.tool == "producer" else "Consumer of a backlog"
        return f"Java benchmark {what}, {threads}, 1 KiB"


CASES: Final = {
    c.name: c
    for c in (
        Case("producer16", "producer", 16),
        Case("producer1", "producer", 1),
        Case("consumer1", "consumer", 1),
        Case("consumer16", "consumer", 16),
        Case("cpp1", "cpp-producer", 1),
        Case("cpp8", "cpp-producer", 8),
        Case("cpppull", "cpp-pull", 1),
        Case("sdke2e", "sdk-e2e", 1),
    )
}
DEFAULT_CASES: Final = ("producer16", "producer1", "consumer1", "consumer16")


def parse_cases(text: str) -> tuple[Case, ...]:
    """``producer16,consumer1`` -> the cases, in the order given.

    Raises:
        ValueError: An unknown or repeated name, or none at all.
    """
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown or not names or len(set(names)) != len(names):
        raise ValueError(f"cases must be distinct names from {', '.join(CASES)} (got {text!r})")
    return tuple(CASES[n] for n in names)


@dataclass
class Run:
    """One system's run of one case.

    Attributes:
        system: ``"rocklet"`` or ``"rocketmq"``.
        case: The case's name.
        pair: 1-based pair number.
        msgs_per_s: The tool's steady rate (its TPS lines after the first); None if it
            printed none.
        messages: Messages the CPU was divided by: stored in the run's topic (producer),
            or committed by the group within the measured window (consumer).
        cpu_s: Broker CPU seconds (user + system, all threads) over the same span.
        peak_rss_mib: The broker process's VmHWM at the end of the run.
        load_before: 1-minute load average before the run.
        load_after: And after it.
        tps_lines: Every rate the tool printed.
        notes: Anything that qualifies the figures.
        client_cpu_s: The client process's CPU seconds (user + system) over the span
            of ``cpu_s``; measured for the C++ and SDK cases only (None otherwise).
        wall_s: The length of that span (those cases; None otherwise).
        latency_ms: Send-to-listener percentiles (``p50``, ``p99``, ``p999``) and their
            ``count`` (the SDK case; None otherwise).
        hiccups: The machine's stalls within that case's window, seen by a thread of
            the otherwise idle runner that only sleeps (``max_ms``, ``stalls``,
            ``stalled_ms``; :class:`~rocklet.benchsuite.measure.HiccupMeter`).
    """

    system: str
    case: str
    pair: int
    msgs_per_s: float | None
    messages: int
    cpu_s: float
    peak_rss_mib: float
    load_before: float
    load_after: float
    tps_lines: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    client_cpu_s: float | None = None
    wall_s: float | None = None
    latency_ms: dict[str, float] | None = None
    hiccups: dict[str, float] | None = None

    @property
    def cpu_us_per_msg(self) -> float | None:
        """Broker CPU microseconds per message (None without messages)."""
        return self.cpu_s * 1e6 / self.messages if self.messages > 0 else None

    @property
    def client_cpu_us_per_msg(self) -> float | None:
        """Client CPU microseconds per message (None without them or the client's CPU)."""
        if self.client_cpu_s is None or self.messages <= 0:
            return None
        return self.client_cpu_s * 1e6 / self.messages

    def cores(self) -> tuple[float, float] | None:
        """(broker, client) cores kept busy over the span, when both were measured."""
        if self.client_cpu_s is None or not self.wall_s:
            return None
        return self.cpu_s / self.wall_s, self.client_cpu_s / self.wall_s

    def as_json(self) -> dict[str, Any]:
        """The run as plain data, with the derived CPU per message."""
        return {
            **asdict(self),
            "cpu_us_per_msg": self.cpu_us_per_msg,
            "client_cpu_us_per_msg": self.client_cpu_us_per_msg,
        }


@dataclass(frozen=True)
class PairRatio:
    """The two ratios of one pair (None where a figure is missing).

    Attributes:
        pair: 1-based pair number.
        rate: Rocklet msg/s ÷ RocketMQ msg/s (above 1: Rocklet faster).
        cpu: RocketMQ CPU/msg ÷ Rocklet CPU/msg (above 1: Rocklet cheaper).
        p99: RocketMQ p99 latency ÷ Rocklet's (above 1: Rocklet's tail shorter; the
            latency case only).
    """

    pair: int
    rate: float | None
    cpu: float | None
    p99: float | None = None


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _percentile(run: Run, key: str) -> float | None:
    value = (run.latency_ms or {}).get(key)
    return None if value is None else float(value)


def pair_ratios(runs: Sequence[Run]) -> list[PairRatio]:
    """One :class:`PairRatio` per pair in which both systems ran (pairs in order)."""
    by_pair: dict[int, dict[str, Run]] = {}
    for run in runs:
        by_pair.setdefault(run.pair, {})[run.system] = run
    ratios = []
    for pair in sorted(by_pair):
        ours, theirs = by_pair[pair].get("rocklet"), by_pair[pair].get("rocketmq")
        if ours is None or theirs is None:
            continue
        ratios.append(
            PairRatio(
                pair,
                _div(ours.msgs_per_s, theirs.msgs_per_s),
                _div(theirs.cpu_us_per_msg, ours.cpu_us_per_msg),
                _div(_percentile(theirs, "p99"), _percentile(ours, "p99")),
            )
        )
    return ratios


def median_or_none(values: Sequence[float | None]) -> float | None:
    """The median of the values that are present (None if there are none)."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


@dataclass(frozen=True)
class _Layout:
    """How one kind of case table shows a run, its ratios and each system's medians."""

    columns: str  # after "pair | system"
    align: str  # after "---: | ---"
    row: Callable[[Run], str]  # the cells after the system
    ratio_heading: str  # the first ratio column (the second is always the CPU ratio)
    ratio: Callable[[PairRatio], float | None]
    summary: Callable[[str, Sequence[Run]], str]  # "Median <system>: ..."


def _table(case: str, title: str, mine: Sequence[Run], layout: _Layout) -> str:
    out = [
        f"### {title} (`{case}`)",
        "",
        f"| pair | system | {layout.columns} |",
        f"| ---: | --- | {layout.align} |",
    ]
    for r in mine:
        note = f" ({'; '.join(r.notes)})" if r.notes else ""
        out.append(f"| {r.pair} | {r.system}{note} | {layout.row(r)} |")
    ratios = pair_ratios(mine)
    out += [
        "",
        f"| pair | {layout.ratio_heading} | RocketMQ ÷ Rocklet, broker CPU/msg |",
        "| ---: | ---: | ---: |",
    ]
    out += [f"| {p.pair} | {_num(layout.ratio(p), '.2f')} | {_num(p.cpu, '.2f')} |" for p in ratios]
    out.append(
        f"| median | {_num(median_or_none([layout.ratio(p) for p in ratios]), '.2f')} | "
        f"{_num(median_or_none([p.cpu for p in ratios]), '.2f')} |"
    )
    for system in SYSTEMS:
        rows = [r for r in mine if r.system == system]
        if rows:
            out += ["", f"Median {system}: {layout.summary(system, rows)}"]
    return "\n".join(out) + "\n"


def case_markdown(case: str, title: str, runs: Sequence[Run]) -> str:
    """The case's Markdown: a row per run, per-pair ratios, and the medians.

    Throughput cases show msg/s (the C++ ones the client's CPU and the cores each side
    kept busy too); the latency case (``sdke2e``) shows percentiles and RocketMQ's p99
    over Rocklet's.

    Args:
        case: The case's name.
        title: Its heading.
        runs: Every run of that case (both systems, every pair).

    Returns:
        Markdown text ending with a newline.
    """
    mine = sorted((r for r in runs if r.case == case), key=lambda r: r.pair)
    if any(r.latency_ms for r in mine):
        return _table(case, title, mine, _LATENCY)
    client = any(r.client_cpu_s is not None for r in mine)
    return _table(case, title, mine, _throughput_layout(client))


def _throughput_layout(client: bool) -> _Layout:
    def row(r: Run) -> str:
        cores = r.cores()
        extra = (
            f" {_num(r.client_cpu_us_per_msg, '.1f')} | "
            + ("-" if cores is None else f"{cores[0]:.2f} / {cores[1]:.2f}")
            + " |"
        )
        return (
            f"{_num(r.msgs_per_s, ',.0f')} | {r.messages:,} | "
            f"{_num(r.cpu_us_per_msg, '.1f')} |{extra * client} {r.peak_rss_mib:.0f} | "
            f"{r.load_before:.2f}→{r.load_after:.2f}"
        )

    def summary(system: str, rows: Sequence[Run]) -> str:
        rate = median_or_none([r.msgs_per_s for r in rows])
        cpu = median_or_none([r.cpu_us_per_msg for r in rows])
        return (
            f"{_num(rate, ',.0f')} msg/s, {_num(cpu, '.1f')} µs broker CPU per message, "
            f"peak RSS {statistics.median(r.peak_rss_mib for r in rows):.0f} MiB." + _busier(rows)
        )

    extra_head = " client CPU µs/msg | cores busy, broker / client |" if client else ""
    return _Layout(
        columns=f"msg/s | messages | broker CPU µs/msg |{extra_head} peak RSS MiB | load 1-min",
        align="---: | ---: | ---: |" + " ---: | ---: |" * client + " ---: | ---",
        row=row,
        ratio_heading="Rocklet ÷ RocketMQ, msg/s",
        ratio=lambda p: p.rate,
        summary=summary,
    )


def _busier(rows: Sequence[Run]) -> str:
    """Which process was kept busier, the client or the broker (medians over the runs)."""
    cores = [c for c in (r.cores() for r in rows) if c is not None]
    if not cores:
        return ""
    broker = statistics.median(c[0] for c in cores)
    client = statistics.median(c[1] for c in cores)
    side = "the C++ client" if client > broker else "the broker"
    return f" Cores busy: broker {broker:.2f}, C++ client {client:.2f}; the busier side is {side}."


def _latency_row(r: Run) -> str:
    percentiles = " | ".join(_num(_percentile(r, k), ".2f") for k in ("p50", "p99", "p999"))
    return (
        f"{percentiles} | {_num(r.msgs_per_s, ',.0f')} | {_num(r.cpu_us_per_msg, '.1f')} | "
        f"{_num(r.client_cpu_us_per_msg, '.1f')} | {_stalls(r.hiccups)} | "
        f"{r.peak_rss_mib:.0f} | {r.load_before:.2f}→{r.load_after:.2f}"
    )


def _stalls(hiccups: dict[str, float] | None) -> str:
    """Longest / total stall of the machine in ms ("-" when not measured)."""
    if not hiccups:
        return "-"
    return f"{hiccups['max_ms']:.1f} / {hiccups['stalled_ms']:.1f}"


def _latency_summary(system: str, rows: Sequence[Run]) -> str:
    p50 = median_or_none([_percentile(r, "p50") for r in rows])
    p99 = median_or_none([_percentile(r, "p99") for r in rows])
    cpu = median_or_none([r.cpu_us_per_msg for r in rows])
    return (
        f"p50 {_num(p50, '.2f')} ms, p99 {_num(p99, '.2f')} ms, "
        f"{_num(cpu, '.1f')} µs broker CPU per message."
    )


_LATENCY: Final = _Layout(
    columns="p50 ms | p99 ms | p99.9 ms | msg/s | broker CPU µs/msg | client CPU µs/msg | "
    "machine stalls, longest / total ms | peak RSS MiB | load 1-min",
    align="---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---",
    row=_latency_row,
    ratio_heading="RocketMQ ÷ Rocklet, p99",
    ratio=lambda p: p.p99,
    summary=_latency_summary,
)
