"""Faults for the exactly-once tests: a broker that turns hostile, and killing a client.

:class:`Hostile` is installed as the broker's request gate (it sees every request on
the broker's loop before its processor) and refuses or kills on a rule; the tests
then restart the query and count what consumers see.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.properties import Prop
from rocklet.spark.sink_txn import JOURNAL_TOPIC
from rocklet.transport.connection import Connection
from tests.spark.support import BrokerThread

#: Decides from (connection, request) whether to act: True acts on that request.
Rule = Callable[[Connection, RemotingCommand], bool]


def is_half(cmd: RemotingCommand) -> bool:
    """A SEND_MESSAGE_V2 of a half message."""
    props = cmd.ext_fields.get("i", "")
    return cmd.code == RequestCode.SEND_MESSAGE_V2 and f"{Prop.TRAN_MSG}\x01true" in props


def is_decision(cmd: RemotingCommand) -> bool:
    """The exactly-once sink's decision: its head message (the only journal message with keys)."""
    return (
        cmd.code == RequestCode.SEND_MESSAGE_V2
        and cmd.ext_fields.get("b") == JOURNAL_TOPIC
        and f"{Prop.KEYS}\x01" in cmd.ext_fields.get("i", "")
    )


def is_commit(cmd: RemotingCommand) -> bool:
    """An END_TRANSACTION."""
    return cmd.code == RequestCode.END_TRANSACTION


class Hostile:
    """Counts the requests a rule matches; from the ``after``-th on, acts on each.

    Args:
        broker: The broker to install the gate on.
        rule: Which requests count.
        after: How many matching requests pass untouched first.
        kill_sender: Kill the sending process (SIGKILL) at the first one, then refuse.
        kill_session: Kill every process of this session (SIGKILL) at the first one,
            then refuse: a whole driver with its JVM and Python workers (PySpark's
            daemon puts its workers in a process group of their own).
    """

    def __init__(
        self,
        broker: BrokerThread,
        rule: Rule,
        after: int,
        *,
        kill_sender: bool = False,
        kill_session: int | None = None,
    ):
        self._broker = broker
        self._rule = rule
        self._after = after
        self._kill = kill_sender
        self._kill_session = kill_session
        self.seen = 0
        self.acted = threading.Event()
        self.killed: list[int] = []

    def __enter__(self) -> Hostile:
        self._broker.broker.registry.gate = self._gate
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._broker.broker.registry.gate = None

    def _gate(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        if not self._rule(conn, cmd):
            return None
        self.seen += 1
        if self.seen <= self._after:
            return None
        if self._kill and not self.acted.is_set():
            peer = conn.peer
            assert peer is not None
            pid = pid_of_client_port(peer[1])
            os.kill(pid, signal.SIGKILL)
            self.killed.append(pid)
        if self._kill_session is not None and not self.acted.is_set():
            self.killed.extend(kill_session(self._kill_session))
        self.acted.set()
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark="hostile broker (test)")


def kill_session(sid: int) -> list[int]:
    """SIGKILL every process whose session id is ``sid`` (Linux /proc); their pids."""
    killed = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp session ...: comm may hold spaces, so split after it.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid:
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.append(int(proc.name))
    return killed


def pid_of_client_port(port: int) -> int:
    """The process holding the loopback TCP socket bound to ``port`` (Linux /proc)."""
    inode = _socket_inode(port)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fds = list((proc / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) == f"socket:[{inode}]":
                    return int(proc.name)
            except OSError:
                continue
    raise LookupError(f"no process holds the socket of local port {port}")


def _socket_inode(port: int) -> str:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                return fields[9]
    raise LookupError(f"no TCP socket has local port {port}")
