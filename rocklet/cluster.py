"""``rocklet cluster`` (``make cluster``): two masters with a slave each, as local processes.

The same topology as ``docker/docker-compose.yml``: one name server and, in
``DefaultCluster``, masters ``broker-a`` and ``broker-b`` (brokerId 0, ASYNC_MASTER),
each followed by a slave (``broker-a-s``, ``broker-b-s``: brokerId 1, SLAVE, the same
brokerName), as RocketMQ's ``2m-2s-async`` sample configs. They run on loopback as
child processes of one supervisor, each with its own data directory under
``--data-dir``. Ports follow RocketMQ's conventions: the name server on 9876, brokers
10 apart from 10911, the HA port at ``listenPort + 1``:

======================  ==========  ========  =========  ==============
process                 port        HA port   metrics    data
======================  ==========  ========  =========  ==============
name server             9876        -         -          -
broker-a                10911       10912     5557       broker-a/
broker-b                10921       10922     5558       broker-b/
broker-a-s              10931       -         5559       broker-a-s/
broker-b-s              10941       -         5560       broker-b-s/
======================  ==========  ========  =========  ==============

A slave learns its master's HA address from the name server (``haServerAddr``, as
RocketMQ's slaves do), so nothing names it in the slaves' files. Each broker gets a
generated ``broker.conf`` in its directory (extra properties can be added); every child
logs JSON lines to ``<data-dir>/logs/<name>.log``. The supervisor learns each child's
ports from its "listening" log lines, so port 0 works (tests), and a stopped broker
restarts on the same ports with the same data (:meth:`LocalCluster.start_broker`).
The masters start first, then the slaves. SIGINT or SIGTERM stops the brokers, then the
name server, each cleanly (the children run in sessions of their own, so a terminal's
Ctrl-C reaches the supervisor alone). A child that dies meanwhile is reported at once;
the others keep running, and the command exits 1 at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

import structlog

from rocklet.cluster_procs import Child, ClusterError, kill, pump, terminate

__all__ = [
    "BROKERS",
    "MASTERS",
    "NODES",
    "ClusterError",
    "LocalCluster",
    "Node",
    "add_cluster_parser",
    "run_cluster",
]

log = structlog.get_logger(__name__)

CLUSTER_NAME: Final = "DefaultCluster"


@dataclass(frozen=True, slots=True)
class Node:
    """One broker process of the topology.

    Attributes:
        name: Process name, data directory and log name.
        broker_name: ``brokerName`` (shared by a master and its slave).
        broker_id: ``brokerId``: 0 for a master, 1 for its slave.
        role: ``brokerRole``.
        port: Default ``listenPort``.
        metrics_port: Default ``metricsPort``.
    """

    name: str
    broker_name: str
    broker_id: int
    role: str
    port: int
    metrics_port: int


#: The brokers, masters first (start order).
NODES: Final = (
    Node("broker-a", "broker-a", 0, "ASYNC_MASTER", 10911, 5557),
    Node("broker-b", "broker-b", 0, "ASYNC_MASTER", 10921, 5558),
    Node("broker-a-s", "broker-a", 1, "SLAVE", 10931, 5559),
    Node("broker-b-s", "broker-b", 1, "SLAVE", 10941, 5560),
)
BROKERS: Final = tuple(n.name for n in NODES)
MASTERS: Final = tuple(n.name for n in NODES if n.broker_id == 0)
_NODES: Final = {n.name: n for n in NODES}
_DEFAULT_METRICS: Final[Mapping[str, int]] = {n.name: n.metrics_port for n in NODES}


class LocalCluster:
    """Runs and supervises the local topology. Use as an async context manager.

    Args:
        data_dir: Root of the brokers' data directories and the logs.
        namesrv_port: Name server port (0: any free port).
        broker_ports: Listen port by broker (:data:`BROKERS`; missing ones take the
            defaults of :data:`NODES`; 0: any free port).
        metrics_ports: Metrics port by broker (missing ones take the defaults), or
            ``None`` for no metrics endpoints.
        broker_properties: Extra ``broker.conf`` properties for every broker.
        startup_timeout_s: Longest wait for a child to report it is listening.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        namesrv_port: int = 9876,
        broker_ports: Mapping[str, int] | None = None,
        metrics_ports: Mapping[str, int] | None = _DEFAULT_METRICS,
        broker_properties: Mapping[str, str] | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        self.data_dir = data_dir
        self._namesrv_port = namesrv_port
        self._broker_ports = {n.name: n.port for n in NODES} | dict(broker_ports or {})
        self._metrics_ports = (
            None
            if metrics_ports is None
            else {n.name: n.metrics_port for n in NODES} | dict(metrics_ports)
        )
        self._extra = dict(broker_properties or {})
        self._timeout_s = startup_timeout_s
        self._namesrv: Child | None = None
        self._brokers: dict[str, Child] = {}

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
        """Start the name server, the masters, then the slaves; returns once all registered.

        Raises:
            ClusterError: A child exited or did not report readiness in time.
        """
        (self.data_dir / "logs").mkdir(parents=True, exist_ok=True)
        try:
            kv_file = self.data_dir / "namesrv" / "kvConfig.json"
            argv = ["namesrv", "--host", "127.0.0.1", "--port", str(self._namesrv_port)]
            argv += ["--kv-config", str(kv_file)]
            self._namesrv = await self._spawn("namesrv", argv, "namesrv listening")
            # Masters first: a slave's first registration then already names its
            # master's HA address (else it would wait for the next one, 30 s later).
            for group in (MASTERS, tuple(n for n in BROKERS if n not in MASTERS)):
                results = await asyncio.gather(
                    *(self.start_broker(name) for name in group), return_exceptions=True
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
            await terminate(child)

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
                await terminate(namesrv)
            except ClusterError as exc:
                failures.append(exc)
        if failures:
            raise failures[0]

    def children(self) -> list[Child]:
        """The running children: the name server and the brokers."""
        running = [self._namesrv, *self._brokers.values()]
        return [c for c in running if c is not None]

    async def __aenter__(self) -> LocalCluster:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- internals ----------------------------------------------------------------

    def _write_conf(self, name: str) -> Path:
        node = _NODES[name]
        home = self.data_dir / name
        home.mkdir(parents=True, exist_ok=True)
        props = {
            "brokerClusterName": CLUSTER_NAME,
            "brokerName": node.broker_name,
            "brokerId": str(node.broker_id),
            "brokerRole": node.role,
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

    async def _spawn(self, name: str, args: list[str], ready_event: str) -> Child:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "rocklet",
            *args,
            "--log-json",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            # Its own session: a terminal's Ctrl-C reaches the supervisor only, which
            # then stops the brokers before the name server they unregister from.
            start_new_session=True,
        )
        assert process.stderr is not None
        child = Child(name, process, self.data_dir / "logs" / f"{name}.log")
        child.reader = asyncio.get_running_loop().create_task(
            pump(child, process.stderr, ready_event), name=f"log-{name}"
        )
        try:
            await asyncio.wait_for(child.ready.wait(), self._timeout_s)
        except TimeoutError:
            await kill(child)
            raise ClusterError(f"{name} did not start in {self._timeout_s:g} s") from None
        if process.returncode is not None or ready_event.split()[0] not in child.ports:
            await kill(child)
            tail = "\n  ".join(child.tail)
            message = f"{name} exited during start-up; its last log lines:\n  {tail}"
            if "already in use" in tail:
                # The child's own hint names broker.conf keys, but this command writes
                # that file at every start: its flags are what moves a process.
                flag = "--namesrv-port" if name == "namesrv" else f"--{name}-port"
                message += f"\nrocklet cluster writes those files: move {name} with {flag}"
            raise ClusterError(message)
        log.info("cluster process started", name=name, pid=process.pid, ports=child.ports)
        return child


# -- the command ------------------------------------------------------------------------


def add_cluster_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``cluster`` to the ``rocklet`` parser.

    Args:
        sub: The ``rocklet`` parser's subcommands.
    """
    p = sub.add_parser(
        "cluster",
        help="run a name server, masters broker-a and broker-b and a slave of each",
        description="Run a name server, masters broker-a and broker-b and a slave of each "
        "as local processes on 127.0.0.1, until Ctrl-C or SIGTERM. A process that dies is "
        "reported at once; the others keep running.",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=Path("data/cluster"),
        help="data root (default: %(default)s)",
    )
    p.add_argument("--namesrv-port", type=int, default=9876, help="(default: 9876)")
    for node in NODES:
        p.add_argument(
            f"--{node.name}-port", type=int, default=node.port, help=f"(default: {node.port})"
        )
    for node in NODES:
        p.add_argument(
            f"--metrics-{node.name.removeprefix('broker-')}-port",
            type=int,
            default=node.metrics_port,
            help=f"{node.name} (default: {node.metrics_port})",
        )
    p.add_argument("--no-metrics", action="store_true", help="no Prometheus endpoints")


def _summary(cluster: LocalCluster, out: IO[str]) -> None:
    lines = [f"name server  {cluster.namesrv_addr}"]
    for node in NODES:
        metrics = cluster.metrics_port(node.name)
        where = "" if metrics is None else f"  metrics http://127.0.0.1:{metrics}/metrics"
        role = "master" if node.broker_id == 0 else f"slave of {node.broker_name}"
        lines.append(f"{node.name:<12} {cluster.broker_addr(node.name)}  {role:<18}{where}")
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
            await _until_stopped(cluster, stop)
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


async def _until_stopped(cluster: LocalCluster, stop: asyncio.Event) -> None:
    """Wait for ``stop``, saying at once when a child dies (the others keep running)."""
    exits = {asyncio.ensure_future(c.process.wait()): c for c in cluster.children()}
    stopped = asyncio.ensure_future(stop.wait())
    try:
        while not stop.is_set():
            done, _ = await asyncio.wait([stopped, *exits], return_when=asyncio.FIRST_COMPLETED)
            for task in done & exits.keys():
                child = exits.pop(task)
                sys.stderr.write(
                    f"rocklet cluster: {child.name} exited with status "
                    f"{child.process.returncode}; see {child.log_path} (the others keep "
                    "running; Ctrl-C stops them)\n"
                )
                sys.stderr.flush()
    finally:
        for task in [stopped, *exits]:
            task.cancel()


def run_cluster(args: argparse.Namespace) -> int:
    """Run the local topology until SIGINT or SIGTERM (the ``rocklet cluster`` command).

    Args:
        args: Parsed ``rocklet cluster`` arguments.

    Returns:
        The exit code: 0 after a clean stop, 1 when a process failed.
    """
    metrics: dict[str, int] | None = {
        n.name: getattr(args, f"metrics_{n.name.removeprefix('broker-').replace('-', '_')}_port")
        for n in NODES
    }
    if args.no_metrics:
        metrics = None
    if metrics is not None and importlib.util.find_spec("prometheus_client") is None:
        sys.stderr.write(
            "rocklet cluster: no Prometheus endpoints: prometheus-client is not installed "
            "(pip install '.[metrics]', or make cluster, installs it)\n"
        )
        metrics = None
    cluster = LocalCluster(
        args.data_dir,
        namesrv_port=args.namesrv_port,
        broker_ports={n.name: getattr(args, f"{n.name.replace('-', '_')}_port") for n in NODES},
        metrics_ports=metrics,
    )
    try:
        asyncio.run(_serve(cluster))
    except ClusterError as exc:
        sys.stderr.write(f"rocklet cluster: {exc}\n")
        return 1
    return 0
