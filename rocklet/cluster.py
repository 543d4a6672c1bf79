"""``rocklet cluster`` (``make cluster``): a name server and two masters as local processes.

The same topology as ``docker/docker-compose.yml`` (one name server, masters
``broker-a`` and ``broker-b`` of ``DefaultCluster``), run on loopback as child
processes of one supervisor, each with its own data directory under ``--data-dir``:

======================  ==========  =================  ============
process                 port        metrics            data
======================  ==========  =================  ============
name server             9876        -                  -
broker-a                10911       5557               broker-a/
broker-b                10921       5558               broker-b/
======================  ==========  =================  ============

Each broker gets a generated ``broker.conf`` in its directory (extra properties can be
added); every child logs JSON lines to ``<data-dir>/logs/<name>.log``. The supervisor
learns each child's ports from its "listening" log line, so port 0 works (tests), and a
stopped broker restarts on the same ports with the same data (:meth:`LocalCluster.start_broker`).
SIGINT or SIGTERM stops the brokers, then the name server, each cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

import structlog

__all__ = ["BROKERS", "ClusterError", "LocalCluster", "add_cluster_parser", "run_cluster"]

log = structlog.get_logger(__name__)

CLUSTER_NAME: Final = "DefaultCluster"
#: Broker names in start order.
BROKERS: Final = ("broker-a", "broker-b")
_STOP_TIMEOUT_S: Final = 20.0


class ClusterError(RuntimeError):
    """A child process could not start, or did not stop cleanly."""


@dataclass(slots=True, eq=False)
class _Child:
    """A supervised process and what its log said."""

    name: str
    process: asyncio.subprocess.Process
    log_path: Path
    reader: asyncio.Task[None] | None = None
    ports: dict[str, int] = field(default_factory=dict)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    tail: list[str] = field(default_factory=list)


async def _pump(child: _Child, stream: asyncio.StreamReader, ready_event: str) -> None:
    """Copy the child's log lines to its file, noting ports from "... listening" lines."""
    with child.log_path.open("ab") as sink:
        while line := await stream.readline():
            sink.write(line)
            sink.flush()
            child.tail = [*child.tail[-19:], line.decode(errors="replace").rstrip()]
            _note_ports(child, line, ready_event)
    child.ready.set()  # the process ended: wake whoever waits for readiness


def _note_ports(child: _Child, line: bytes, ready_event: str) -> None:
    try:
        entry = json.loads(line)
    except ValueError:
        return  # not a JSON log line (a traceback from an interpreter crash)
    event = entry.get("event") if isinstance(entry, dict) else None
    if isinstance(event, str) and event.endswith(" listening") and "port" in entry:
        child.ports[event.removesuffix(" listening")] = int(entry["port"])
    if event == ready_event:
        child.ready.set()


