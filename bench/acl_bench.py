"""ACL on vs off: what checking every request costs the broker (not a test).

Usage: python bench/acl_bench.py [--pairs N] [--messages N] [--quick]   (make bench-acl)

Runs ``rocklet standalone`` (uvloop, ASYNC_FLUSH) twice per pair, alternating: once with
``aclEnable=false``, once with ``aclEnable=true`` and a plain_acl.yml whose producer and
consumer accounts have per-topic and per-group rights (so every request goes through
the whole check: account lookup, HmacSHA1 over the ext fields and the body, the
resource map). Against each broker, on the same 8-queue topic with 1 KiB bodies:

0. **raw send**: pipelined SEND_MESSAGE_V2 frames from a raw connection (256 in
   flight, signed per message when ACL is on): the broker's cost alone;
1. **send**: the SDK producer, single sends pipelined (256 in flight), JSON headers,
   signed when ACL is on;
2. **pull**: the SDK pull consumer draining every queue, 32 messages per pull, signed
   when ACL is on;
3. **C++ send**: the official C++ producer (``rocketmq==0.4.4``, 8 threads, sync
   sends, ``set_session_credentials`` when ACL is on) in a child process.

Each row gives msg/s and the broker's CPU microseconds per message (from
``/proc/<pid>/stat``), which on a shared machine varies much less than wall-clock rates;
the other processes' load during the run is printed too. Last, in this process, the
cost of signing one 1 KiB SEND_MESSAGE_V2 (client side) and of the broker's check of it
(the registry gate: account, HmacSHA1, permissions), best of five ``timeit`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import timeit
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
import uvloop
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import raw_send
from broker_process import Standalone, standalone
from sdk_bench import machine

from rocklet.client import Admin, Credentials, Message, Producer, PullConsumer
from rocklet.protocol.acl import sign
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.command import RemotingCommand

DRIVER = Path(__file__).resolve().parents[1] / "tests" / "compat" / "cpp_driver.py"
TOPIC = "AclBenchTopic"
GROUP = "AclBenchGroup"
QUEUES = 8
BODY = b"x" * 1024
INFLIGHT = 256
PRODUCER = Credentials("bench-producer", "bench-producer-secret")
CONSUMER = Credentials("bench-consumer", "bench-consumer-secret")
ADMIN = Credentials("bench-admin", "bench-admin-secret")


def acl_file(path: Path) -> Path:
    """Write the accounts file the ACL-on broker reads."""
    document = {
        "accounts": [
            {
                "accessKey": PRODUCER.access_key,
                "secretKey": PRODUCER.secret_key,
                "defaultTopicPerm": "DENY",
                "topicPerms": [f"{TOPIC}=PUB", "other=DENY"],
                "groupPerms": ["other=DENY"],
            },
            {
                "accessKey": CONSUMER.access_key,
                "secretKey": CONSUMER.secret_key,
                "defaultTopicPerm": "DENY",
                "defaultGroupPerm": "DENY",
                "topicPerms": [f"{TOPIC}=SUB"],
                "groupPerms": [f"{GROUP}=SUB"],
            },
            {"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True},
        ]
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    path.chmod(0o600)
    return path


@dataclass
class Row:
    """One measured case."""

    case: str
    acl: bool
    messages: int
    seconds: float
    broker_cpu_s: float
    other_load: float

    def line(self) -> str:
        """A markdown table row."""
        rate = self.messages / self.seconds if self.seconds else 0.0
        cpu = self.broker_cpu_s * 1e6 / self.messages if self.messages else 0.0
        acl = "on" if self.acl else "off"
        return (
            f"| {self.case} | {acl} | {self.messages} | {rate:,.0f} | {cpu:.1f} | "
            f"{self.other_load:.2f} |"
        )


HEADER = (
    "| case | ACL | messages | msg/s | broker CPU µs/msg | other load (cores) |\n"
    "|---|---|---:|---:|---:|---:|"
)


def _busy_jiffies() -> tuple[int, int]:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in fields]
    return sum(values) - values[3] - values[4], sum(values)  # busy, total


class Meter:
    """Broker CPU and the machine's other load over one case."""

    def __init__(self, broker: Standalone) -> None:
        self._broker = broker

    def __enter__(self) -> Meter:
        self._cpu = self._broker.cpu_seconds()
        self._stat = _busy_jiffies()
        self._began = time.monotonic()
        self._self = os.times()
        return self

    def __exit__(self, *exc: object) -> None:
        self.broker_cpu_s = self._broker.cpu_seconds() - self._cpu
        busy, total = _busy_jiffies()
        wall = time.monotonic() - self._began
        cores = (busy - self._stat[0]) / max(1, total - self._stat[1]) * (os.cpu_count() or 1)
        mine = os.times()
        own = (
            mine.user
            - self._self.user
            + mine.system
            - self._self.system
            + mine.children_user
            - self._self.children_user
            + mine.children_system
            - self._self.children_system
        )
        # What neither the broker nor this process (nor its C++ child) used.
        self.other_load = max(0.0, cores - (self.broker_cpu_s + own) / max(wall, 1e-9))


