"""Flooding clients and the measurement of what a well-behaved client sees meanwhile.

A *flooder* is a raw socket that writes pipelined SEND_MESSAGE frames as fast as the
broker takes them and either never reads an answer (``read_bytes_per_s=0``) or reads
them slowly. A *probe* is the SDK: one producer sending one message at a time (and a
name-server route query), whose answer times are recorded. :func:`measure_flood` runs
both against a :class:`~tests.adversity.procs.BrokerProcess` and samples the broker's
resident memory, so the test and the figures in docs/reliability.md come from the same
code. Run it alone for the long figures::

    .venv/bin/python -m tests.adversity.flood --seconds 30 --flooders 2
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from rocklet.client import Message, Producer
from rocklet.client.admin import Admin
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.frame import encode_command
from tests.adversity.procs import BrokerProcess, running_broker

__all__ = [
    "FloodReport",
    "flood_block",
    "flooder",
    "measure_flood",
    "route_flood_block",
]

#: Frames written per ``write`` call of a flooder (one block is built once and reused).
FRAMES_PER_BLOCK: Final = 256
#: Body size of a flooder's messages: small, so the flood is many requests, not bytes.
FLOOD_BODY_SIZE: Final = 100
MIB: Final = 1024 * 1024
#: How long the flood child may take to start or to stop.
CHILD_TIMEOUT_S: Final = 30.0
#: The topic whose route the probe asks the name server for.
ROUTE_PROBE_TOPIC: Final = "TBW102"


def route_flood_block(frames: int = FRAMES_PER_BLOCK) -> bytes:
    """``frames`` pipelined GET_ROUTEINFO_BY_TOPIC requests (for TBW102): a name-server flood.

    Args:
        frames: How many requests.

    Returns:
        The frames back to back, with distinct opaques.
    """
    fields = {"topic": ROUTE_PROBE_TOPIC}
    return b"".join(
        encode_command(
            RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=i, ext_fields=fields)
        )
        for i in range(frames)
    )


def flood_block(
    topic: str, frames: int = FRAMES_PER_BLOCK, body_size: int = FLOOD_BODY_SIZE
) -> bytes:
    """``frames`` pipelined SEND_MESSAGE requests as one byte string: a broker flood.

    Args:
        topic: Where the messages go (auto-created from TBW102 if missing).
        frames: How many requests.
        body_size: Bytes of each message body.

    Returns:
        The frames back to back, with distinct opaques.
    """
    fields = {
        "producerGroup": "flooder",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "-1",
        "sysFlag": "0",
        "bornTimestamp": str(int(time.time() * 1000)),
        "flag": "0",
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "false",
    }
    body = b"f" * body_size
    return b"".join(
        encode_command(
            RemotingCommand(RequestCode.SEND_MESSAGE, opaque=i, ext_fields=fields, body=body)
        )
        for i in range(frames)
    )


@dataclass
class FlooderStats:
    """What one flooder did.

    Attributes:
        bytes_written: Request bytes the kernel accepted from it.
        bytes_read: Answer bytes it read.
    """

    bytes_written: int = 0
    bytes_read: int = 0


async def flooder(
    host: str,
    port: int,
    block: bytes,
    stop: asyncio.Event,
    stats: FlooderStats,
    *,
    read_bytes_per_s: int = 0,
    opened: asyncio.Event | None = None,
) -> None:
    """Write ``block`` over and over until ``stop`` is set; read answers slowly or never.

    Args:
        host: Broker or name server host.
        port: Its port.
        block: Pipelined request frames (:func:`flood_block`).
        stop: Set to end the flood.
        stats: Updated as the flood goes.
        read_bytes_per_s: Read the answers at about this rate; 0 never reads.
        opened: Set once the connection is open.
    """
    reader, writer = await asyncio.open_connection(host, port)
    if opened is not None:
        opened.set()

    async def read_slowly() -> None:
        # Pacing, not synchronisation: a slow reader takes a small read ten times a second.
        chunk = max(1, read_bytes_per_s // 10)
        while True:
            data = await reader.read(chunk)
            if not data:
                return
            stats.bytes_read += len(data)
            await asyncio.sleep(0.1)

    slow = asyncio.create_task(read_slowly()) if read_bytes_per_s else None
    try:
        while not stop.is_set():
            writer.write(block)
            drained = asyncio.ensure_future(writer.drain())
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait({drained, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if not drained.done():
                drained.cancel()
                break
            drained.result()
            stats.bytes_written += len(block)
    except (ConnectionError, OSError):
        pass  # the broker may close a hostile connection: the flood is over for it
    finally:
        if slow is not None:
            slow.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
                await slow
        writer.transport.abort()


class FloodProcess:
    """Flooding connections in a child process, so they do not share the probe's loop.

    The child (this module with ``--flood``) opens ``flooders`` connections to the
    port, floods until its standard input closes, then prints the request bytes the
    kernel took from it. Ending it is closing that pipe: no signal, no sleep.

    Args:
        port: The broker's or name server's port on 127.0.0.1.
        flooders: How many flooding connections.
        read_bytes_per_s: Each connection's read rate; 0 never reads.
        body_size: Body size of the flooding messages.
    """

    def __init__(self, port: int, flooders: int, read_bytes_per_s: int, body_size: int) -> None:
        self._args = [
            "--flood",
            str(port),
            "--flooders",
            str(flooders),
            "--read-rate",
            str(read_bytes_per_s),
            "--body",
            str(body_size),
        ]
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Start the child and wait until every connection is open and flooding."""
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.adversity.flood",
            *self._args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self._proc.stdout is not None
        line = await asyncio.wait_for(self._proc.stdout.readline(), CHILD_TIMEOUT_S)
        assert line.strip() == b"flooding", f"flood child failed to start: {line!r}"

    async def stop(self) -> int:
        """End the flood; return the request bytes the flooders got written."""
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        out = await asyncio.wait_for(proc.stdout.read(), CHILD_TIMEOUT_S)
        assert await asyncio.wait_for(proc.wait(), CHILD_TIMEOUT_S) == 0, out
        return int(out.split()[-1])