class LocalCluster:
    """Runs and supervises the local topology. Use as an async context manager.

    Args:
        data_dir: Root of the brokers' data directories and the logs.
        namesrv_port: Name server port (0: any free port).
        broker_ports: Listen port of broker-a and broker-b (0: any free port).
        metrics_ports: Metrics port of broker-a and broker-b, or ``None`` for no
            metrics endpoints.
        broker_properties: Extra ``broker.conf`` properties for both brokers.
        startup_timeout_s: Longest wait for a child to report it is listening.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        namesrv_port: int = 9876,
        broker_ports: tuple[int, int] = (10911, 10921),
        metrics_ports: tuple[int, int] | None = (5557, 5558),
        broker_properties: Mapping[str, str] | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        self.data_dir = data_dir
        self._namesrv_port = namesrv_port
        self._broker_ports = dict(zip(BROKERS, broker_ports, strict=True))
        self._metrics_ports = (
            None if metrics_ports is None else dict(zip(BROKERS, metrics_ports, strict=True))
        )
        self._extra = dict(broker_properties or {})
        self._timeout_s = startup_timeout_s
        self._namesrv: _Child | None = None
        self._brokers: dict[str, _Child] = {}

    # -- addresses ----------------------------------------------------------------

    @property
    def namesrv_addr(self) -> str:
        """``127.0.0.1:port`` of the running name server."""
        assert self._namesrv is not None, "the cluster is not started"
        return f"127.0.0.1:{self._namesrv.ports['namesrv']}"

    def broker_addr(self, name: str) -> str:
        """``127.0.0.1:port`` of a broker (its last port when stopped)."""
        return f"127.0.0.1:{self._broker_ports[name]}"

    def metrics_port(self, name: str) -> int | None:
        """A broker's metrics port (its last one when stopped), or ``None`` when off."""
        return None if self._metrics_ports is None else self._metrics_ports[name]

    def is_running(self, name: str) -> bool:
        """Whether a broker's process is alive."""
        child = self._brokers.get(name)
        return child is not None and child.process.returncode is None

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        """Start the name server, then both brokers; returns once all are registered.

        Raises:
            ClusterError: A child exited or did not report readiness in time.
        """
        (self.data_dir / "logs").mkdir(parents=True, exist_ok=True)
        try:
            self._namesrv = await self._spawn(
                "namesrv",
                ["namesrv", "--host", "127.0.0.1", "--port", str(self._namesrv_port)],
                "namesrv listening",
            )
            results = await asyncio.gather(
                *(self.start_broker(name) for name in BROKERS), return_exceptions=True
            )
            for result in results:
                if isinstance(result, BaseException):
                    raise result
        except BaseException:
            await self.stop()
            raise

    async def start_broker(self, name: str) -> None:
        """Start (or restart) one broker on its ports and data directory.

        Its ``broker.conf`` is (re)written first, with the ports it used last, so a
        restarted broker keeps its address. Returns once it registered with the name
        server (``rocklet broker`` logs "broker listening" after the first registration).

        Raises:
            ClusterError: It exited or did not report readiness in time.
        """
        if self.is_running(name):
            return
        conf = self._write_conf(name)
        # Loopback, as the name server: a local cluster (and its metrics) stays local.
        args = ["broker", "-c", str(conf), "--host", "127.0.0.1"]
        child = await self._spawn(name, args, "broker listening")
        self._brokers[name] = child
        self._broker_ports[name] = child.ports["broker"]
        if self._metrics_ports is not None:
            self._metrics_ports[name] = child.ports["metrics"]

    async def stop_broker(self, name: str) -> None:
        """Stop one broker with SIGTERM (it unregisters and closes its store cleanly).

        Raises:
            ClusterError: It did not exit with status 0.
        """
        child = self._brokers.pop(name, None)
        if child is not None:
            await _terminate(child)

    async def stop(self) -> None:
        """Stop the brokers, then the name server. Idempotent; raises after stopping all.

        Raises:
            ClusterError: A child did not exit with status 0.
        """
        failures: list[ClusterError] = []
        results = await asyncio.gather(
            *(self.stop_broker(name) for name in list(self._brokers)), return_exceptions=True
        )
        failures += [r for r in results if isinstance(r, ClusterError)]
        namesrv, self._namesrv = self._namesrv, None
        if namesrv is not None:
            try:
                await _terminate(namesrv)
            except ClusterError as exc:
                failures.append(exc)
        if failures:
            raise failures[0]

    async def __aenter__(self) -> LocalCluster:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- internals ----------------------------------------------------------------

    def _write_conf(self, name: str) -> Path:
        home = self.data_dir / name
        home.mkdir(parents=True, exist_ok=True)
        props = {
            "brokerClusterName": CLUSTER_NAME,
            "brokerName": name,
            "brokerId": "0",
            "brokerRole": "ASYNC_MASTER",
            "listenPort": str(self._broker_ports[name]),
            "namesrvAddr": self.namesrv_addr,
            "brokerIP1": "127.0.0.1",
            "storePathRootDir": str(home / "store"),
            **self._extra,
        }
        if self._metrics_ports is not None:
            props["metricsPort"] = str(self._metrics_ports[name])
        conf = home / "broker.conf"
        header = "# Written by rocklet cluster at every (re)start: edits here are overwritten.\n"
        conf.write_text(header + "".join(f"{k}={v}\n" for k, v in props.items()), "utf-8")
        return conf

    async def _spawn(self, name: str, args: list[str], ready_event: str) -> _Child:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "rocklet",
            *args,
            "--log-json",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        assert process.stderr is not None
        child = _Child(name, process, self.data_dir / "logs" / f"{name}.log")
        child.reader = asyncio.get_running_loop().create_task(
            _pump(child, process.stderr, ready_event), name=f"log-{name}"
        )
        try:
            await asyncio.wait_for(child.ready.wait(), self._timeout_s)
        except TimeoutError:
            await _kill(child)
            raise ClusterError(f"{name} did not start in {self._timeout_s:g} s") from None
        if process.returncode is not None or ready_event.split()[0] not in child.ports:
            await _kill(child)
            tail = "\n  ".join(child.tail)
            raise ClusterError(f"{name} exited during start-up; its last log lines:\n  {tail}")
        log.info("cluster process started", name=name, pid=process.pid, ports=child.ports)
        return child


