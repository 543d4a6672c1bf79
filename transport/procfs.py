"""Which processes hold a file, a directory or a socket open, as far as ``/proc`` tells.

For messages that name who is in the way: a port already taken at start, a commitlog
directory another broker uses. Linux lists each process's open descriptors as links in
``/proc/PID/fd``; elsewhere, or for another user's process (whose descriptors we may
not read), nothing is found and the caller says less.
"""

from __future__ import annotations

from collections.abc import Set
from pathlib import Path
from typing import Final

__all__ = ["command_line", "holders"]

_MAX_COMMAND: Final = 160


def command_line(pid_dir: Path) -> str:
    """A process's command line, shortened for one log line; ``"?"`` when unreadable."""
    try:
        argv = pid_dir.joinpath("cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    except OSError:
        return "?"
    text = " ".join(arg.decode(errors="replace") for arg in argv)
    return text if len(text) <= _MAX_COMMAND else text[: _MAX_COMMAND - 3] + "..."


def holders(targets: Set[str], proc: Path = Path("/proc")) -> list[tuple[int, str]]:
    """The processes with a descriptor open on any of ``targets``.

    Args:
        targets: What the descriptor links read: an absolute path, or
            ``socket:[INODE]``.
        proc: Where procfs is mounted.

    Returns:
        ``(pid, command line)`` of each holder, by pid; empty without procfs or when
        the holders' descriptors cannot be read.
    """
    if not targets:
        return []
    found: list[tuple[int, str]] = []
    for pid_dir in proc.glob("[0-9]*"):
        try:
            links = {str(fd.readlink()) for fd in pid_dir.joinpath("fd").iterdir()}
        except OSError:  # gone meanwhile, or another user's
            continue
        if links & targets:
            found.append((int(pid_dir.name), command_line(pid_dir)))
    return sorted(found)
