"""SDK producer benchmark against the official C++ client, same broker, same run (not a test).

Usage: python bench/sdk_bench.py [--messages N] [--batched N] [--batch N] [--only-batch]
[--repeat N] [--quick] [--keep]

``--only-batch`` runs the JSON batch case alone, ``--repeat`` times against one broker
(issue 17's batch-produce goal: ``--only-batch --batch 256 --batched 200000 --repeat 3``).

Starts ``rocklet standalone`` (uvloop, ASYNC_FLUSH) on a temporary directory, creates an
8-queue topic, then sends 1 KiB messages:

1. the SDK's async producer, single sends pipelined over one connection (``--inflight``
   sends in flight), with JSON headers and with msgpack headers (Rocklet-only);
2. the SDK's async producer with batches (``--batch`` messages per SEND_BATCH_MESSAGE,
   a few batches in flight), JSON and msgpack headers;
3. the official C++ producer (PyPI ``rocketmq==0.4.4``, sync sends from 8 threads, in a
   child process through ``tests/compat/cpp_driver.py``), for comparison.

The SDK runs in this process on uvloop. Each row reports msg/s, send latency
percentiles (per request: one message, or one batch), and the CPU seconds used by the
broker and by the client, so a reader can tell which side was the bottleneck: on a
shared 2-core machine wall-clock rates vary with the neighbours' load, CPU per message
much less.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker_process import Standalone, standalone

from rocklet.client.admin import Admin
from rocklet.client.errors import NoRouteError
from rocklet.client.message import Message
from rocklet.client.producer import Producer

DRIVER = Path(__file__).resolve().parents[1] / "tests" / "compat" / "cpp_driver.py"
TOPIC = "SdkBenchTopic"
QUEUES = 8
BODY = b"x" * 1024


@dataclass(frozen=True)
class Case:
    """One SDK producer configuration."""

    name: str
    messages: int
    batch: int  #: messages per request (1 = single sends)
    inflight: int  #: requests in flight at once
    msgpack: bool


@dataclass
class Result:
    """One measured case."""

    case: str
    messages: int
    seconds: float
    p50_ms: float
    p99_ms: float
    broker_cpu_s: float
    client_cpu_s: float

    def row(self) -> str:
        """One markdown table row."""
        rate = self.messages / self.seconds if self.seconds else 0.0
        per_msg = 1e6 / self.messages if self.messages else 0.0
        return (
            f"| {self.case} | {self.messages} | {rate:,.0f} | {self.p50_ms:.2f} | "
            f"{self.p99_ms:.2f} | {self.broker_cpu_s * per_msg:.1f} | "
            f"{self.client_cpu_s * per_msg:.1f} |"
        )


HEADER = (
    "| case | messages | msg/s | p50 ms | p99 ms | broker CPU µs/msg | client CPU µs/msg |\n"
    "|---|---|---|---|---|---|---|"
)


# --- the broker ------------------------------------------------------------------------


async def create_topic(namesrv: str) -> None:
    """Create the topic on the broker and wait until the name server routes it."""
    async with Admin(namesrv) as admin:
        await admin.create_topic(TOPIC, queue_nums=QUEUES)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(NoRouteError):
                route = await admin.topic_route(TOPIC)
                if sum(q.write_queue_nums for q in route.queue_datas) == QUEUES:
                    return
            await asyncio.sleep(0.05)  # the broker re-registers asynchronously
    raise RuntimeError(f"the name server never routed {TOPIC} with {QUEUES} queues")


# --- the clients -----------------------------------------------------------------------


def _client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _run_sdk(namesrv: str, case: Case) -> tuple[int, float, list[float]]:
    group = f"PG_sdk_{case.batch}_{int(case.msgpack)}"
    async with Producer(group, namesrv, msgpack_headers=case.msgpack) as producer:
        await producer.send(Message(TOPIC, BODY))  # route lookup and connect: warm-up
        requests = case.messages // case.batch
        latencies: list[float] = []
        next_request = 0

        async def worker() -> None:
            nonlocal next_request
            while next_request < requests:
                next_request += 1
                # Built inside the loop: a real application builds its messages too.
                payload: Message | list[Message] = (
                    Message(TOPIC, BODY)
                    if case.batch == 1
                    else [Message(TOPIC, BODY) for _ in range(case.batch)]
                )
                began = time.perf_counter()
                await producer.send(payload)
                latencies.append(time.perf_counter() - began)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(case.inflight)))
        return requests * case.batch, time.perf_counter() - began, latencies


def measure_sdk(broker: Standalone, case: Case) -> Result:
    """Run one SDK case on uvloop and attach both sides' CPU."""
    namesrv = broker.namesrv
    broker_before, client_before = broker.cpu_seconds(), _client_cpu()
    sent, seconds, latencies = uvloop.run(_run_sdk(namesrv, case))
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    result = Result(
        case=case.name,
        messages=sent,
        seconds=seconds,
        p50_ms=pct(0.50),
        p99_ms=pct(0.99),
        broker_cpu_s=broker.cpu_seconds() - broker_before,
        client_cpu_s=_client_cpu() - client_before,
    )
    print(f"  {result.row()}", flush=True)
    return result