async def _prepare(namesrv: str, acl: bool) -> None:
    async with Admin(namesrv, instance_name="bench-admin", credentials=ADMIN if acl else None) as a:
        await a.create_topic(TOPIC, queue_nums=QUEUES)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            route = await a.topic_route(TOPIC)
            if sum(q.write_queue_nums for q in route.queue_datas) == QUEUES:
                return
            await asyncio.sleep(0.05)  # the broker re-registers asynchronously
    raise RuntimeError("topic never routed")


async def _raw(broker: Standalone, messages: int, acl: bool) -> tuple[int, float]:
    return await raw_send.run_raw(
        broker.broker_port,
        messages,
        topic=TOPIC,
        queues=QUEUES,
        body=BODY,
        window=INFLIGHT,
        credentials=PRODUCER if acl else None,
    )


async def _send(namesrv: str, messages: int, acl: bool) -> tuple[int, float]:
    creds = PRODUCER if acl else None
    async with Producer("AclBenchPG", namesrv, credentials=creds) as producer:
        await producer.send(Message(TOPIC, BODY))  # warm-up: route and connection
        left = messages

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await producer.send(Message(TOPIC, BODY))

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(INFLIGHT)))
        return messages, time.perf_counter() - began


async def _pull(namesrv: str, acl: bool) -> tuple[int, float]:
    creds = CONSUMER if acl else None
    async with PullConsumer(GROUP, namesrv, credentials=creds) as consumer:
        queues = await consumer.fetch_queues(TOPIC)
        began, count = time.perf_counter(), 0

        async def drain(mq: Any) -> int:
            offset, got = 0, 0
            while True:
                result = await consumer.pull(mq, offset, 32)
                if not result.messages:
                    return got
                got += len(result.messages)
                offset = result.next_begin_offset

        count = sum(await asyncio.gather(*(drain(mq) for mq in queues)))
        return count, time.perf_counter() - began


def _cpp_send(broker: Standalone, home: Path, messages: int, acl: bool) -> tuple[int, float]:
    command: dict[str, Any] = {"op": "load", "namesrv": broker.namesrv, "topic": TOPIC}
    command |= {"count": messages, "threads": 8, "body_size": 1024, "quiet": True}
    command |= {"group": "AclBenchCpp"}
    if acl:
        command |= {"access_key": PRODUCER.access_key, "secret_key": PRODUCER.secret_key}
    done = subprocess.run(
        [sys.executable, str(DRIVER), json.dumps(command)],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home)},
        timeout=900,
        check=False,
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    summary = next((e for e in events if e["event"] in ("done", "fatal")), None)
    if summary is None or summary["event"] != "done":
        raise RuntimeError(f"C++ driver failed: {summary}\n{done.stderr[-2000:]}")
    return int(summary["sent"]), float(summary["seconds"])


