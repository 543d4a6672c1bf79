"""Who holds a TCP port: the answer to a server's "address already in use" at start.

A taken port is the commonest reason a server does not start (a second ``make run``, a
RocketMQ name server on 9876), and the error alone does not say by whom. On Linux the
listening sockets are in ``/proc/net/tcp`` and ``tcp6`` and their owners' descriptors
in ``/proc/PID/fd``; elsewhere, or for another user's process (whose descriptors we
may not read), the line says only that the port is taken.
"""

from __future__ import annotations

import errno
import re
from pathlib import Path
from typing import Final

from rocklet.transport.procfs import holders

__all__ = ["explain_bind_error", "port_holders"]

#: The address in asyncio's and uvloop's bind error: "... on address ('::1', 9876, 0, 0): ...".
_BIND_ADDRESS: Final = re.compile(r"address \('([^']*)', (\d+)")
_TCP_LISTEN: Final = "0A"


def _listening_inodes(port: int, proc: Path) -> set[str]:
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if len(fields) < 10 or fields[3] != _TCP_LISTEN:
                continue
            try:
                listening = int(fields[1].rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):  # not procfs's layout: tell nothing, not crash
                continue
            if listening == port:
                inodes.add(fields[9])
    return inodes


def port_holders(port: int, proc: Path = Path("/proc")) -> list[tuple[int, str]]:
    """The processes listening on a TCP port, as far as ``/proc`` tells.

    Args:
        port: The TCP port.
        proc: Where procfs is mounted.

    Returns:
        ``(pid, command line)`` of each holder, by pid; empty without procfs or when
        the holders' descriptors cannot be read.
    """
    return holders({f"socket:[{inode}]" for inode in _listening_inodes(port, proc)}, proc)


def explain_bind_error(exc: OSError, hint: str, proc: Path = Path("/proc")) -> str | None:
    """One line a person can act on for a port that is taken.

    Args:
        exc: The error the server's bind raised.
        hint: How to choose another port, e.g. ``"--port, or listenPort"``.
        proc: Where procfs is mounted.

    Returns:
        The line, or ``None`` when ``exc`` is not "address already in use".
    """
    if exc.errno != errno.EADDRINUSE:
        return None
    match = _BIND_ADDRESS.search(str(exc))
    if match is None:
        return f"a port it needs is already in use ({exc}); choose another: {hint}"
    host, port = match.group(1), int(match.group(2))
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    holders = port_holders(port, proc)
    by = " by " + "; ".join(f"pid {pid} ({cmd})" for pid, cmd in holders) if holders else ""
    return f"{where} is already in use{by}; stop it or choose another port: {hint}"