async def _flood_child(port: int, flooders: int, read_bytes_per_s: int, body_size: int) -> None:
    """The child's program: flood until standard input closes, print the bytes written."""
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    stop = asyncio.Event()
    rate = read_bytes_per_s
    stats = [FlooderStats() for _ in range(flooders)]
    # A body size of 0 floods the name server with route queries.
    block = flood_block("FloodTopic", body_size=body_size) if body_size else route_flood_block()
    opened = [asyncio.Event() for _ in range(flooders)]
    floods = [
        asyncio.create_task(
            flooder("127.0.0.1", port, block, stop, st, read_bytes_per_s=rate, opened=ev)
        )
        for st, ev in zip(stats, opened, strict=True)
    ]
    await asyncio.gather(*(ev.wait() for ev in opened))
    print("flooding", flush=True)
    await stdin.read()  # EOF: the parent closed the pipe
    stop.set()
    await asyncio.gather(*floods)
    print(sum(st.bytes_written for st in stats), flush=True)


@dataclass
class FloodReport:
    """What a well-behaved client saw during a flood, and the broker's memory.

    Attributes:
        seconds: How long the flood ran.
        sends: Probe sends answered during the flood.
        send_failures: Probe sends that raised (busy answers, timeouts).
        worst_send_s: Longest answer time of a probe send.
        route_queries: Name-server route queries answered during the flood.
        route_failures: Route queries that raised or found no route.
        worst_route_s: Longest answer time of a route query.
        rss_before: Broker RSS before the flood, bytes.
        peak_rss: Broker peak RSS (VmHWM) at the end, bytes.
        anon_before: Broker anonymous RSS (heap, not mapped files) before, bytes.
        peak_anon: Largest anonymous RSS sampled during the flood, bytes.
        flooded_bytes: Request bytes the flooders got into the broker's socket.
        probe_latencies: Every probe send's answer time, seconds.
    """

    seconds: float
    sends: int = 0
    send_failures: int = 0
    worst_send_s: float = 0.0
    route_queries: int = 0
    route_failures: int = 0
    worst_route_s: float = 0.0
    rss_before: int = 0
    peak_rss: int = 0
    anon_before: int = 0
    peak_anon: int = 0
    flooded_bytes: int = 0
    probe_latencies: list[float] = field(default_factory=list)

    def summary(self) -> str:
        """One line with the figures docs/reliability.md quotes."""
        lat = sorted(self.probe_latencies) or [0.0]
        p50 = lat[len(lat) // 2]
        return (
            f"flood {self.seconds:.0f}s ({self.flooded_bytes / MIB:.0f} MiB in): probe sends "
            f"{self.sends} ok / {self.send_failures} failed, p50 {p50 * 1000:.1f} ms, "
            f"worst {self.worst_send_s * 1000:.0f} ms; route queries {self.route_queries} ok / "
            f"{self.route_failures} failed, "
            f"worst {self.worst_route_s * 1000:.0f} ms; broker RSS {self.rss_before / MIB:.0f} "
            f"-> peak {self.peak_rss / MIB:.0f} MiB, anonymous {self.anon_before / MIB:.0f} "
            f"-> peak {self.peak_anon / MIB:.0f} MiB"
        )


def anon_rss_bytes(pid: int) -> int:
    """A process's anonymous resident memory (``RssAnon``): its heap, not its mapped files.

    The commitlog is a mapped file, so VmRSS grows with every message stored; RssAnon is
    what a flood of unanswered requests would make grow.
    """
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon")


async def measure_flood(
    broker: BrokerProcess,
    seconds: float,
    *,
    flooders: int = 1,
    read_bytes_per_s: int = 0,
    flood_namesrv: bool = False,
    probe_timeout_s: float = 120.0,
    body_size: int = FLOOD_BODY_SIZE,
) -> FloodReport:
    """Flood the broker (or its name server) and record what a probe client sees.

    Args:
        broker: A running broker process.
        seconds: How long the flood runs once it has started.
        flooders: How many flooding connections.
        read_bytes_per_s: Each flooder's read rate; 0 never reads.
        flood_namesrv: Flood the name server's port with route queries instead of the
            broker's with sends.
        body_size: Body size of the flooders' messages.
        probe_timeout_s: The probe's send and query timeout (long: an answer time is
            measured, not cut short).

    Returns:
        The report.
    """
    report = FloodReport(seconds=seconds)
    topic = "FloodProbe"
    timeout_ms = int(probe_timeout_s * 1000)
    async with Producer("flood-probe", broker.namesrv_addr, send_timeout_ms=timeout_ms) as producer:
        await producer.send(Message(topic, b"warm-up"))  # routes and topic exist first
        admin = Admin(broker.namesrv_addr, timeout_s=probe_timeout_s)
        await admin.start()
        try:
            # TBW102 (autoCreateTopicEnable's template) is in the broker's first
            # registration; the probe topic reaches the name server a moment later.
            await admin.topic_route(ROUTE_PROBE_TOPIC)
            report.rss_before = broker.rss_bytes()
            report.anon_before = anon_rss_bytes(broker.pid)
            port = broker.namesrv_port if flood_namesrv else broker.broker_port
            peak_anon = report.anon_before
            floods = FloodProcess(
                port, flooders, read_bytes_per_s, 0 if flood_namesrv else body_size
            )
            await floods.start()
            try:
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline:
                    started = time.monotonic()
                    try:
                        await producer.send(Message(topic, b"probe"))
                        report.sends += 1
                    except Exception:
                        report.send_failures += 1
                    elapsed = time.monotonic() - started
                    report.probe_latencies.append(elapsed)
                    report.worst_send_s = max(report.worst_send_s, elapsed)
                    started = time.monotonic()
                    try:
                        await admin.topic_route(ROUTE_PROBE_TOPIC)
                        report.route_queries += 1
                    except Exception:
                        report.route_failures += 1
                    report.worst_route_s = max(report.worst_route_s, time.monotonic() - started)
                    peak_anon = max(peak_anon, anon_rss_bytes(broker.pid))
            finally:
                report.flooded_bytes = await floods.stop()
            report.peak_anon = max(peak_anon, anon_rss_bytes(broker.pid))
            report.peak_rss = broker.peak_rss_bytes()
        finally:
            await admin.close()
    return report


async def _main(args: argparse.Namespace, properties: Mapping[str, str]) -> None:
    with tempfile.TemporaryDirectory() as root:
        async with running_broker(Path(root), properties) as broker:
            report = await measure_flood(
                broker,
                args.seconds,
                flooders=args.flooders,
                read_bytes_per_s=args.read_rate,
                flood_namesrv=args.namesrv,
                body_size=args.body,
            )
            print(report.summary())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--flood", type=int, default=0, help=argparse.SUPPRESS)  # the child
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--flooders", type=int, default=1)
    parser.add_argument("--read-rate", type=int, default=0, help="bytes/s each flooder reads")
    parser.add_argument("--body", type=int, default=FLOOD_BODY_SIZE, help="message body bytes")
    parser.add_argument("--namesrv", action="store_true", help="flood the name server")
    parser.add_argument("--set", action="append", default=[], help="broker.conf key=value")
    ns = parser.parse_args()
    if ns.flood:
        asyncio.run(_flood_child(ns.flood, ns.flooders, ns.read_rate, ns.body))
    else:
        asyncio.run(_main(ns, dict(item.split("=", 1) for item in ns.set)))
