"""What TLS costs: the same SDK workloads over plain TCP and over TLS (not a test).

Usage: python bench/tls_bench.py [--rounds N] [--quick] [--tls-only] [--plain-only]

Starts one ``rocklet standalone`` (uvloop, ASYNC_FLUSH) in TLS ``permissive`` mode, so
plain and TLS clients reach the very same broker on the same ports, with a certificate
made for the run (trustme, a dev dependency). Then, ``--rounds`` times, in alternating
order (plain first, then TLS first, ...), each of:

1. the SDK producer, single 1 KiB sends, 256 in flight, JSON headers;
2. the SDK producer, batches of 128 x 1 KiB, 4 batches in flight;
3. the SDK pull consumer draining what (2) wrote, 32 per pull, one task per queue.

Every case gets a fresh 8-queue topic. A row reports msg/s and the broker's CPU per
message (``/proc/<pid>/stat``): on a shared machine wall-clock rates move with the
neighbours' load, CPU per message much less. The load average is printed beside each
round; the summary gives the median of each case and the TLS / plain ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shutil
import ssl
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import structlog
import trustme
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker_process import Standalone, standalone

from rocklet.client.admin import Admin
from rocklet.client.errors import NoRouteError
from rocklet.client.message import Message
from rocklet.client.producer import Producer
from rocklet.client.pull_api import PullStatus
from rocklet.client.pull_consumer import PullConsumer
from rocklet.protocol.bodies.queue import MessageQueue

QUEUES = 8
BODY = b"x" * 1024
_topics = iter(range(1, 1_000_000))


@dataclass
class Sample:
    """One measured case."""

    case: str
    mode: str  #: "plain" or "TLS"
    messages: int
    seconds: float
    broker_cpu_s: float

    @property
    def rate(self) -> float:
        """Messages per second."""
        return self.messages / self.seconds

    @property
    def cpu_us(self) -> float:
        """Broker CPU microseconds per message."""
        return self.broker_cpu_s * 1e6 / self.messages


def make_certs(root: Path) -> tuple[str, Path]:
    """A CA and a server certificate for 127.0.0.1; returns the broker.conf lines, the CA."""
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    cert, key, ca_file = root / "server.pem", root / "server.key", root / "ca.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_file))
    conf = (
        f"tls.server.mode = permissive\ntls.server.certPath = {cert}\ntls.server.keyPath = {key}\n"
    )
    return conf, ca_file


async def new_topic(namesrv: str, tls: ssl.SSLContext | None) -> str:
    """Create a fresh 8-queue topic and wait until the name server routes it."""
    topic = f"TlsBench{next(_topics)}"
    async with Admin(namesrv, tls=tls) as admin:
        await admin.create_topic(topic, queue_nums=QUEUES)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(NoRouteError):
                route = await admin.topic_route(topic)
                if sum(q.write_queue_nums for q in route.queue_datas) == QUEUES:
                    return topic
            await asyncio.sleep(0.05)  # the broker re-registers asynchronously
    raise RuntimeError(f"no route for {topic}")


async def produce(
    namesrv: str, tls: ssl.SSLContext | None, topic: str, count: int, batch: int, inflight: int
) -> float:
    """Send ``count`` messages, ``batch`` per request, ``inflight`` requests at once."""
    async with Producer(f"PG_{topic}", namesrv, tls=tls) as producer:
        await producer.send(Message(topic, BODY))  # route and connections: warm-up
        remaining = count // batch

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                if batch == 1:
                    await producer.send(Message(topic, BODY))
                else:
                    await producer.send([Message(topic, BODY) for _ in range(batch)])

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(inflight)))
        return time.perf_counter() - began


async def drain(namesrv: str, tls: ssl.SSLContext | None, topic: str) -> tuple[int, float]:
    """Pull every queue of ``topic`` to its end; returns messages and seconds."""
    async with PullConsumer(f"CG_{topic}", namesrv, tls=tls) as consumer:
        queues = await consumer.fetch_queues(topic)
        ends = {mq: await consumer.max_offset(mq) for mq in queues}

        async def one(mq: MessageQueue) -> int:
            offset, got = 0, 0
            while offset < ends[mq]:
                result = await consumer.pull(mq, offset, 32)
                if result.status is not PullStatus.FOUND:
                    break
                got += len(result.messages)
                offset = result.next_begin_offset
            return got

        began = time.perf_counter()
        counts = await asyncio.gather(*(one(mq) for mq in queues))
        return sum(counts), time.perf_counter() - began


def run_mode(
    broker: Standalone, mode: str, ca_file: Path, args: argparse.Namespace
) -> list[Sample]:
    """The three cases, in one event loop, for one mode."""

    async def main() -> list[Sample]:
        tls = ssl.create_default_context(cafile=str(ca_file)) if mode == "TLS" else None
        out = []
        for case, count, batch, inflight in (
            ("producer, single sends, 256 in flight", args.single, 1, 256),
            ("producer, batches of 128", args.batched, 128, 4),
        ):
            topic = await new_topic(broker.namesrv, tls)
            before = broker.cpu_seconds()
            seconds = await produce(broker.namesrv, tls, topic, count, batch, inflight)
            out.append(Sample(case, mode, count, seconds, broker.cpu_seconds() - before))
            if batch > 1:
                before = broker.cpu_seconds()
                got, seconds = await drain(broker.namesrv, tls, topic)
                cpu = broker.cpu_seconds() - before
                out.append(Sample("pull consumer, 32 per pull", mode, got, seconds, cpu))
        return out

    return uvloop.run(main())


def load() -> str:
    """The load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    """Alternate plain and TLS rounds and print every sample and the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="plain/TLS pairs (3)")
    parser.add_argument("--single", type=int, default=20000, help="single sends per case")
    parser.add_argument("--batched", type=int, default=200000, help="batched messages per case")
    parser.add_argument("--quick", action="store_true", help="2000 / 20000 messages, 2 rounds")
    args = parser.parse_args()
    if args.quick:
        args.single, args.batched, args.rounds = 2000, 20000, 2
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    root = Path(tempfile.mkdtemp(prefix="rocklet-tls-bench-"))
    conf, ca_file = make_certs(root)
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, data in {root}", flush=True)
    samples: list[Sample] = []
    try:
        with standalone(root, extra_conf=conf) as broker:
            for n in range(args.rounds):
                order = ("plain", "TLS") if n % 2 == 0 else ("TLS", "plain")
                for mode in order:
                    print(f"round {n + 1} {mode}: load {load()}", flush=True)
                    for s in run_mode(broker, mode, ca_file, args):
                        samples.append(s)
                        print(
                            f"  {s.case:40} {s.mode:5} {s.rate:>9,.0f} msg/s "
                            f"{s.cpu_us:6.1f} broker µs/msg",
                            flush=True,
                        )
            print(f"load at the end: {load()}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\n| case | plain msg/s | TLS msg/s | plain broker µs/msg | TLS broker µs/msg |")
    print("|---|---:|---:|---:|---:|")
    for case in dict.fromkeys(s.case for s in samples):

        def med(mode: str, attr: str, case: str = case) -> float:
            return statistics.median(
                getattr(s, attr) for s in samples if (s.case, s.mode) == (case, mode)
            )

        print(
            f"| {case} | {med('plain', 'rate'):,.0f} | {med('TLS', 'rate'):,.0f} | "
            f"{med('plain', 'cpu_us'):.1f} | {med('TLS', 'cpu_us'):.1f} |"
        )


if __name__ == "__main__":
    main()
