"""RabbitMQ: Debian's ``rabbitmq-server`` with the stream plugin, on loopback only.

Started as the pitfalls listed in BENCHMARKS.md require: the real scripts in
``/usr/lib/rabbitmq/bin`` (the ``/usr/sbin`` wrappers switch user and drop the
environment); a private ``epmd`` the suite starts itself on a free loopback port, so
nothing clashes with another Erlang node and nothing is left running; Erlang
distribution kept on 127.0.0.1; ``HOME`` (the Erlang cookie), the database and the
logs in the case's temporary directory; AMQP, stream and distribution ports chosen
free (never the CLI's 35672-35682 range). Boot takes 5-7 s; a failed boot shows only in
its own log, whose tail is in the error.

The clients are in :mod:`rocklet.benchsuite.peers.rabbitmq_clients`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from rocklet.benchsuite.procs import LOOPBACK, ServerProcess, free_port

__all__ = ["RabbitMqServer"]

_SBIN: Final = Path("/usr/lib/rabbitmq/bin")
#: rabbitmqctl's own range: never hand these to the node.
_CLI_PORTS: Final = range(35672, 35683)


def _port() -> int:
    while (port := free_port()) in _CLI_PORTS:
        pass
    return port


class RabbitMqServer:
    """A RabbitMQ node (AMQP and native stream listeners) and its private epmd."""

    name = "rabbitmq"

    def __init__(self) -> None:
        self._epmd: ServerProcess | None = None
        self._node: ServerProcess | None = None
        self._ports: dict[str, int] = {}

    @staticmethod
    def available() -> str | None:
        """Why it cannot run here, or None."""
        if not (_SBIN / "rabbitmq-server").exists():
            return "rabbitmq-server is not installed"
        if not shutil.which("epmd"):
            return "epmd (Erlang) is not installed"
        return None

    def start(self, workdir: Path, timeout_s: float) -> None:
        """Start epmd, then the node; return once AMQP and stream ports accept."""
        workdir.mkdir(parents=True, exist_ok=True)
        self._ports = {name: _port() for name in ("amqp", "stream", "dist", "epmd")}
        epmd = str(shutil.which("epmd"))
        self._epmd = ServerProcess(
            "epmd",
            [epmd, "-port", str(self._ports["epmd"]), "-address", LOOPBACK],
            workdir / "epmd.log",
        )
        self._epmd.require_ports([self._ports["epmd"]], timeout_s)
        env = self._environment(workdir)
        self._node = ServerProcess(
            self.name, [str(_SBIN / "rabbitmq-server")], workdir / "server.log", env=env
        )
        try:
            self._node.require_ports([self._ports["amqp"], self._ports["stream"]], timeout_s)
        except BaseException:
            self.stop()
            raise

    def _environment(self, workdir: Path) -> dict[str, str]:
        home = workdir / "home"
        home.mkdir(exist_ok=True)
        conf = workdir / "rabbitmq.conf"
        conf.write_text(
            f"stream.listeners.tcp.1 = {LOOPBACK}:{self._ports['stream']}\n"
            f"stream.advertised_host = {LOOPBACK}\n"
            f"stream.advertised_port = {self._ports['stream']}\n"
            "log.console = true\nlog.console.level = warning\nlog.file = false\n",
            encoding="utf-8",
        )
        plugins = workdir / "enabled_plugins"
        plugins.write_text("[rabbitmq_stream].\n", encoding="utf-8")
        # Only what the node needs: PATH, and the locations of everything it writes.
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "RABBITMQ_NODENAME": f"rocklet-bench-{os.getpid()}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": LOOPBACK,
            "RABBITMQ_NODE_PORT": str(self._ports["amqp"]),
            "RABBITMQ_DIST_PORT": str(self._ports["dist"]),
            "ERL_EPMD_PORT": str(self._ports["epmd"]),
            "ERL_EPMD_ADDRESS": LOOPBACK,
            "RABBITMQ_CONFIG_FILE": str(conf),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(plugins),
            "RABBITMQ_MNESIA_BASE": str(workdir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(workdir / "log"),
            "RABBITMQ_PID_FILE": str(workdir / "rabbit.pid"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        }

    def stop(self) -> None:
        """SIGTERM the node (its script stops it gracefully), then its epmd."""
        for proc in (self._node, self._epmd):
            if proc is not None:
                proc.stop()
        self._node = self._epmd = None

    @property
    def pgid(self) -> int | None:
        """The node's process group (the script, the Erlang VM and its port programs)."""
        return None if self._node is None else self._node.pid

    @property
    def address(self) -> Mapping[str, Any]:
        """Host, AMQP port and stream port (user guest, allowed on loopback)."""
        return {"host": LOOPBACK, "amqp": self._ports["amqp"], "stream": self._ports["stream"]}
