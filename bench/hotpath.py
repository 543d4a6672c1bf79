"""Hot-path benchmark: CPU per message of the broker and the SDK (not a test).

Usage: python bench/hotpath.py [--quick] [--cases raw,single,batch,pull,push]
                               [--messages N] [--consume N] [--pull-batch N]
                               [--profile-broker FILE] [--profile-client DIR] [--keep]

Starts ``rocklet standalone`` (uvloop, ASYNC_FLUSH) on a temporary directory in a child
process, creates two 8-queue topics, and runs with 1 KiB bodies:

raw     pipelined SEND_MESSAGE_V2 frames from a raw connection (no SDK): a window of
        requests in flight, one more written per answer; what the broker costs;
single  the SDK ``Producer.send`` with many sends in flight on one connection;
batch   the SDK ``Producer.send`` with lists of 128 messages (SEND_BATCH_MESSAGE); it
        also fills the backlog the consumer cases drain;
pull    the SDK ``PullConsumer``, one task per queue, draining the backlog;
push    the SDK ``PushConsumer`` (concurrent, async listener) draining it in a new group;
half    the SDK ``TransactionProducer.send_half``, 256 in flight (half messages, with a
        check immunity so that no check-back runs during the benchmark);
end     ``TransactionProducer.end`` (COMMIT) of every half message ``half`` sent, 256 in
        flight: what a transaction's second phase costs the broker.

Each row gives msg/s and the CPU microseconds per message of the broker process (user +
system from ``/proc/<pid>/stat``: every thread) and of this client process
(``getrusage``), plus how many cores everything else used meanwhile (``/proc/stat``);
a second table splits the broker's CPU by thread (event loop, flush thread...).
On a shared machine wall-clock rates follow the neighbours' load; CPU per message is the
figure to compare between runs.

``--profile-broker FILE`` runs the broker's event-loop thread under cProfile with a
per-thread CPU clock and writes the stats to FILE when the broker stops;
``--profile-client DIR`` does the same for each client case (``DIR/<case key>.prof``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import logging
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import structlog
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import raw_send
from broker_process import Standalone, profiled_launcher, standalone
from sdk_consume_bench import pull_cap_conf

from rocklet.client.admin import Admin
from rocklet.client.consume_result import ConsumeResult
from rocklet.client.errors import NoRouteError
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from rocklet.client.pull_api import PullStatus
from rocklet.client.pull_consumer import PullConsumer
from rocklet.client.push_consumer import PushConsumer
from rocklet.client.transaction import HalfMessage, LocalTransactionState, TransactionProducer
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.properties import Prop

SEND_TOPIC = "HotpathSend"
CONSUME_TOPIC = "HotpathConsume"
QUEUES = 8
BODY = b"x" * 1024

# --- measuring -------------------------------------------------------------------------


@dataclass
class Row:
    """One measured case."""

    case: str
    messages: int
    seconds: float
    broker_cpu_s: float
    client_cpu_s: float
    other_cores: float
    broker_threads: dict[str, float]

    def format(self) -> str:
        """One markdown table row."""
        n = max(1, self.messages)
        return (
            f"| {self.case} | {self.messages} | {self.messages / self.seconds:,.0f} | "
            f"{self.broker_cpu_s / n * 1e6:.1f} | {self.client_cpu_s / n * 1e6:.1f} | "
            f"{self.other_cores:.2f} |"
        )


HEADER = (
    "| case | messages | msg/s | broker CPU µs/msg | client CPU µs/msg | other load (cores) |\n"
    "| --- | ---: | ---: | ---: | ---: | ---: |"
)


def _client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _machine_busy_s() -> float:
    """CPU seconds every process on the machine used so far (``/proc/stat``)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


async def create_topics(namesrv: str) -> None:
    """Create both topics and wait until the name server routes them."""
    async with Admin(namesrv) as admin:
        for topic in (SEND_TOPIC, CONSUME_TOPIC):
            await admin.create_topic(topic, queue_nums=QUEUES)
        deadline = time.monotonic() + 20
        for topic in (SEND_TOPIC, CONSUME_TOPIC):
            while True:
                with contextlib.suppress(NoRouteError):
                    route = await admin.topic_route(topic)
                    if sum(q.write_queue_nums for q in route.queue_datas) == QUEUES:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the name server never routed {topic}")
                await asyncio.sleep(0.05)  # the broker re-registers asynchronously