async def _kill(child: _Child) -> None:
    if child.process.returncode is None:
        child.process.kill()
    await child.process.wait()
    if child.reader is not None:
        await child.reader


async def _terminate(child: _Child) -> None:
    if child.process.returncode is None:
        child.process.send_signal(signal.SIGTERM)
    try:
        code = await asyncio.wait_for(child.process.wait(), _STOP_TIMEOUT_S)
    except TimeoutError:
        await _kill(child)
        raise ClusterError(f"{child.name} did not stop within {_STOP_TIMEOUT_S:g} s") from None
    if child.reader is not None:
        await child.reader
    if code != 0:
        raise ClusterError(f"{child.name} exited with status {code}; see {child.log_path}")
    log.info("cluster process stopped", name=child.name)


# -- the command ------------------------------------------------------------------------


def add_cluster_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``cluster`` to the ``rocklet`` parser.

    Args:
        sub: The ``rocklet`` parser's subcommands.
    """
    p = sub.add_parser("cluster", help="run a name server and brokers a and b locally")
    p.add_argument("--data-dir", type=Path, default=Path("data/cluster"), help="data root")
    p.add_argument("--namesrv-port", type=int, default=9876, help="(default: 9876)")
    p.add_argument("--broker-a-port", type=int, default=10911, help="(default: 10911)")
    p.add_argument("--broker-b-port", type=int, default=10921, help="(default: 10921)")
    p.add_argument("--metrics-a-port", type=int, default=5557, help="(default: 5557)")
    p.add_argument("--metrics-b-port", type=int, default=5558, help="(default: 5558)")
    p.add_argument("--no-metrics", action="store_true", help="no Prometheus endpoints")


def _summary(cluster: LocalCluster, out: IO[str]) -> None:
    lines = [f"name server  {cluster.namesrv_addr}"]
    for name in BROKERS:
        metrics = cluster.metrics_port(name)
        where = "" if metrics is None else f"  metrics http://127.0.0.1:{metrics}/metrics"
        lines.append(f"{name:<12} {cluster.broker_addr(name)}{where}")
    lines.append(f"logs         {cluster.data_dir / 'logs'}  (Ctrl-C stops everything)")
    out.write("\n".join(lines) + "\n")
    out.flush()


async def _serve(cluster: LocalCluster) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        async with cluster:
            _summary(cluster, sys.stdout)
            await stop.wait()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def run_cluster(args: argparse.Namespace) -> int:
    """Run the local topology until SIGINT or SIGTERM (the ``rocklet cluster`` command).

    Args:
        args: Parsed ``rocklet cluster`` arguments.

    Returns:
        The exit code: 0 after a clean stop, 1 when a process failed.
    """
    metrics = None if args.no_metrics else (args.metrics_a_port, args.metrics_b_port)
    if metrics is not None and importlib.util.find_spec("prometheus_client") is None:
        sys.stderr.write(
            "rocklet cluster: no Prometheus endpoints: prometheus-client is not installed "
            "(pip install '.[metrics]', or make cluster, installs it)\n"
        )
        metrics = None
    cluster = LocalCluster(
        args.data_dir,
        namesrv_port=args.namesrv_port,
        broker_ports=(args.broker_a_port, args.broker_b_port),
        metrics_ports=metrics,
    )
    try:
        asyncio.run(_serve(cluster))
    except ClusterError as exc:
        sys.stderr.write(f"rocklet cluster: {exc}\n")
        return 1
    return 0
