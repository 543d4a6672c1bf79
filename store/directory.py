"""Claiming a store directory: one process at a time, and only where it can write.

RocketMQ keeps a ``lock`` file in ``storePathRootDir`` and holds a ``FileLock`` on it
while the broker runs, so a second broker on the same directory refuses to start instead
of recovering the live store (and deleting the first one's ``abort`` marker). Rocklet
does the same with ``flock(LOCK_EX | LOCK_NB)`` on ``<store>/lock``. The kernel drops the
lock when its holder dies, even on SIGKILL, so a crash never leaves a stale lock to clean
up; the file itself stays. The holder writes its pid, host, start time and program into
the file, so the refused process can say who holds the store.

The commitlog may live outside the root (``storePathCommitLog``), where a second broker
with another root but the same broker.conf would append to it too. So the commitlog
directory is locked as well: ``flock`` on the directory itself, since a file of ours among
the segments would break RocketMQ's loader. A directory has no room for the holder's
details; its holder is found in ``/proc`` instead.

Java's ``FileLock`` is a POSIX record lock, which Linux keeps apart from ``flock``. So
the lock file is also locked with an open-file-description record lock
(``F_OFD_SETLK``, Linux), which does conflict with Java's: a RocketMQ broker running on
the store keeps Rocklet out, and the other way round. (A classic ``lockf`` would do too,
but the process drops it when any descriptor of the file is closed, a failed second
open in the same process included.)

:func:`check_writable` probes a directory the way the store and the broker will use it
(create, write, fsync, remove), so an unwritable directory is reported at start, before
anything was created there that could not be saved later. A directory that is only full
passes: the broker starts on it, serves what is stored and refuses sends until there is
room.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import os
import socket
import struct
from pathlib import Path
from typing import Final, Self

from rocklet.transport.procfs import holders

__all__ = [
    "LOCK_FILE",
    "StoreDamagedError",
    "StoreDirectoryError",
    "StoreInUseError",
    "StoreLock",
    "check_writable",
]

#: The lock file's name in the store root (RocketMQ's name too).
LOCK_FILE: Final = "lock"
#: How to pick another directory, for the messages below.
_ELSEWHERE: Final = "choose another data directory (--data-dir or storePathRootDir)"


class StoreDirectoryError(Exception):
    """A store directory cannot be used; the message names it and says what to do."""


class StoreDamagedError(StoreDirectoryError):
    """Store files are damaged in a way recovery must not guess past.

    A commitlog segment missing between two others, a file of the wrong size: the
    message names the file and what to do.
    """


class StoreInUseError(StoreDirectoryError):
    """Another live process holds the store directory's lock.

    Attributes:
        path: The store root.
        holder: What the holder wrote into the lock file (``pid``, ``host``,
            ``started``, ``program``); empty when it had not written it yet.
    """

    def __init__(
        self,
        path: Path,
        holder: dict[str, str],
        what: str = "the store",
        elsewhere: str = _ELSEWHERE,
    ) -> None:
        self.path = path
        self.holder = holder
        #: Who holds it, for a message: ``pid 12 (rocklet broker started ...)``.
        self.who = _describe(holder)
        super().__init__(f"{what} {path} is in use by {self.who}; stop it or {elsewhere}")


def _describe(holder: dict[str, str]) -> str:
    if "pid" not in holder:
        return holder.get("program", "another process (it has not written its details yet)")
    who = f"pid {holder['pid']}"
    if holder.get("host") and holder["host"] != socket.gethostname():
        who += f" on {holder['host']}"  # a shared file system: the pid is not ours
    what = holder.get("program", "a process")
    if holder.get("started"):
        what += f" started {holder['started']}"
    return f"{who} ({what})"


def _parse_holder(text: str) -> dict[str, str]:
    holder: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            holder[key.strip()] = value.strip()
    return holder


class StoreLock:
    """The exclusive lock on a store root, held until :meth:`release` or process exit.

    Build with :meth:`acquire`. Any thread; :meth:`release` is idempotent.
    """

    def __init__(self, path: Path, fd: int) -> None:
        self._path = path
        self._fd: int | None = fd
        self._dir_fds: list[int] = []  # the commitlog directory's, when locked

    @property
    def path(self) -> Path:
        """The lock file."""
        return self._path

    @classmethod
    def acquire(cls, root: Path, program: str, commitlog: Path | None = None) -> Self:
        """Create the store root if needed and take its lock without waiting.

        Args:
            root: The store root (``storePathRootDir``).
            program: What holds the lock, for the message another process will show
                (e.g. ``"rocklet broker"``).
            commitlog: The commitlog directory, created if needed and locked too.

        Returns:
            The held lock.

        Raises:
            StoreInUseError: Another process holds the root or the commitlog directory.
            StoreDirectoryError: The root or the lock file cannot be created or opened.
        """
        lock = cls._acquire_root(root, program)
        if commitlog is not None:
            try:
                lock.lock_commitlog(commitlog)
            except BaseException:
                lock.release()
                raise
        return lock

    def lock_commitlog(self, directory: Path) -> None:
        """Create the commitlog directory if needed and lock it too, without waiting.

        Raises:
            StoreInUseError: Another process holds it.
            StoreDirectoryError: It cannot be created or opened.
        """
        self._lock_directory(directory, fcntl.LOCK_EX, create=True)

    @classmethod
    def _acquire_root(cls, root: Path, program: str) -> Self:
        path = root / LOCK_FILE
        try:
            root.mkdir(parents=True, exist_ok=True)
            # No O_TRUNC: the holder's details must survive until we hold the lock.
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreDirectoryError(_cannot_write(root, "the store", exc)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
            os.close(fd)
            raise StoreInUseError(root, _parse_holder(text)) from None
        except OSError as exc:
            os.close(fd)
            raise StoreDirectoryError(_cannot_write(root, "the store", exc)) from None
        _record_lock(fd, path, root, fcntl.F_WRLCK)
        lock = cls(path, fd)
        lock._write_holder(program)
        return lock

    @classmethod
    def acquire_shared(cls, root: Path, program: str, commitlog: Path | None = None) -> Self | None:
        """Take the lock shared, for a reader that must not run beside a broker.

        ``rocklet store check`` holds it while it reads: a broker started meanwhile
        refuses to start (naming the check) instead of recovering files under it. The
        lock file is not created: a store without one has never had a broker.

        Args:
            root: The store root.
            program: What holds the lock, for a refused broker's message.
            commitlog: The commitlog directory, locked shared too when it exists.

        Returns:
            The held lock, or None when there is no lock file to lock.

        Raises:
            StoreInUseError: A broker (or another holder) has the store or its
                commitlog directory exclusively.
        """
        path = root / LOCK_FILE
        writable = True
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return None
        except OSError:
            try:  # a read-only copy of a store: lock it for reading all the same
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                return None
            writable = False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
            os.close(fd)
            raise StoreInUseError(root, _parse_holder(text)) from None
        _record_lock(fd, path, root, fcntl.F_RDLCK)
        lock = cls(path, fd)
        if writable:
            lock._write_holder(program)
        if commitlog is not None and commitlog.is_dir():
            try:
                lock._lock_directory(commitlog, fcntl.LOCK_SH, create=False)
            except BaseException:
                lock.release()
                raise
        return lock

    def _lock_directory(self, directory: Path, mode: int, *, create: bool) -> None:
        try:
            if create:
                directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise StoreDirectoryError(_cannot_write(directory, "the commitlog", exc)) from None
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreInUseError(
                directory,
                _holder_of(directory),
                "the commitlog directory",
                "choose another one (storePathCommitLog)",
            ) from None
        self._dir_fds.append(fd)

    def _write_holder(self, program: str) -> None:
        # Wall-clock time on purpose: a person reads it next to `ps` output.
        started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        text = f"pid={os.getpid()}\nhost={socket.gethostname()}\nstarted={started}\n"
        text += f"program={program}\n"
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        try:
            os.pwrite(self._fd, text.encode(), 0)
        except OSError as exc:
            # Only the refusal message of a second process needs them; a full disk
            # must not keep the broker from starting (it then refuses sends).
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise

    def release(self) -> None:
        """Empty the holder's details and drop the lock (the file stays, as in RocketMQ).

        The file is not removed: a process waiting on the old file would lock a file
        nobody else sees, and two processes would hold "the" lock.
        """
        for dir_fd in self._dir_fds:
            os.close(dir_fd)
        self._dir_fds.clear()
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)  # before unlocking: the next holder's details are its own
        os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> Self:
        """Use as a context manager; :meth:`release` on exit."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Release the lock."""
        self.release()