def measure(
    broker: Standalone,
    case: str,
    run: Callable[[], Awaitable[tuple[int, float]]],
    profile: Path | None,
) -> Row:
    """Run one case on a fresh uvloop loop and attach the CPU both sides used."""
    broker_before, client_before = broker.cpu_seconds(), _client_cpu()
    threads_before = broker.thread_cpu()
    busy_before, began = _machine_busy_s(), time.monotonic()
    prof = cProfile.Profile(time.thread_time) if profile is not None else None

    async def profiled() -> tuple[int, float]:
        if prof is None:
            return await run()
        prof.enable()
        try:
            return await run()
        finally:
            prof.disable()

    count, seconds = uvloop.run(profiled())
    broker_cpu = broker.cpu_seconds() - broker_before
    client_cpu = _client_cpu() - client_before
    others = _machine_busy_s() - busy_before - broker_cpu - client_cpu
    threads = {
        name: cpu - threads_before.get(name, 0.0) for name, cpu in broker.thread_cpu().items()
    }
    if prof is not None and profile is not None:
        prof.dump_stats(profile)
    elapsed = time.monotonic() - began
    row = Row(case, count, seconds, broker_cpu, client_cpu, max(0.0, others) / elapsed, threads)
    print(f"  {row.format()}", flush=True)
    return row


# --- the cases -------------------------------------------------------------------------


async def run_raw(broker: Standalone, total: int, window: int) -> tuple[int, float]:
    """Raw pipelined SEND_MESSAGE_V2: the broker's cost per single send."""
    return await raw_send.run_raw(
        broker.broker_port, total, topic=SEND_TOPIC, queues=QUEUES, body=BODY, window=window
    )


async def _spread(
    total: int, inflight: int, send_one: Callable[[], Awaitable[object]]
) -> tuple[int, float]:
    """``total`` calls of ``send_one`` by ``inflight`` concurrent tasks; count and seconds."""
    left = total

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await send_one()

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    return total, time.perf_counter() - began


async def run_single(namesrv: str, total: int, inflight: int) -> tuple[int, float]:
    """SDK single sends, ``inflight`` concurrent tasks on one connection."""
    async with Producer("PG_hot_single", namesrv) as producer:
        await producer.send(Message(SEND_TOPIC, BODY))  # route lookup and connect
        return await _spread(total, inflight, lambda: producer.send(Message(SEND_TOPIC, BODY)))


async def run_batch(namesrv: str, total: int, batch: int) -> tuple[int, float]:
    """SDK batches of ``batch``, four in flight; fills the consume topic."""
    async with Producer("PG_hot_batch", namesrv) as producer:
        await producer.send(Message(SEND_TOPIC, BODY))  # route lookup and connect
        left = total

        async def worker() -> None:
            nonlocal left
            while left > 0:
                n = min(batch, left)
                left -= n
                await producer.send([Message(CONSUME_TOPIC, BODY) for _ in range(n)])

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(4)))
        return total, time.perf_counter() - began


async def run_pull(namesrv: str, total: int, batch: int) -> tuple[int, float]:
    """SDK PullConsumer, one task per queue, until the backlog is read."""
    async with PullConsumer("CG_hot_pull", namesrv) as consumer:
        queues = await consumer.fetch_queues(CONSUME_TOPIC)

        async def drain(mq: MessageQueue) -> int:
            offset = count = 0
            while True:
                result = await consumer.pull(mq, offset, batch)
                if result.status is not PullStatus.FOUND:
                    return count
                count += len(result.messages)
                offset = result.next_begin_offset

        began = time.perf_counter()
        counts = await asyncio.gather(*(drain(mq) for mq in queues))
        seconds = time.perf_counter() - began
    if sum(counts) < total:
        raise RuntimeError(f"pulled {sum(counts)} of {total}")
    return sum(counts), seconds


async def run_push(namesrv: str, total: int, batch: int) -> tuple[int, float]:
    """SDK PushConsumer (concurrent, async listener) until ``total`` are consumed."""
    seen = 0
    done = asyncio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeResult:
        nonlocal seen
        seen += len(msgs)
        if seen >= total:
            done.set()
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        "CG_hot_push", namesrv, consume_from="first", consume_batch_size=batch,
        pull_batch_size=batch,
    )  # fmt: skip
    consumer.subscribe(CONSUME_TOPIC, "*", listener)
    began = time.perf_counter()  # the start counts, as before: entering starts it
    async with consumer:
        await asyncio.wait_for(done.wait(), 600)
        return seen, time.perf_counter() - began


