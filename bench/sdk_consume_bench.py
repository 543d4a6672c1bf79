"""SDK consumer benchmark against the official C++ client, same broker, same run (not a test).

Usage: python bench/sdk_consume_bench.py [--messages N] [--quick] [--skip-cpp]
       [--big-batch N] [--keep]

Two phases, each with its own ``rocklet standalone`` (uvloop, ASYNC_FLUSH) on a temporary
directory and an 8-queue topic filled with a backlog of ``--messages`` 1 KiB messages
(the SDK's batch producer). Phase one caps pulls at RocketMQ's default of 32 messages
(``maxTransferCountOnMessageInMemory``); phase two at ``--big-batch`` (256), to show
what the per-request cost is. Each case drains the whole backlog in a new group:

1. the SDK's push consumer, concurrent, an ``async def`` listener that counts, one
   pull's worth of messages per listener call;
2. the same with a plain-function listener (run in the consumer's thread pool);
3. the SDK's pull consumer, one task per queue;
4. the SDK's lite pull consumer, ``poll()`` in a loop;
5. (phase one) the official C++ pull and push consumers (PyPI ``rocketmq==0.4.4``,
   child processes through ``tests/compat/cpp_driver.py``), for comparison.

The SDK runs in this process on uvloop. Each row reports msg/s, the client's CPU per
message, and the CPU seconds the broker, the client and everything else on the machine
used, so a reader can tell which side was the bottleneck (on 2 cores they compete).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker_bench import (
    QUEUES,
    TOPIC,
    create_topic,
    machine,
    machine_busy_seconds,
    measure,
)
from broker_process import Standalone, standalone

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.lite_pull_consumer import LitePullConsumer
from rocklet.client.message import Message, MessageExt
from rocklet.client.producer import Producer
from rocklet.client.pull_api import PullStatus
from rocklet.client.pull_consumer import PullConsumer
from rocklet.client.push_consumer import PushConsumer
from rocklet.protocol.bodies.queue import MessageQueue

BODY = b"x" * 1024
BATCH = 32
HEADER = (
    "| case | messages | msg/s | client CPU µs/msg | broker CPU s | client CPU s "
    "| other load (cores) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
)


@dataclass(frozen=True)
class Row:
    """One consumer case."""

    case: str
    messages: int
    seconds: float
    broker_cpu_s: float
    client_cpu_s: float
    other_cores: float

    def format(self) -> str:
        """One markdown table row."""
        rate = self.messages / self.seconds if self.seconds else 0.0
        per_msg = self.client_cpu_s / self.messages * 1e6 if self.messages else 0.0
        return (
            f"| {self.case} | {self.messages} | {rate:,.0f} | {per_msg:.1f} | "
            f"{self.broker_cpu_s:.1f} | {self.client_cpu_s:.1f} | {self.other_cores:.2f} |"
        )

    @classmethod
    def of(cls, result: Any) -> Row:
        """From a ``broker_bench.Result`` (the C++ cases)."""
        return cls(
            result.case,
            result.messages,
            result.seconds,
            result.broker_cpu_s,
            result.client_cpu_s,
            getattr(result, "other_cores", 0.0),
        )


def pull_cap_conf(transfer: int) -> str:
    """broker.conf lines capping one pull at ``transfer`` messages (RocketMQ's default: 32)."""
    return (
        f"maxTransferCountOnMessageInMemory = {transfer}\n"
        f"maxTransferBytesOnMessageInMemory = {max(256, transfer * 2) * 1024}\n"
    )


def _client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def fill(namesrv: str, count: int) -> None:
    """Produce the backlog: batches of 64, a few in flight."""
    async with Producer("PG_consume_bench", namesrv) as producer:
        sent = 0

        async def worker() -> None:
            nonlocal sent
            while sent < count:
                n = min(64, count - sent)
                sent += n
                await producer.send([Message(TOPIC, BODY) for _ in range(n)])

        await asyncio.gather(*(worker() for _ in range(4)))


async def drain_push(
    namesrv: str, group: str, count: int, *, threaded: bool, batch: int = BATCH
) -> float:
    """Seconds for a push consumer to see ``count`` messages."""
    seen = 0
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    def counted(n: int) -> None:
        nonlocal seen
        seen += n
        if seen >= count:
            done.set()

    async def listener(msgs: list[MessageExt]) -> ConsumeResult:
        counted(len(msgs))
        return ConsumeResult.SUCCESS

    def plain(msgs: list[MessageExt]) -> ConsumeResult:
        loop.call_soon_threadsafe(counted, len(msgs))
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        group, namesrv, consume_from="first", consume_batch_size=batch, pull_batch_size=batch
    )
    consumer.subscribe(TOPIC, "*", plain if threaded else listener)
    began = time.perf_counter()  # the start counts: entering starts the consumer
    async with consumer:
        await done.wait()
        return time.perf_counter() - began


