"""Broker benchmark with the official C++ client (not a test).

Usage: python bench/broker_bench.py [--messages N] [--quick] [--threads 1,4,8] [--keep]
                                   [--no-ceiling]

Starts ``rocklet standalone`` (uvloop, ASYNC_FLUSH) on a temporary directory, creates an
8-queue topic with UPDATE_AND_CREATE_TOPIC, then runs the official C++ client (PyPI
``rocketmq==0.4.4``) in child processes through ``tests/compat/cpp_driver.py``:

0. first, the producer cases against a null broker (a child process that answers every
   request at once with Rocklet's own codec and stores nothing): the client's ceiling
   on this machine, measured in the same run, to read the broker's figures against;
1. a synchronous producer with 1, 4 and 8 threads sharing one producer, ``--messages``
   1 KiB messages each (throughput, send latency p50/p99);
2. a pull consumer (the wheel's ``PullConsumer``) draining the whole backlog;
3. a push consumer (concurrent, clustering) draining the same backlog in a new group.

For each case it reports msg/s, the latency percentiles where they apply, and the CPU
seconds the broker process and the client process used, so a reader can tell which side
was the bottleneck. Reference, Apache RocketMQ 4.9.4 on a 2-core machine like ours:
C++ sync producer ~2.5-3.5k msg/s with 1 thread and ~8k with 8; C++ pull consumer
~37-53k msg/s; push consumer ~17-23k msg/s (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import uvloop
from broker_process import Standalone, standalone

from rocklet.protocol.bodies.route import BrokerData, QueueData, TopicRouteData
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.frame import FrameDecoder, encode_command
from rocklet.protocol.headers.admin import CreateTopicRequestHeader
from rocklet.transport.dial import open_connection

DRIVER = Path(__file__).resolve().parents[1] / "tests" / "compat" / "cpp_driver.py"
TOPIC = "BenchTopic"
QUEUES = 8


@dataclass
class Result:
    """One benchmark case."""

    case: str
    messages: int
    seconds: float
    p50_ms: float | None = None
    p99_ms: float | None = None
    broker_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    other_cores: float = 0.0
    errors: int = 0

    @property
    def rate(self) -> float:
        """Messages per second."""
        return self.messages / self.seconds if self.seconds else 0.0


# --- the broker ------------------------------------------------------------------------


async def create_topic(broker_port: int, namesrv_port: int) -> None:
    """Create the 8-queue topic and wait until the name server routes it."""
    header = CreateTopicRequestHeader(
        topic=TOPIC, default_topic="TBW102", read_queue_nums=QUEUES, write_queue_nums=QUEUES, perm=6
    )
    request = RemotingCommand(
        RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=header.to_ext_fields()
    )
    async with await open_connection("127.0.0.1", broker_port) as conn:
        answer = await conn.request(request, 5)
    if answer.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"UPDATE_AND_CREATE_TOPIC failed: {answer.code} {answer.remark}")
    ask = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": TOPIC})
    deadline = time.monotonic() + 10
    async with await open_connection("127.0.0.1", namesrv_port) as ns:
        while time.monotonic() < deadline:
            route = await ns.request(ask, 5)
            if route.code == ResponseCode.SUCCESS:
                data = TopicRouteData.from_json(route.body)
                if sum(q.write_queue_nums for q in data.queue_datas) == QUEUES:
                    return
            await asyncio.sleep(0.05)  # the broker re-registers asynchronously
    raise RuntimeError(f"the name server never routed {TOPIC} with {QUEUES} queues")


# --- the client's ceiling: a responder that stores nothing -----------------------------------


class _NullBroker(asyncio.Protocol):
    """Name server and broker in one, answering at once and storing nothing.

    It decodes and encodes frames with Rocklet's own codec, so what is left of a
    producer case against it is the client's share of the round trip (and the codec).
    """

    def __init__(self, route: bytes) -> None:
        self._route = route
        self._decoder = FrameDecoder()
        self._sent = 0
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport does not subclass asyncio.Transport, but has its methods.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        assert self._transport is not None
        self._decoder.feed(data)
        for cmd in self._decoder.commands():
            if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
                answer = cmd.make_response(ResponseCode.SUCCESS, body=self._route)
            elif cmd.code == RequestCode.SEND_MESSAGE:
                self._sent += 1
                fields = {
                    "msgId": "7F00000100002A9F0000000000000000",
                    "queueOffset": str(self._sent),
                }
                fields["queueId"] = cmd.ext_fields.get("queueId", "0")
                answer = cmd.make_response(ResponseCode.SUCCESS, ext_fields=fields)
            else:
                answer = cmd.make_response(ResponseCode.SUCCESS)
            self._transport.write(encode_command(answer))


async def _serve_null() -> None:
    loop = asyncio.get_running_loop()
    holder: dict[str, bytes] = {}
    server = await loop.create_server(lambda: _NullBroker(holder["route"]), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    queue = QueueData(broker_name="null", read_queue_nums=QUEUES, write_queue_nums=QUEUES)
    broker = BrokerData(cluster="C", broker_name="null", broker_addrs={0: f"127.0.0.1:{port}"})
    holder["route"] = TopicRouteData(queue_datas=(queue,), broker_datas=(broker,)).to_json()
    print(f"null broker listening port={port}", flush=True)
    await server.serve_forever()


@contextmanager
def null_broker() -> Iterator[Standalone]:
    """Run :class:`_NullBroker` in a child process (same shape as :func:`standalone`)."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve-null"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        match = re.search(r"port=(\d+)", proc.stdout.readline())
        if match is None:
            raise RuntimeError("the null broker did not start")
        port = int(match[1])
        yield Standalone(proc, port, port)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


