"""``rocklet bench vs-rocketmq``: Rocklet beside a RocketMQ 4.x release, side by side.

Needs only a RocketMQ 4.x binary release (bin/, conf/, lib/) and a java. Starts the
release's name server and broker from its jars (ASYNC_MASTER, ASYNC_FLUSH, a fresh
store) and `rocklet standalone`, one system at a time, and drives both with the
release's own Java benchmark Producer and Consumer (1 KiB bodies), alternating which
system goes first (ABBA). Prints a Markdown table per case: msg/s, broker CPU µs per
message, the broker's peak RSS, the load, then the per-pair ratios and medians.

The cases cpp1, cpp8 and cpppull (not run by default) drive both systems with the
official C++ client instead (PyPI rocketmq 0.4.4, in the dev extras): send_sync from 1
or 8 threads sharing one producer, and the PullConsumer draining a backlog. Their
tables add the client's CPU per message and the cores the broker and the client kept
busy, to show which side was the bottleneck.

The case sdke2e (not run by default) measures latency instead: Rocklet's own SDK end to
end, a push consumer and a producer paced at 5,000 msg/s of 1 KiB (the messages of each
~1 ms tick in one batch), from the send time stamped in each body to the listener. The
client is the same on both sides, so the pair shows what each broker adds. Its table
has p50, p99 and p99.9 per run and RocketMQ's p99 over Rocklet's per pair.

Note: RocketMQ 4.9.4 has no bind-address option; while it runs, its name server and
broker listen on every interface (0.0.0.0) of this machine. Rocklet listens on
127.0.0.1 only. Run it where that exposure is acceptable (a firewalled host).

Examples::

    rocklet bench vs-rocketmq --rocketmq-home ~/rocketmq-all-4.9.4-bin-release
    rocklet bench vs-rocketmq --rocketmq-home DIR --pairs 3 --seconds 60 --json vs.json
    rocklet bench vs-rocketmq --rocketmq-home DIR --cases producer16 --seconds 10 --pairs 1
    rocklet bench vs-rocketmq --rocketmq-home DIR --cases cpp1,cpp8,cpppull --seconds 20
    rocklet bench vs-rocketmq --rocketmq-home DIR --cases sdke2e --seconds 15 --pairs 3
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from rocklet.benchsuite.measure import python_facts
from rocklet.benchsuite.vsrmq.results import (
    BACKLOG_PER_SECOND,
    CASES,
    CPP_PULL_BACKLOG_PER_SECOND,
    DEFAULT_CASES,
    MIN_BACKLOG,
    Case,
    Run,
    parse_cases,
)

__all__ = ["add_vs_rocketmq_parser", "run_vs_rocketmq"]

_BIND_WARNING = (
    "warning: RocketMQ 4.x binds 0.0.0.0 (it has no bind option): its name server and "
    "broker are reachable from other hosts while it runs; Rocklet stays on 127.0.0.1"
)


def _cases(text: str) -> tuple[Case, ...]:
    try:
        return parse_cases(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    return parse


def add_vs_rocketmq_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``vs-rocketmq`` to the ``rocklet bench`` subcommands.

    Returns:
        Its parser.
    """
    parser: argparse.ArgumentParser = sub.add_parser(
        "vs-rocketmq",
        help="Rocklet beside a RocketMQ 4.x release, with its Java benchmark tools, "
        "the official C++ client or the SDK (RocketMQ binds 0.0.0.0)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--rocketmq-home", type=Path, required=True, metavar="DIR",
        help="a RocketMQ 4.x binary release (bin/, conf/, lib/)",
    )  # fmt: skip
    parser.add_argument(
        "--java", type=Path, metavar="PATH",
        help="the java to run it with (default: $JAVA_HOME/bin/java, else java on PATH)",
    )  # fmt: skip
    parser.add_argument(
        "--pairs", type=_positive(int), default=2, help="runs of each system per case (2)"
    )
    parser.add_argument(
        "--seconds", type=_positive(float), default=30.0, help="length of each run (30)"
    )
    parser.add_argument(
        "--cases", type=_cases, default=tuple(CASES[c] for c in DEFAULT_CASES),
        help=f"comma-separated, of {', '.join(CASES)} "
        f"(default: the Java ones, {','.join(DEFAULT_CASES)})",
    )  # fmt: skip
    parser.add_argument(
        "--backlog", type=_positive(int), default=None,
        help="messages written before each consumer case, cpppull too (default: "
        f"{BACKLOG_PER_SECOND:,} per second of the run for the Java consumers, "
        f"{CPP_PULL_BACKLOG_PER_SECOND:,} for cpppull, at least {MIN_BACKLOG:,}: more "
        "than either system reads here, so no run drains it); a consumer that runs out "
        "is rated over the time it spent reading",
    )  # fmt: skip
    parser.add_argument(
        "--warmup", type=float, default=5.0, metavar="SECONDS",
        help="an unmeasured run of the C++ client before each C++ case's measured one (5)",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the raw results")
    parser.add_argument("--work-dir", type=Path, help="parent of the temporary stores")
    parser.add_argument("--keep", action="store_true", help="keep the stores and logs")
    parser.add_argument(
        "--extra-classpath", default="", metavar="JARS",
        help="jars to add after DIR/lib/* (':'-separated), for a release missing some",
    )  # fmt: skip
    return parser


def _document(args: argparse.Namespace, runs: list[Run], java_major: int) -> dict[str, Any]:
    return {
        "command": ["rocklet", *sys.argv[1:]],
        "rocketmq_home": str(args.rocketmq_home),
        "java_major": java_major,
        "python": python_facts(),  # Rocklet's side: the broker and the SDK run on it
        "pairs": args.pairs,
        "seconds": args.seconds,
        "backlog": args.backlog,  # None: each case's default (backlog_for)
        "warmup_s": args.warmup,
        "runs": [r.as_json() for r in runs],
    }


def run_vs_rocketmq(args: argparse.Namespace) -> int:
    """Run the comparison as ``args`` say; print progress to stderr and tables to stdout.

    Returns:
        0 on success; 2 when the release or Java cannot be used; 1 when a system failed.
    """
    from rocklet.benchsuite.cases import CaseError
    from rocklet.benchsuite.procs import PeerStartError
    from rocklet.benchsuite.vsrmq.measure import BacklogError
    from rocklet.benchsuite.vsrmq.release import ReleaseError, RocketMqRelease, find_java
    from rocklet.benchsuite.vsrmq.results import case_markdown
    from rocklet.benchsuite.vsrmq.runner import Plan, run_plan
    from rocklet.client.errors import ClientError

    def say(line: str) -> None:
        sys.stderr.write(f"{time.strftime('%H:%M:%S')} {line}\n")
        sys.stderr.flush()

    extra = tuple(p for p in args.extra_classpath.split(":") if p)
    try:
        release = RocketMqRelease(args.rocketmq_home.resolve(), find_java(args.java), extra)
        release.check()
    except ReleaseError as exc:
        sys.stderr.write(f"rocklet bench vs-rocketmq: {exc}\n")
        return 2
    say(_BIND_WARNING)
    python = python_facts()
    say(
        "Rocklet's broker and the Python sides of the SDK and C++ cases run on Python "
        f"{python['version']} ({python['executable']})"
    )
    plan = Plan(
        release,
        args.cases,
        args.pairs,
        args.seconds,
        args.backlog,
        args.work_dir,
        args.keep,
        warmup_s=args.warmup,
    )

    runs: list[Run] = []

    def done(run: Run) -> None:
        runs.append(run)
        rate = "-" if run.msgs_per_s is None else f"{run.msgs_per_s:,.0f}"
        cpu = "-" if run.cpu_us_per_msg is None else f"{run.cpu_us_per_msg:.1f}"
        say(
            f"  {run.case} pair {run.pair} {run.system}: {rate} msg/s, {run.messages:,} messages, "
            f"{cpu} µs CPU/msg, peak RSS {run.peak_rss_mib:.0f} MiB, "
            f"load {run.load_before:.2f}→{run.load_after:.2f}"
            + (f" ({'; '.join(run.notes)})" if run.notes else "")
        )

    status = 0
    try:
        run_plan(plan, say, done)
    except (PeerStartError, BacklogError, CaseError, ClientError, TimeoutError) as exc:
        sys.stderr.write(f"rocklet bench vs-rocketmq: {exc}\n")
        status = 1
    except KeyboardInterrupt:
        sys.stderr.write("rocklet bench vs-rocketmq: interrupted\n")
        status = 130
    if args.json is not None:
        args.json.write_text(
            json.dumps(_document(args, runs, release.java_major), indent=2) + "\n",
            encoding="utf-8",
        )
    for case in args.cases:
        if any(r.case == case.name for r in runs):
            sys.stdout.write("\n" + case_markdown(case.name, case.title, runs))
    return status
