"""``rocklet bench``: the command-line face of the suite (``make bench``).

Examples::

    rocklet bench                    # the full suite: 3 runs, every system (~25 min)
    rocklet bench --quick            # one short run of everything (~2 min)
    rocklet bench --smoke            # seconds: Rocklet and the limits only (make test)
    rocklet bench --systems rocklet,redis --runs 1
    rocklet bench --systems rocklet --runs 1 --cases 'rocklet/consume/main/1024,rocklet/e2e/e2e/*'
    rocklet bench vs-rocketmq --rocketmq-home DIR   # beside a RocketMQ 4.x release

Results go to ``--out`` (default ``bench-results/``): ``results.json`` (every run and
case, then the medians and goals), ``report.md`` (the tables of ``BENCHMARKS.md``) and
``benchmarks.png`` (the chart).
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from rocklet.benchsuite.plan import PROFILES, SYSTEMS

__all__ = ["add_bench_parser", "run_bench"]


def _systems(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}"
        )
    return names


def add_bench_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``bench`` subcommand to the ``rocklet`` parser's subparsers.

    Returns:
        The subcommand's parser.
    """
    bench = sub.add_parser(
        "bench",
        help="benchmark Rocklet beside Redis, RabbitMQ, NATS and the machine's limits",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    size = bench.add_mutually_exclusive_group()
    size.add_argument(
        "--profile", choices=sorted(PROFILES), default="full", help="counts and runs (full)"
    )
    size.add_argument(
        "--quick", dest="profile", action="store_const", const="quick", help="--profile quick"
    )
    size.add_argument(
        "--smoke", dest="profile", action="store_const", const="smoke", help="--profile smoke"
    )
    bench.add_argument("--runs", type=int, help="repeat the whole plan N times (median)")
    bench.add_argument(
        "--e2e-seconds",
        type=float,
        help="measured seconds of the end-to-end latency cases (the profile's: 4 in full);"
        " tails that come once per so many megabytes need 15 or more",
    )
    bench.add_argument(
        "--systems", type=_systems, help=f"comma-separated, of: {', '.join(SYSTEMS)}"
    )
    bench.add_argument(
        "--cases",
        type=lambda text: tuple(p.strip() for p in text.split(",") if p.strip()),
        default=(),
        help="comma-separated patterns of case keys, e.g. 'rocklet/e2e/e2e/*' (a consume"
        " case brings the produce case that fills its backlog)",
    )
    bench.add_argument("--skip", type=_systems, default=(), help="systems to leave out")
    bench.add_argument("--out", type=Path, default=Path("bench-results"), help="results dir")
    bench.add_argument("--work-dir", type=Path, help="parent of the temporary data dirs")
    bench.add_argument("--keep", action="store_true", help="keep the data directories")
    bench.add_argument("--chart", type=Path, help="also copy the chart to this path")
    bench.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    bench.add_argument(
        "--components",
        action="store_true",
        help="also run the component benchmarks of bench/ (short modes, several minutes)",
    )
    from rocklet.benchsuite.vsrmq.cli import add_vs_rocketmq_parser

    add_vs_rocketmq_parser(
        bench.add_subparsers(dest="bench_command", metavar="{vs-rocketmq}", required=False)
    )
    parser: argparse.ArgumentParser = bench
    return parser


def run_bench(args: argparse.Namespace) -> int:
    """Run the suite as ``args`` say; print the report.

    Returns:
        0 when every case ran, 1 when some failed (the results still cover the rest).
    """
    if getattr(args, "bench_command", None) == "vs-rocketmq":
        from rocklet.benchsuite.vsrmq.cli import run_vs_rocketmq

        return run_vs_rocketmq(args)
    from rocklet.benchsuite.chart import draw_chart
    from rocklet.benchsuite.report import render_markdown, summarise
    from rocklet.benchsuite.runner import Session, run_session, write_results

    profile = PROFILES[args.profile]
    if args.runs is not None and args.runs < 1:
        sys.stderr.write("rocklet bench: --runs must be at least 1\n")
        return 2
    if args.e2e_seconds is not None:
        if not 0 < args.e2e_seconds <= 3600:
            sys.stderr.write("rocklet bench: --e2e-seconds must be in (0, 3600]\n")
            return 2
        profile = dataclasses.replace(profile, e2e_s=args.e2e_seconds)
    systems = tuple(s for s in (args.systems or profile.systems) if s not in args.skip)
    session = Session(
        profile=profile,
        systems=systems,
        out_dir=args.out,
        work_dir=args.work_dir,
        keep=args.keep,
        command=shlex.join(["rocklet", *sys.argv[1:]]),
        runs=args.runs,
        components=args.components,
        cases=args.cases,
    )
    try:
        document = run_session(session)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the servers were stopped on the way
        sys.stderr.write(f"rocklet bench: interrupted; finished runs are in {args.out}\n")
        return 130
    document["summary"] = summarise(document)
    report = render_markdown(document)
    (args.out / "report.md").write_text(report, encoding="utf-8")
    if not args.no_chart:
        chart = args.out / "benchmarks.png"
        draw_chart(document, chart)
        if args.chart is not None:
            args.chart.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(chart, args.chart)
    write_results(args.out / "results.json", document)
    sys.stdout.write(report)
    failed = document["summary"]["failed_cases"]
    return 1 if failed else 0