# --- the client cases ----------------------------------------------------------------


def run_driver(
    broker: Standalone, home: Path, command: dict[str, Any]
) -> tuple[dict[str, Any], float]:
    """Run one driver job; returns its summary line and the CPU seconds it used."""
    command = {"namesrv": f"127.0.0.1:{broker.namesrv_port}", "quiet": True, **command}
    env = {**os.environ, "HOME": str(home)}
    before = os.times()
    done = subprocess.run(
        [sys.executable, str(DRIVER), json.dumps(command)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    summary = next((e for e in lines if e["event"] in ("done", "fatal")), None)
    if summary is None or summary["event"] != "done":
        raise RuntimeError(f"driver failed: {summary}\n{done.stderr[-2000:]}")
    return summary, cpu


def machine_busy_seconds() -> float:
    """CPU seconds all processes used so far (``/proc/stat``, every core)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def measure(broker: Standalone, home: Path, case: str, command: dict[str, Any]) -> Result:
    """Run a case and attach the CPU the broker, the client and everything else used."""
    broker_before, busy_before, began = broker.cpu_seconds(), machine_busy_seconds(), time.time()
    summary, client_cpu = run_driver(broker, home, command)
    broker_cpu = broker.cpu_seconds() - broker_before
    others = machine_busy_seconds() - busy_before - broker_cpu - client_cpu
    result = Result(
        case=case,
        messages=int(summary.get("sent", summary.get("consumed", 0))),
        seconds=float(summary["seconds"]),
        p50_ms=summary.get("p50_ms"),
        p99_ms=summary.get("p99_ms"),
        broker_cpu_s=broker_cpu,
        client_cpu_s=client_cpu,
        other_cores=max(0.0, others) / (time.time() - began),
        errors=int(summary.get("errors", 0)),
    )
    print(f"  {format_row(result)}", flush=True)
    for sample in summary.get("error_samples", []):
        print(f"    error: {sample}", flush=True)
    return result


def producer_cases(
    broker: Standalone, home: Path, messages: int, threads: list[int], label: str
) -> list[Result]:
    """The sync producer with each thread count."""
    results = []
    for count in threads:
        command = {"op": "load", "topic": TOPIC, "count": messages, "threads": count}
        command |= {"body_size": 1024, "group": f"PG_bench_{count}"}
        results.append(measure(broker, home, f"{label}, {count} thread(s)", command))
    return results


def run_all(messages: int, threads: list[int], root: Path, ceiling: bool) -> list[Result]:
    """Every case against one broker, in order (the consumers drain what was produced)."""
    home = root / "home"
    home.mkdir()
    results: list[Result] = []
    if ceiling:
        with null_broker() as null:
            results += producer_cases(null, home, messages, threads, "client ceiling (null broker)")
    with standalone(root) as broker:
        asyncio.run(create_topic(broker.broker_port, broker.namesrv_port))
        produced = producer_cases(broker, home, messages, threads, "sync producer")
        results += produced
        backlog = sum(r.messages for r in produced) + len(threads)  # + the warm-up sends
        pull = {"op": "pull", "topic": TOPIC, "group": "CG_bench_pull", "max_num": 32}
        results.append(measure(broker, home, "pull consumer, backlog", pull))
        push = {"op": "push", "topic": TOPIC, "group": "CG_bench_push", "expect_count": backlog}
        push |= {"timeout_s": 600}
        results.append(measure(broker, home, "push consumer, backlog", push))
    return results


# --- reporting ---------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_row(r: Result) -> str:
    """One markdown table row."""
    return (
        f"| {r.case} | {r.messages} | {r.errors} | {r.rate:,.0f} | {_ms(r.p50_ms)} | "
        f"{_ms(r.p99_ms)} | {r.broker_cpu_s:.1f} | {r.client_cpu_s:.1f} | {r.other_cores:.2f} |"
    )


def machine() -> str:
    """nproc, CPU model and Python version, for the record."""
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return (
        f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def main() -> None:
    """Parse the options, run every case and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20000, help="per producer case")
    parser.add_argument("--quick", action="store_true", help="2000 messages per case")
    parser.add_argument("--threads", default="1,4,8", help="producer thread counts")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    parser.add_argument(
        "--no-ceiling",
        action="store_true",
        help="skip the producer cases against a null broker (the client's ceiling)",
    )
    parser.add_argument("--serve-null", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_null:
        uvloop.run(_serve_null())
        return
    messages = 2000 if args.quick else args.messages
    threads = [int(t) for t in args.threads.split(",")]
    root = Path(tempfile.mkdtemp(prefix="rocklet-bench-"))
    print(f"machine: {machine()}\ndata: {root}", flush=True)
    results = run_all(messages, threads, root, ceiling=not args.no_ceiling)
    print(
        "\n| case | messages | errors | msg/s | p50 ms | p99 ms | broker CPU s | client CPU s "
        "| other load (cores) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for result in results:
        print(format_row(result))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