def measure_cpp(broker: Standalone, home: Path, messages: int, threads: int) -> Result:
    """The official C++ producer's ``load`` job in a child process (cpp_driver.py)."""
    command: dict[str, Any] = {"op": "load", "namesrv": broker.namesrv, "topic": TOPIC}
    command |= {"count": messages, "threads": threads, "body_size": 1024, "quiet": True}
    command |= {"group": "PG_bench_cpp"}
    broker_before, children_before = broker.cpu_seconds(), os.times()
    done = subprocess.run(
        [sys.executable, str(DRIVER), json.dumps(command)],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home)},
        timeout=900,
        check=False,
    )
    after = os.times()
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    summary = next((e for e in events if e["event"] in ("done", "fatal")), None)
    if summary is None or summary["event"] != "done":
        raise RuntimeError(f"C++ driver failed: {summary}\n{done.stderr[-2000:]}")
    result = Result(
        case=f"C++ sync producer, {threads} threads",
        messages=int(summary["sent"]),
        seconds=float(summary["seconds"]),
        p50_ms=float(summary["p50_ms"]),
        p99_ms=float(summary["p99_ms"]),
        broker_cpu_s=broker.cpu_seconds() - broker_before,
        client_cpu_s=(after.children_user - children_before.children_user)
        + (after.children_system - children_before.children_system),
    )
    print(f"  {result.row()}", flush=True)
    return result


def machine() -> str:
    """nproc, CPU model and Python version, for the record."""
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}"


def run_all(args: argparse.Namespace, root: Path) -> list[Result]:
    """Every case against one broker, in order."""
    single, batched = args.messages, args.batched
    batch_json = Case(f"SDK batches of {args.batch}, JSON", batched, args.batch, 4, False)
    cases = [
        Case(f"SDK pipelined, {args.inflight} in flight, JSON", single, 1, args.inflight, False),
        Case(f"SDK pipelined, {args.inflight} in flight, msgpack", single, 1, args.inflight, True),
        batch_json,
        Case(f"SDK batches of {args.batch}, msgpack", batched, args.batch, 4, True),
    ]
    if args.only_batch:
        # The batch-produce goal of issue 17: the JSON batch case alone, measured
        # ``--repeat`` times against one broker (the first run also warms it up).
        cases = [batch_json] * args.repeat
    home = root / "home"
    home.mkdir()
    results: list[Result] = []
    with standalone(root) as broker:
        uvloop.run(create_topic(broker.namesrv))
        results += [measure_sdk(broker, case) for case in cases]
        if not args.only_batch:
            results.append(measure_cpp(broker, home, single, 8))
    return results


def main() -> None:
    """Parse the options, run every case and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20000, help="single-send cases")
    parser.add_argument("--batched", type=int, default=200000, help="batch cases")
    parser.add_argument("--batch", type=int, default=128, help="messages per batch")
    parser.add_argument("--inflight", type=int, default=256, help="single sends in flight")
    parser.add_argument(
        "--only-batch", action="store_true", help="only the JSON batch case (no C++ client)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of it, with --only-batch")
    parser.add_argument("--quick", action="store_true", help="2000 / 20000 messages")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args()
    if args.quick:
        args.messages, args.batched = 2000, 20000
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    root = Path(tempfile.mkdtemp(prefix="rocklet-sdk-bench-"))
    print(f"machine: {machine()}\ndata: {root}", flush=True)
    results = run_all(args, root)
    print(f"\n{HEADER}")
    for result in results:
        print(result.row())
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