#: ``struct flock`` for F_OFD_SETLK: type, whence, start, len 0 (the whole file), pid 0.
_FLOCK: Final = struct.Struct("@hhqqixxxx")


def _record_lock(fd: int, path: Path, root: Path, kind: int) -> None:
    """Take the record lock a Java broker's ``FileLock`` conflicts with (``fd`` is flocked).

    Raises:
        StoreInUseError: Another process (a RocketMQ broker) holds one; ``fd`` is closed.
    """
    ofd_setlk = getattr(fcntl, "F_OFD_SETLK", None)
    if ofd_setlk is None:
        return  # not Linux: the flock alone keeps Rocklet processes apart
    try:
        fcntl.fcntl(fd, ofd_setlk, _FLOCK.pack(kind, os.SEEK_SET, 0, 0, 0))
    except OSError as exc:
        if exc.errno not in (errno.EAGAIN, errno.EACCES):
            return  # a filesystem without record locks: the flock still holds
        os.close(fd)
        raise StoreInUseError(root, _holder_of(path)) from None


def _holder_of(directory: Path) -> dict[str, str]:
    """Who has ``directory`` (or a file) open besides us, in the holder-details form."""
    others = [(pid, cmd) for pid, cmd in holders({str(directory.resolve())}) if pid != os.getpid()]
    if not others:
        return {"program": "another process"}
    pid, command = others[0]
    return {"pid": str(pid), "program": command}


def _cannot_write(directory: Path, purpose: str, exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    return (
        f"cannot write to {directory} ({purpose}): {reason}; make it writable for the "
        f"user running rocklet (uid {os.getuid()}) or {_ELSEWHERE}"
    )


def check_writable(directory: Path, purpose: str) -> None:
    """Create the directory if needed and prove a file can be written and synced there.

    Args:
        directory: The directory to probe.
        purpose: What the directory holds, for the message (e.g. ``"the store"``).

    Raises:
        StoreDirectoryError: It cannot be created, or a probe file cannot be created,
            written, synced or removed; the message names the directory and the fix.
    """
    probe = directory / f".write-probe-{os.getpid()}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"rocklet")
            os.fsync(fd)
        finally:
            os.close(fd)
        probe.unlink()
    except OSError as exc:
        with contextlib.suppress(OSError):
            probe.unlink()
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            # Writable, only full: the broker starts, serves reads and refuses sends
            # until there is room (rocklet.store.disk_space).
            return
        raise StoreDirectoryError(_cannot_write(directory, purpose, exc)) from None
