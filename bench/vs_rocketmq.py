"""Rocklet beside Apache RocketMQ 4.9.4, driven by RocketMQ's own Java benchmark producer.

Usage: python bench/vs_rocketmq.py --anchor DIR [--pairs 2] [--seconds 30] [--threads 16]

Needs a RocketMQ 4.9.4 binary release and Java 17, reached through a directory of small
wrapper scripts (``--anchor``): ``rmq_up.sh`` (starts a name server and a broker on free
loopback ports and prints ``NS BROKER NS_PID BROKER_PID STORE``), ``rmq_down.sh NS_PID
BROKER_PID``, ``mqadmin.sh`` (the release's admin tool) and ``common.sh`` (its
``anchor_java`` runs a class of the release's classpath). Neither the release nor the
scripts are part of this repository.

Each pair runs the release's ``org.apache.rocketmq.example.benchmark.Producer`` (1 KiB
bodies, ``--threads`` threads, ``--seconds`` seconds, one fresh topic) against a fresh
``rocklet standalone`` (uvloop, ASYNC_FLUSH) and against a fresh RocketMQ (ASYNC_MASTER,
ASYNC_FLUSH), alternating which goes first. Throughput is the mean of the producer's
"Send TPS" lines after the first (warm-up); broker CPU is read from ``/proc/<pid>/stat``
around the run (all threads; for Rocklet the standalone process also holds its idle name
server) and divided by the messages the broker stored in the run's topic (its queues'
max offsets, read with ``mqadmin topicStatus``). The machine is shared: compare the
ratio within each pair.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

_TPS = re.compile(r"Send TPS:\s*([\d.]+)")
_CLK = os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    """One benchmark run against one system."""

    system: str
    tps: float
    messages: int
    cpu_us_per_msg: float
    load: str


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK  # utime + stime


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def _producer(anchor: Path, namesrv: str, topic: str, threads: int, seconds: int) -> list[float]:
    script = (
        f'. "{anchor}/common.sh"; JAVA_XMX=1g anchor_java '
        "-Dlogback.statusListenerClass=ch.qos.logback.core.status.NopStatusListener "
        f"org.apache.rocketmq.example.benchmark.Producer -n {namesrv} -t {topic} "
        f"-w {threads} -s 1024"
    )
    proc = subprocess.run(
        ["timeout", "-s", "TERM", str(seconds), "bash", "-c", script],
        capture_output=True,
        text=True,
        check=False,
    )
    return [float(m) for m in _TPS.findall(proc.stdout + proc.stderr)]


def _max_offset(anchor: Path, namesrv: str, topic: str) -> int:
    """Messages stored in ``topic`` (sum of its queues' max offsets), via mqadmin."""
    out = subprocess.run(
        ["bash", str(anchor / "mqadmin.sh"), "topicStatus", "-n", namesrv, "-t", topic],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    total = 0
    for line in out.splitlines():
        parts = line.split()
        # "#Broker Name  #QID  #Min Offset  #Max Offset  #Last Updated"
        if len(parts) >= 4 and parts[1].isdigit() and parts[3].isdigit():
            total += int(parts[3])
    return total


def _measure(system: str, anchor: Path, namesrv: str, pid: int, threads: int, seconds: int) -> Run:
    topic = f"VsRmq_{system}_{int(time.time() * 1000) % 10**8}"
    load = _load()
    before = _cpu_s(pid)
    tps = _producer(anchor, namesrv, topic, threads, seconds)
    cpu = _cpu_s(pid) - before
    messages = _max_offset(anchor, namesrv, topic)
    steady = tps[1:] or tps
    return Run(
        system,
        statistics.fmean(steady) if steady else 0.0,
        messages,
        cpu * 1e6 / messages if messages else float("nan"),
        f"{load}→{_load()}",
    )


def _rocklet(anchor: Path, threads: int, seconds: int) -> Run:
    work = Path(tempfile.mkdtemp(prefix="vs-rmq-rocklet-"))
    ns_port, broker_port = _free_port(), _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocklet", "standalone", "--data-dir", str(work / "data"),
         "--namesrv-port", str(ns_port), "--listen-port", str(broker_port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "broker listening" in line:
                break
        else:
            raise RuntimeError("rocklet standalone did not start")
        return _measure("rocklet", anchor, f"127.0.0.1:{ns_port}", proc.pid, threads, seconds)
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(work, ignore_errors=True)


def _rocketmq(anchor: Path, threads: int, seconds: int) -> Run:
    up = subprocess.run(
        ["bash", str(anchor / "rmq_up.sh")], capture_output=True, text=True, check=True
    )
    ns, _broker, ns_pid, broker_pid, store = up.stdout.split()[-5:]
    try:
        return _measure("rocketmq", anchor, ns, int(broker_pid), threads, seconds)
    finally:
        subprocess.run(["bash", str(anchor / "rmq_down.sh"), ns_pid, broker_pid], check=False)
        shutil.rmtree(store, ignore_errors=True)
        shutil.rmtree(store + ".run", ignore_errors=True)


def main() -> int:
    """Run the pairs and print a Markdown table with per-pair ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--anchor", type=Path, required=True, help="the wrapper scripts")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    rows: list[tuple[int, Run, Run]] = []
    for pair in range(args.pairs):
        order = (_rocklet, _rocketmq) if pair % 2 == 0 else (_rocketmq, _rocklet)
        runs = {}
        for run_system in order:
            run = run_system(args.anchor, args.threads, args.seconds)
            runs[run.system] = run
            print(f"pair {pair + 1} {run}", file=sys.stderr, flush=True)
        rows.append((pair + 1, runs["rocklet"], runs["rocketmq"]))
    print(f"\nJava benchmark Producer, {args.threads} threads, 1 KiB, {args.seconds} s per run\n")
    print("| pair | system | msg/s | messages stored | broker CPU µs/msg | load 1-min |")
    print("| ---: | --- | ---: | ---: | ---: | --- |")
    for pair, ours, theirs in rows:
        for run in (ours, theirs):
            print(
                f"| {pair} | {run.system} | {run.tps:,.0f} | {run.messages:,} | "
                f"{run.cpu_us_per_msg:.1f} | {run.load} |"
            )
    print("\n| pair | Rocklet ÷ RocketMQ, msg/s | RocketMQ ÷ Rocklet, broker CPU per message |")
    print("| ---: | ---: | ---: |")
    for pair, ours, theirs in rows:
        print(
            f"| {pair} | {ours.tps / theirs.tps:.2f} | "
            f"{theirs.cpu_us_per_msg / ours.cpu_us_per_msg:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
