"""Replication benchmark: sends to a single broker, an ASYNC_MASTER and a SYNC_MASTER.

Usage: python bench/replication_bench.py [--messages N] [--latency N] [--rounds R]
       [--modes single,async,sync,syncflush] [--profile-master DIR]

Each round starts, in turn (alternating the order between rounds, since this machine is
shared), ``rocklet standalone`` as

single  ASYNC_MASTER without a slave;
async   ASYNC_MASTER with a slave (``rocklet broker``, brokerId 1) following it;
sync    SYNC_MASTER with that slave: each send answered once the slave acknowledged it;
syncflush  ASYNC_MASTER without a slave, ``flushDiskType=SYNC_FLUSH``: each send
        answered once the disk has it (not run unless named in ``--modes``);

then sends ``--messages`` raw pipelined SEND_MESSAGE_V2 frames (1 KiB bodies, 256 in
flight; ``bench/raw_send.py``) and ``--latency`` sends one at a time. It prints msg/s,
the master's CPU µs per message (every thread, from ``/proc``), the slave's, the one at
a time latency (median and p99) and how many cores everything else used meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import structlog
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import raw_send
from broker_process import proc_cpu_seconds, profiled_launcher, standalone
from hotpath import BODY, QUEUES, SEND_TOPIC, _machine_busy_s, create_topics, machine

from rocklet.protocol.bodies.cluster import KVTable
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.dial import open_connection

_LISTENING = re.compile(r"broker listening.*port=(\d+)")
#: The slave's log lines, shown if it does not stop.
LOG: list[str] = []


def start_slave(root: Path, namesrv: str) -> tuple[subprocess.Popen[str], int]:
    """A ``rocklet broker`` slave registered with ``namesrv``; returns it and its port."""
    root.mkdir(parents=True, exist_ok=True)
    conf = root / "broker.conf"
    conf.write_text("brokerId=1\nbrokerRole=SLAVE\nbrokerIP1=127.0.0.1\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "rocklet", "broker", "-c", str(conf)]
    cmd += ["--namesrv", namesrv, "--data-dir", str(root / "store"), "--listen-port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port: list[int] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            LOG.append(line)
            if not port and (match := _LISTENING.search(line)):
                port.append(int(match[1]))
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(60) or not port:
        proc.kill()
        raise RuntimeError("the slave did not start")
    return proc, port[0]


async def status(port: int) -> dict[str, str]:
    """The runtime info (brokerStatus) of the broker on 127.0.0.1:``port``."""
    async with await open_connection("127.0.0.1", port) as conn:
        resp = await conn.request(RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
        return dict(KVTable.from_json(resp.body).table)


async def wait_slave(port: int) -> None:
    """Until the master on ``port`` has a slave that caught up."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        s = await status(port)
        if s["haConnectedSlaves"] == "1" and s["haSlaveAckOffset"] == s["commitLogMaxOffset"]:
            return
        await asyncio.sleep(0.05)
    raise RuntimeError("the slave never caught up")


async def latencies(port: int, n: int) -> list[float]:
    """``n`` sends one at a time; each one's round trip in ms."""
    out = []
    async with await open_connection("127.0.0.1", port) as conn:
        for i in range(n):
            ext = {
                "a": "PG_lat",
                "b": SEND_TOPIC,
                "c": "TBW102",
                "d": "4",
                "e": str(i % QUEUES),
                "f": "0",
                "g": str(int(time.time() * 1000)),
                "h": "0",
                "i": "WAIT\x01true",
                "j": "0",
                "k": "false",
                "m": "false",
            }
            cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=BODY)
            began = time.perf_counter()
            resp = await conn.request(cmd, 10)
            out.append((time.perf_counter() - began) * 1000)
            if resp.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"send failed: {resp.code} {resp.remark}")
    return out


def run_mode(
    mode: str, root: Path, messages: int, latency_n: int, profile: Path | None = None
) -> str:
    """One mode on fresh brokers; a formatted result row (``profile``: cProfile the master)."""
    role = "SYNC_MASTER" if mode == "sync" else "ASYNC_MASTER"
    (root / "m").mkdir(parents=True)
    launcher = None if profile is None else profiled_launcher(profile)
    conf = f"brokerRole={role}\n"
    if mode == "syncflush":
        conf += "flushDiskType=SYNC_FLUSH\n"  # a later line wins
    with standalone(root / "m", extra_conf=conf, launcher=launcher) as master:
        uvloop.run(create_topics(master.namesrv))
        slave = None
        try:
            if mode in ("async", "sync"):
                slave, _ = start_slave(root / "s", master.namesrv)
                uvloop.run(wait_slave(master.broker_port))
            m0 = master.cpu_seconds()
            s0 = proc_cpu_seconds(Path(f"/proc/{slave.pid}/stat")) if slave else 0.0
            busy0, began = _machine_busy_s(), time.monotonic()
            n, secs = uvloop.run(
                raw_send.run_raw(
                    master.broker_port, messages, topic=SEND_TOPIC, queues=QUEUES, body=BODY
                )
            )
            elapsed = time.monotonic() - began
            m_cpu = master.cpu_seconds() - m0
            s_cpu = (proc_cpu_seconds(Path(f"/proc/{slave.pid}/stat")) - s0) if slave else 0.0
            others = max(0.0, _machine_busy_s() - busy0 - m_cpu - s_cpu) / elapsed
            lat = uvloop.run(latencies(master.broker_port, latency_n))
        finally:
            if slave is not None:
                slave.terminate()
                try:
                    slave.wait(30)
                except subprocess.TimeoutExpired:
                    print("the slave did not stop; its last lines:\n" + "".join(LOG[-30:]))
                    slave.kill()
                    slave.wait()
    q = statistics.quantiles(lat, n=100)
    return (
        f"{mode:<9} {n / secs:>9.0f} msg/s  master {m_cpu / n * 1e6:6.1f} µs/msg  "
        f"slave {s_cpu / n * 1e6:6.1f} µs/msg  latency p50 {statistics.median(lat):5.2f} ms "
        f"p99 {q[98]:5.2f} ms  others {others:4.1f} cores"
    )


def main() -> None:
    """Parse the options and run the rounds."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=50_000, help="pipelined sends")
    parser.add_argument("--latency", type=int, default=2_000, help="one-at-a-time sends")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--modes",
        default="single,async,sync",
        help="comma-separated, from single, async, sync, syncflush (default: the first three)",
    )
    parser.add_argument(
        "--profile-master", metavar="DIR", help="cProfile the master (DIR/<mode>-<round>.prof)"
    )
    args = parser.parse_args()
    profiles = Path(args.profile_master).resolve() if args.profile_master else None
    if profiles is not None:
        profiles.mkdir(parents=True, exist_ok=True)
    logging.disable(logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    print(f"machine: {machine()}", flush=True)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - {"single", "async", "sync", "syncflush"}
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")
    for r in range(args.rounds):
        order = modes if r % 2 == 0 else modes[::-1]
        for mode in order:
            with tempfile.TemporaryDirectory(prefix="rocklet-ha-bench-") as tmp:
                prof = None if profiles is None else profiles / f"{mode}-{r + 1}.prof"
                row = run_mode(mode, Path(tmp), args.messages, args.latency, prof)
                print(f"round {r + 1} {row}")


if __name__ == "__main__":
    main()