async def run_half(namesrv: str, total: int, handles: list[HalfMessage]) -> tuple[int, float]:
    """Half messages (``send_half``), 256 in flight; their handles go to ``handles``."""
    # No check-back while the benchmark runs: it would add the check's cost to both cases.
    immune = {Prop.CHECK_IMMUNITY_TIME_IN_SECONDS: "3600"}
    async with TransactionProducer(
        "PG_hot_txn", namesrv, check_listener=lambda _msg: LocalTransactionState.UNKNOWN
    ) as producer:
        await producer.send(Message(SEND_TOPIC, BODY))  # route lookup and connect

        async def one() -> None:
            result = await producer.send_half(Message(SEND_TOPIC, BODY, properties=immune))
            handles.append(HalfMessage.of(SEND_TOPIC, result))

        return await _spread(total, 256, one)


async def run_end(namesrv: str, handles: list[HalfMessage]) -> tuple[int, float]:
    """END_TRANSACTION (COMMIT) of every handle, 256 in flight."""
    async with TransactionProducer(
        "PG_hot_txn", namesrv, check_listener=lambda _msg: LocalTransactionState.UNKNOWN
    ) as producer:
        await producer.send(Message(SEND_TOPIC, BODY))  # route lookup and connect
        todo = iter(list(handles))

        async def worker() -> None:
            for half in todo:
                if not await producer.end(half, LocalTransactionState.COMMIT):
                    raise RuntimeError(f"END_TRANSACTION of {half.msg_id} was refused")

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(256)))
        return len(handles), time.perf_counter() - began


# --- main ------------------------------------------------------------------------------


def machine() -> str:
    """nproc, CPU model and Python version, for the record."""
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}"


def run_all(args: argparse.Namespace, root: Path) -> list[Row]:
    """Every selected case against one broker, in order."""
    cases = set(args.cases.split(","))
    profile_dir = Path(args.profile_client) if args.profile_client else None
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
    profile_broker = Path(args.profile_broker).resolve() if args.profile_broker else None
    rows: list[Row] = []
    launcher = None if profile_broker is None else profiled_launcher(profile_broker)
    extra = pull_cap_conf(args.pull_batch) + "".join(f"{line}\n" for line in args.conf)
    with standalone(root, extra_conf=extra, launcher=launcher) as broker:
        namesrv = broker.namesrv
        uvloop.run(create_topics(namesrv))
        n, consume, pb = args.messages, args.consume, args.pull_batch
        halves: list[HalfMessage] = []
        plan: list[tuple[str, str, Callable[[], Awaitable[tuple[int, float]]]]] = [
            ("raw", "raw SEND_MESSAGE_V2, 256 in flight", lambda: run_raw(broker, n, 256)),
            ("single", "SDK send, 256 in flight", lambda: run_single(namesrv, n // 2, 256)),
            ("batch", "SDK batches of 128", lambda: run_batch(namesrv, consume, 128)),
            ("pull", f"SDK PullConsumer, {pb}/pull", lambda: run_pull(namesrv, consume, pb)),
            ("push", f"SDK PushConsumer, {pb}/pull", lambda: run_push(namesrv, consume, pb)),
            ("half", "SDK send_half, 256 in flight", lambda: run_half(namesrv, n // 2, halves)),
            ("end", "SDK end (COMMIT), 256 in flight", lambda: run_end(namesrv, halves)),
        ]
        for key, case, run in plan:
            if key in cases:
                profile = None if profile_dir is None else profile_dir / f"{key}.prof"
                rows.append(measure(broker, case, run, profile))
    return rows


def main() -> None:
    """Parse the options, run the cases and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="raw sends (SDK: half)")
    parser.add_argument("--consume", type=int, default=200_000, help="batch sends = backlog")
    parser.add_argument("--pull-batch", type=int, default=32, help="messages per pull")
    parser.add_argument("--cases", default="raw,single,batch,pull,push")
    parser.add_argument("--quick", action="store_true", help="10000 raw, 20000 backlog")
    parser.add_argument("--profile-broker", metavar="FILE", help="cProfile the broker")
    parser.add_argument("--profile-client", metavar="DIR", help="cProfile each client case")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker.conf line for the broker (repeatable), e.g. offloadWrites=false",
    )
    args = parser.parse_args()
    if args.quick:
        args.messages, args.consume = 10_000, 20_000
    logging.disable(logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    root = Path(tempfile.mkdtemp(prefix="rocklet-hotpath-"))
    print(f"machine: {machine()}\ndata: {root}", flush=True)
    rows = run_all(args, root)
    print(f"\n{HEADER}")
    for row in rows:
        print(row.format())
    print("\nbroker CPU µs/msg by thread (threads above 1 µs/msg):")
    for row in rows:
        per_msg = {
            name: cpu / max(1, row.messages) * 1e6 for name, cpu in row.broker_threads.items()
        }
        busy = sorted((us, name) for name, us in per_msg.items() if us >= 1)
        print(f"  {row.case}: " + ", ".join(f"{name} {us:.1f}" for us, name in reversed(busy)))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