def run_one(root: Path, acl: bool, messages: int) -> list[Row]:
    """Every case against one fresh broker, ACL on or off."""
    extra = f"aclEnable = true\naclFile = {acl_file(root / 'plain_acl.yml')}\n" if acl else ""
    home = root / "home"
    home.mkdir()
    rows: list[Row] = []
    with standalone(root, extra_conf=extra) as broker:
        uvloop.run(_prepare(broker.namesrv, acl))
        for case, run in (
            ("raw send, 256 in flight", lambda: uvloop.run(_raw(broker, messages, acl))),
            ("SDK send, 256 in flight", lambda: uvloop.run(_send(broker.namesrv, messages, acl))),
            ("SDK pull, 32 per pull", lambda: uvloop.run(_pull(broker.namesrv, acl))),
            ("C++ send, 8 threads", lambda: _cpp_send(broker, home, messages, acl)),
        ):
            with Meter(broker) as meter:
                count, seconds = run()
            row = Row(case, acl, count, seconds, meter.broker_cpu_s, meter.other_load)
            print(f"  {row.line()}", flush=True)
            rows.append(row)
    return rows


def gate_cost(rounds: int = 100_000) -> dict[str, float]:
    """Microseconds per request of signing and of the broker's gate, in process."""
    from rocklet.broker.acl.accounts import build_table, parse_acl_document
    from rocklet.broker.acl.validator import AccessValidator

    path = acl_file(Path(tempfile.mkdtemp(prefix="rocklet-acl-gate-")) / "plain_acl.yml")
    table = build_table([parse_acl_document(yaml.safe_load(path.read_text()), path)])
    shutil.rmtree(path.parent, ignore_errors=True)
    validator = AccessValidator(lambda: table)
    ext = {"a": "AclBenchPG", "b": TOPIC, "c": "TBW102", "d": "4", "e": "3", "f": "0"}
    ext |= {"g": "1700000000000", "h": "0", "i": "UNIQ_KEY\x01ABCDEF0123456789ABCDEF\x02"}
    ext |= {"j": "0", "k": "false", "m": "false"}
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=BODY)
    signed = sign(cmd, PRODUCER)

    class Peer:  # the two attributes the gate reads of a connection
        peer = ("127.0.0.1", 40000)
        attributes: dict[str, object] = {}

    conn: Any = Peer()
    assert validator.gate(conn, signed) is None
    out = {}
    for name, call in (
        ("sign", lambda: sign(cmd, PRODUCER)),
        ("gate", lambda: validator.gate(conn, signed)),
    ):
        out[name] = min(timeit.repeat(call, number=rounds, repeat=5)) / rounds * 1e6
    return out


def main() -> None:
    """Alternate ACL off / on brokers for ``--pairs`` pairs and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2, help="off/on pairs (2)")
    parser.add_argument("--messages", type=int, default=20000, help="sends per case (20000)")
    parser.add_argument("--quick", action="store_true", help="2000 messages, 1 pair")
    args = parser.parse_args()
    if args.quick:
        args.messages, args.pairs = 2000, 1
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(f"machine: {machine()}", flush=True)
    rows: list[Row] = []
    for pair in range(args.pairs):
        for acl in (False, True):
            root = Path(tempfile.mkdtemp(prefix=f"rocklet-acl-bench-{pair}-"))
            try:
                print(f"pair {pair + 1}, ACL {'on' if acl else 'off'}", flush=True)
                rows += run_one(root, acl, args.messages)
            finally:
                shutil.rmtree(root, ignore_errors=True)
    print(f"\n{HEADER}")
    for row in rows:
        print(row.line())
    costs = gate_cost()
    print(
        f"\nin process: sign() {costs['sign']:.2f} µs, broker gate {costs['gate']:.2f} µs "
        "per 1 KiB SEND_MESSAGE_V2"
    )


if __name__ == "__main__":
    main()
