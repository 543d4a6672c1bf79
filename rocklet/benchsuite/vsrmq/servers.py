"""Starting and stopping the two systems compared: RocketMQ's JVMs and ``rocklet standalone``.

Each system is a name server and one broker on fresh ports with a fresh store under a
work directory, started as child processes (:class:`~rocklet.benchsuite.procs.ServerProcess`:
own session, log file, stopped by PID). RocketMQ is ready when its port accepts and its
log says "boot success"; Rocklet when both its ports accept.

RocketMQ 4.9.4 has no bind-address setting: its name server and broker listen on every
interface (0.0.0.0) for the length of a run. Rocklet listens on loopback only.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from rocklet.benchsuite.procs import LOOPBACK, PeerStartError, ServerProcess, free_port
from rocklet.benchsuite.vsrmq.configs import broker_conf, free_broker_port, namesrv_properties
from rocklet.benchsuite.vsrmq.release import RocketMqRelease

__all__ = ["SERVER_HEAP", "RunningSystem", "start_rocketmq", "start_rocklet"]

#: Heap of each RocketMQ JVM (its scripts ask for 4-8 GiB; a benchmark box may be small).
SERVER_HEAP: Final = "512m"
_BOOTED: Final = "boot success"
_POLL_S: Final = 0.1
_BIND_ATTEMPTS: Final = 3


def _lost_a_port(proc: ServerProcess) -> bool:
    """Whether the JVM's log says a port it was given was taken (a bind race)."""
    try:
        return "Address already in use" in proc.log_path.read_text(errors="replace")
    except OSError:
        return False


def _boot_on_free_ports(
    name: str,
    choose_port: Callable[[], int],
    launch: Callable[[int, Path], ServerProcess],
    work: Path,
    timeout_s: float,
) -> tuple[ServerProcess, int]:
    """Start a JVM on a port ``choose_port`` found free, until it boots.

    The port was free when chosen, but another process may take it (or a neighbour the
    broker binds too) before the JVM binds it, seconds later. Only that race, told by
    the JVM's log, is worth new ports; ``_BIND_ATTEMPTS`` in all. The first attempt
    logs to ``<name>.out``, attempt n after it to ``<name>.<n>.out``.

    Returns:
        The booted process and its port.

    Raises:
        PeerStartError: It did not boot.
    """
    attempt = 1
    while True:
        port = choose_port()
        proc = launch(port, work / (f"{name}.out" if attempt == 1 else f"{name}.{attempt}.out"))
        try:
            _wait_booted(proc, port, timeout_s)
            return proc, port
        except PeerStartError as exc:
            proc.stop()
            if not _lost_a_port(proc):
                raise
            if attempt == _BIND_ATTEMPTS:
                raise PeerStartError(
                    f"{proc.name}: Address already in use in each of {attempt} attempts"
                    f" on new ports (see {proc.log_path})"
                ) from exc
        attempt += 1