async def drain_pull(namesrv: str, group: str, count: int, batch: int = BATCH) -> float:
    """Seconds for a pull consumer (a task per queue) to read ``count`` messages."""
    async with PullConsumer(group, namesrv) as consumer:
        queues = await consumer.fetch_queues(TOPIC)
        began = time.perf_counter()
        totals = await asyncio.gather(*(_pull_queue(consumer, mq, batch) for mq in queues))
        elapsed = time.perf_counter() - began
    if sum(totals) < count:
        raise RuntimeError(f"pulled {sum(totals)} of {count}")
    return elapsed


async def _pull_queue(consumer: PullConsumer, mq: MessageQueue, batch: int) -> int:
    offset, total = 0, 0
    while True:
        result = await consumer.pull(mq, offset, batch)
        if result.status is not PullStatus.FOUND:
            return total
        total += len(result.messages)
        offset = result.next_begin_offset


async def drain_lite(namesrv: str, group: str, count: int, batch: int = BATCH) -> float:
    """Seconds for a lite pull consumer's ``poll()`` loop to return ``count`` messages."""
    consumer = LitePullConsumer(group, namesrv, consume_from="first", pull_batch_size=batch)
    consumer.assign(MessageQueue(TOPIC, "broker-a", q) for q in range(QUEUES))
    began = time.perf_counter()  # the start counts: entering starts the consumer
    async with consumer:
        seen = 0
        while seen < count:
            seen += len(await consumer.poll(timeout_ms=5000))
        return time.perf_counter() - began


def measure_sdk(
    broker: Standalone, case: str, count: int, run: Callable[[], Coroutine[Any, Any, float]]
) -> Row:
    """Run one SDK case on uvloop and attach the CPU both sides and the rest used."""
    broker_before, client_before = broker.cpu_seconds(), _client_cpu()
    busy_before, began = machine_busy_seconds(), time.time()
    seconds = uvloop.run(run())
    broker_cpu = broker.cpu_seconds() - broker_before
    client_cpu = _client_cpu() - client_before
    others = machine_busy_seconds() - busy_before - broker_cpu - client_cpu
    row = Row(
        case, count, seconds, broker_cpu, client_cpu, max(0.0, others) / (time.time() - began)
    )
    print(f"  {row.format()}", flush=True)
    return row


def sdk_cases(
    namesrv: str, count: int, batch: int
) -> list[tuple[str, Callable[[], Coroutine[Any, Any, float]]]]:
    """The SDK cases for one pull size; each drains the backlog in a new group."""
    tag = f"{batch}/pull"
    return [
        (
            f"SDK push, async listener, {tag}",
            lambda: drain_push(namesrv, f"CG_a{batch}", count, threaded=False, batch=batch),
        ),
        (
            f"SDK push, thread listener, {tag}",
            lambda: drain_push(namesrv, f"CG_t{batch}", count, threaded=True, batch=batch),
        ),
        (f"SDK pull consumer, {tag}", lambda: drain_pull(namesrv, f"CG_p{batch}", count, batch)),
        (f"SDK lite pull, {tag}", lambda: drain_lite(namesrv, f"CG_l{batch}", count, batch)),
    ]


def run_all(args: argparse.Namespace, root: Path) -> list[Row]:
    """For each pull size: a broker capped at it, the backlog, every consumer case."""
    count = 20000 if args.quick else args.messages
    results: list[Row] = []
    for batch in (BATCH, args.big_batch):
        phase = root / f"pull{batch}"
        (phase / "home").mkdir(parents=True)
        with standalone(phase, extra_conf=pull_cap_conf(batch)) as broker:
            namesrv = f"127.0.0.1:{broker.namesrv_port}"
            asyncio.run(create_topic(broker.broker_port, broker.namesrv_port))
            began = time.perf_counter()
            uvloop.run(fill(namesrv, count))
            print(f"  backlog of {count} in {time.perf_counter() - began:.1f} s", flush=True)
            for case, run in sdk_cases(namesrv, count, batch):
                results.append(measure_sdk(broker, case, count, run))
            if not args.skip_cpp and batch == BATCH:
                results.extend(cpp_cases(broker, phase / "home", count))
    return results


def cpp_cases(broker: Standalone, home: Path, count: int) -> list[Row]:
    """The official C++ pull and push consumers draining the same backlog."""
    pull = {"op": "pull", "topic": TOPIC, "group": "CG_cpp_pull", "max_num": BATCH}
    push = {"op": "push", "topic": TOPIC, "group": "CG_cpp_push", "expect_count": count}
    push |= {"timeout_s": 600}
    return [
        Row.of(measure(broker, home, "C++ pull consumer, 32/pull", pull)),
        Row.of(measure(broker, home, "C++ push consumer, 32/pull", push)),
    ]


def main() -> None:
    """Parse the options, run every case and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000, help="backlog size")
    parser.add_argument("--quick", action="store_true", help="a 20000-message backlog")
    parser.add_argument("--skip-cpp", action="store_true", help="no C++ comparison")
    parser.add_argument(
        "--big-batch", type=int, default=256, help="pull size of the second phase (default 256)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    root = Path(tempfile.mkdtemp(prefix="rocklet-consume-bench-"))
    print(f"machine: {machine()}\ndata: {root}", flush=True)
    results = run_all(args, root)
    print(f"\n{HEADER}")
    for row in results:
        print(row.format())
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