@dataclass
class RunningSystem:
    """A name server and a broker that are up.

    Attributes:
        name: ``"rocklet"`` or ``"rocketmq"``.
        namesrv: The name server's ``host:port``.
        broker: The broker process (whose CPU and memory are measured).
        others: Other processes of the system (RocketMQ's name server).
        broker_addr: The broker's ``host:port`` when known.
    """

    name: str
    namesrv: str
    broker: ServerProcess
    others: list[ServerProcess] = field(default_factory=list)
    broker_addr: str = ""

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the broker first (it unregisters), then the rest, each within ``timeout_s``."""
        for proc in (self.broker, *self.others):
            proc.stop(timeout_s)


def _wait_booted(proc: ServerProcess, port: int, timeout_s: float) -> None:
    """Wait until ``port`` accepts and the log says "boot success".

    Raises:
        PeerStartError: Not within ``timeout_s``, or the process died; it is stopped.
    """
    deadline = time.monotonic() + timeout_s
    proc.require_ports([port], timeout_s)
    while time.monotonic() < deadline:
        try:
            if _BOOTED in proc.log_path.read_text(errors="replace"):
                return
        except OSError:
            pass
        if proc.exited():
            break
        time.sleep(_POLL_S)  # the JVM announces its boot only in its log
    proc.stop()
    raise PeerStartError(
        f"{proc.name} did not report '{_BOOTED}' within {timeout_s:.0f} s "
        f"(exit code {proc.proc.returncode}); log tail:\n{proc.log_tail(25)}"
    )


def start_rocketmq(
    release: RocketMqRelease,
    work: Path,
    timeout_s: float = 180.0,
    extra_conf: Mapping[str, str] | None = None,
) -> RunningSystem:
    """Start the release's name server and one broker with a fresh store under ``work``.

    Args:
        release: The checked release.
        work: An empty directory for configs, logs and the store.
        timeout_s: Per server, to come up.
        extra_conf: broker.conf keys added after the benchmark's (they win).

    Returns:
        The running system.

    Raises:
        PeerStartError: A server did not come up (the message ends with its log's tail,
            or names the log when three attempts each lost a port).
    """
    home = work / "home"  # user.home: where RocketMQ writes its logs and kv config
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "ROCKETMQ_HOME": str(release.home)}  # its conf/logback_*.xml
    # A permissive-TLS RocketMQ server writes a self-signed key pair to java.io.tmpdir at
    # start and deletes it only on a clean exit: a killed one would leave it in /tmp.
    tmp = work / "tmp"
    tmp.mkdir(exist_ok=True)
    props = (f"-Duser.home={home}", f"-Djava.io.tmpdir={tmp}")

    def jvm(name: str, main_class: str, conf: Path, log: Path) -> ServerProcess:
        argv = release.java_argv(SERVER_HEAP, main_class, "-c", str(conf), props=props)
        return ServerProcess(name, argv, log, env=env, cwd=work)

    def namesrv_on(port: int, log: Path) -> ServerProcess:
        conf = work / "namesrv.properties"
        conf.write_text(namesrv_properties(port))
        return jvm("RocketMQ name server", "org.apache.rocketmq.namesrv.NamesrvStartup", conf, log)

    def broker_on(port: int, log: Path) -> ServerProcess:
        conf = work / "broker.conf"
        text = broker_conf(listen_port=port, namesrv_port=ns_port, store=work / "store")
        conf.write_text(text + "".join(f"{k}={v}\n" for k, v in (extra_conf or {}).items()))
        return jvm("RocketMQ broker", "org.apache.rocketmq.broker.BrokerStartup", conf, log)

    # The broker port is chosen once the name server listens, so the two cannot collide.
    namesrv, ns_port = _boot_on_free_ports("namesrv", free_port, namesrv_on, work, timeout_s)
    try:
        broker, broker_port = _boot_on_free_ports(
            "broker", free_broker_port, broker_on, work, timeout_s
        )
    except BaseException:
        namesrv.stop()
        raise
    return RunningSystem(
        "rocketmq", f"{LOOPBACK}:{ns_port}", broker, [namesrv], f"{LOOPBACK}:{broker_port}"
    )


def start_rocklet(work: Path, timeout_s: float = 60.0) -> RunningSystem:
    """Start ``rocklet standalone`` (name server and broker, one process) on loopback.

    Args:
        work: An empty directory for the store and the log.
        timeout_s: To come up.

    Returns:
        The running system (its broker process also holds the idle name server).

    Raises:
        PeerStartError: It did not come up (the message ends with its log's tail).
    """
    # The broker binds P, P-2 (VIP) and P+1 (HA), like RocketMQ's: all three must be
    # free and none may be the name server's (two free_port() calls can return one port).
    broker_port = free_broker_port()
    ns_port = _port_outside({broker_port - 2, broker_port, broker_port + 1})
    argv = [
        sys.executable, "-m", "rocklet", "standalone",
        "--data-dir", str(work / "data"),
        "--namesrv-port", str(ns_port),
        "--listen-port", str(broker_port),
        "--host", LOOPBACK,
    ]  # fmt: skip
    proc = ServerProcess("rocklet standalone", argv, work / "rocklet.out", cwd=work)
    proc.require_ports([ns_port, broker_port], timeout_s)
    return RunningSystem("rocklet", f"{LOOPBACK}:{ns_port}", proc)


def _port_outside(taken: set[int]) -> int:
    """A free port that is not one of ``taken`` (ports about to be bound by another)."""
    while (port := free_port()) in taken:
        pass
    return port
