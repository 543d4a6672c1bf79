"""The slave's side of HA: follow the master's commitlog (RocketMQ's ``HAClient``).

The slave connects to the master's HA port, reports its max commitlog offset, and
appends every chunk the master sends at exactly the master's offsets
(:func:`rocklet.store.replica.append_replica`, which also dispatches the records to
the consume queues and index). It reports its new max offset after each chunk and
every ``haSendHeartbeatInterval`` (5 s) otherwise.

Beyond RocketMQ, divergence is detected: a slave that already holds bytes asks the
master to start up to :data:`VERIFY_BYTES` before its end and compares the master's
bytes with its own there before appending anything. Different bytes, or a master whose
commitlog ends before the slave's, stop replication with an ERROR naming both offsets
and show in brokerStatus (``haDiverged``); RocketMQ 4.x would append the master's later
bytes after the slave's own and silently mix two histories. The first report is a lower
offset, which an unmodified RocketMQ master serves like any other.

The slave's metadata sync (:mod:`rocklet.broker.ha.metadata`) asks :meth:`HASlave.out_of_step`
before it takes the master's tables: not from a master it diverged from, nor from one
it lost and has not checked again (a master that comes back without its disk answers
on its broker port before the HA check finds it out, and its empty topic table would
replace the slave's, the only copy left).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

import structlog

from rocklet.broker.ha.handshake import HandshakeError
from rocklet.broker.ha.lag import SlaveView
from rocklet.broker.ha.wire import HEADER, HEADER_SIZE, REPORT
from rocklet.store.message_store import MessageStore
from rocklet.store.replica import (
    ReplicaError,
    append_replica,
    first_difference,
    newest_store_time,
)

__all__ = ["VERIFY_BYTES", "HASlave"]

log = structlog.get_logger(__name__)

#: How much of its tail a slave with data compares with the master's on connect.
VERIFY_BYTES = 64 * 1024
#: Wait before reconnecting after a failed or lost connection (RocketMQ: 5 s).
_RETRY_S = 1.0
#: A master that stays down (or keeps refusing) is logged once a minute, not at every retry.
_UNREACHABLE_LOG_EVERY = 60
#: Why a master closes an HA connection before its first frame: its own log says which.
_REFUSED_HINT = (
    "the master refuses this slave; its log line 'HA connection refused' says why: an "
    "address outside its haAllowedSlaves, no client certificate it trusts when it "
    "requires one, or no HA handshake when it requires one (haAuthEnable); or it was "
    "stopping"
)


_Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class _Diverged(Exception):
    """The slave's commitlog is not a prefix of the master's."""


class _Refused(Exception):
    """The master closed the connection before sending a single frame."""


class _Failures:
    """Failed attempts in a row: each kind is logged at once, a repeat once a minute."""

    __slots__ = ("_last", "count")

    def __init__(self) -> None:
        self.count = 0
        self._last = ""

    def warn(self, event: str, **fields: object) -> None:
        self.count += 1
        if event != self._last or self.count % _UNREACHABLE_LOG_EVERY == 1:
            log.warning(event, attempts=self.count, **fields)
        self._last = event

    def reset(self) -> None:
        self.count = 0
        self._last = ""


class HASlave:
    """The slave's HA client. Event loop only; :meth:`start` runs it as a task.

    Args:
        store: The slave's store.
        master_addr: ``haMasterAddress`` (``host:port`` of the master's HA port);
            ``None`` until the name server names it (:meth:`set_master`).
        heartbeat_s: ``haSendHeartbeatInterval`` in seconds.
        housekeeping_s: ``haHousekeepingInterval``: reconnect after this long in silence.
        dial: Opens the connection to ``(host, port)`` (TLS and the handshake of
            :func:`rocklet.broker.ha.handshake.dial_master`); default: plain TCP.
    """

    def __init__(
        self,
        store: MessageStore,
        master_addr: str | None,
        *,
        heartbeat_s: float = 5.0,
        housekeeping_s: float = 20.0,
        dial: Callable[[str, int], Awaitable[_Streams]] | None = None,
    ) -> None:
        self._store = store
        self._dial = dial or asyncio.open_connection
        self._fixed = bool(master_addr)
        self.master_addr = master_addr or None
        self._heartbeat_s = heartbeat_s
        self._housekeeping_s = housekeeping_s
        self._task: asyncio.Task[None] | None = None
        self._master_known = asyncio.Event()
        if self.master_addr:
            self._master_known.set()
        #: Why replication stopped for good (divergence), or ``None``.
        self.diverged: str | None = None
        #: The slave holds data not yet checked against the master's commitlog: from
        #: the start when its store is not empty (a master that lost its disk may be
        #: up already), and from every loss of the master until the next check.
        self._unchecked = store.commitlog_max_offset() > 0
        #: Called when a check clears :attr:`_unchecked` (the metadata sync runs then
        #: rather than at its next round).
        self.on_checked: Callable[[], None] | None = None
        self.connected = False
        #: Failed connections in a row (reset by a session's first frame).
        self._failures = _Failures()
        #: The highest master offset a frame showed (end of a chunk, or a heartbeat's
        #: offset); -1 before the first frame.
        self.master_offset = -1

    def set_master(self, addr: str | None) -> None:
        """Take the master's HA address from a REGISTER_BROKER answer.

        A configured ``haMasterAddress`` wins and is never replaced, as in RocketMQ.
        """
        if self._fixed or not addr or addr == self.master_addr:
            return
        log.info("master HA address learned", master=addr)
        self.master_addr = addr
        self._master_known.set()

    def start(self) -> None:
        """Run the client as a task until :meth:`stop`."""
        self._task = asyncio.create_task(self._run(), name="ha-slave")

    async def stop(self) -> None:
        """Disconnect and stop. Idempotent."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def out_of_step(self) -> str | None:
        """Why the master's metadata must not be taken now, or ``None`` if it may.

        ``None`` for an empty slave from the start (it has nothing to lose, and syncs
        at once, as RocketMQ's does); for one that holds data, once a connection has
        found its commitlog a prefix of the master's, until the master is lost again.
        """
        if self.diverged is not None:
            return "replication stopped: the slave's commitlog diverged from the master's"
        if self._unchecked:
            return (
                "this slave's commitlog has not been checked against the master's since "
                "the slave started or lost the HA connection"
            )
        return None

    def _checked(self) -> None:
        was, self._unchecked = self._unchecked, False
        if was and self.on_checked is not None:
            self.on_checked()

    def status(self) -> dict[str, str]:
        """The keys this adds to brokerStatus (Rocklet's own)."""
        return self.view().keys()

    def view(self, now_ms: int | None = None) -> SlaveView:
        """The slave's offsets and lag as of the last frame. Any thread.

        Args:
            now_ms: Wall-clock time to age messages against (default: now).
        """
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        mine = self._store.commitlog_max_offset()
        lag_bytes = max(0, self.master_offset - mine) if self.master_offset >= 0 else 0
        seconds = 0.0
        if lag_bytes or not self.connected:
            newest = newest_store_time(self._store)
            seconds = max(0, now_ms - newest) / 1000 if newest else 0.0
        return SlaveView(
            master_addr=self.master_addr or "",
            connected=self.connected,
            diverged=self.diverged,
            offset=mine,
            master_offset=self.master_offset,
            lag_bytes=lag_bytes,
            lag_seconds=seconds,
        )

    async def _run(self) -> None:
        failures = self._failures
        while self.diverged is None:
            await self._master_known.wait()
            addr = self.master_addr
            assert addr is not None
            host, _, port = addr.rpartition(":")
            try:
                reader, writer = await self._dial(host, int(port))
            except HandshakeError as exc:
                # Reached, but refused us or could not prove it is the master: no byte
                # of its commitlog was read.
                failures.warn("HA handshake with the master failed", master=addr, error=str(exc))
                await asyncio.sleep(_RETRY_S)
                continue
            except (OSError, TimeoutError) as exc:
                failures.warn("cannot reach the master's HA port", master=addr, error=str(exc))
                await asyncio.sleep(_RETRY_S)
                continue
            self.connected = True
            try:
                await self._session(reader, writer)
            except _Diverged as exc:
                self.diverged = str(exc)
                log.error("replication stopped: the slave's commitlog diverged", why=str(exc))
            except _Refused:
                # A TLS 1.3 client finishes its handshake before the server has checked
                # its certificate: a refusal shows only as a close, here.
                failures.warn(
                    "the master closed the HA connection before sending anything",
                    master=addr,
                    hint=_REFUSED_HINT,
                )
            except (OSError, asyncio.IncompleteReadError, TimeoutError, ReplicaError) as exc:
                log.warning("HA connection lost", master=addr, error=str(exc) or type(exc).__name__)
            except Exception:
                # A bug must not end replication for good (nor make the broker's stop
                # fail): say so loudly and follow the master again.
                log.exception("HA session failed unexpectedly; reconnecting", master=addr)
            finally:
                self.connected = False
                self._unchecked = True
                writer.close()
            if self.diverged is None:
                await asyncio.sleep(_RETRY_S)

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        store = self._store
        mine = store.commitlog_max_offset()
        cursor = mine if mine == 0 else max(store.commitlog_min_offset(), mine - VERIFY_BYTES)
        verified = cursor == mine
        if verified:
            self._checked()  # nothing of its own to compare: it cannot differ
        # Said once per run of failures, not at each retry of a master that refuses us.
        (log.debug if self._failures.count else log.info)(
            "following the master", master=self.master_addr, offset=mine, check_from=cursor
        )
        reported = cursor
        _report(writer, reported)
        heartbeat = asyncio.create_task(self._heartbeats(writer, lambda: reported))
        frames = 0
        try:
            while True:
                # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a
                # cancellation that arrives as the read completes (a stop that hangs).
                async with asyncio.timeout(self._housekeeping_s):
                    try:
                        head = await reader.readexactly(HEADER_SIZE)
                    except (asyncio.IncompleteReadError, ConnectionResetError) as exc:
                        if not frames and not getattr(exc, "partial", b""):
                            raise _Refused from exc
                        raise
                frames += 1
                if frames == 1:
                    self._failures.reset()
                offset, size = HEADER.unpack(head)
                body = await reader.readexactly(size) if size else b""
                self.master_offset = max(self.master_offset, offset + size)
                if not verified:
                    if offset != cursor or not body:
                        raise _Diverged(
                            f"the master's commitlog ends at {offset}, before the slave's "
                            f"max offset {mine}"
                        )
                    at = await asyncio.to_thread(first_difference, store, offset, body)
                    if at is not None:
                        raise _Diverged(
                            f"commitlog bytes differ at offset {at} (the slave holds up to "
                            f"{mine}; the master sent {offset}..{offset + size})"
                        )
                    cursor = offset + size
                    if cursor < mine:
                        continue
                    verified = True
                    self._checked()
                    log.info("slave commitlog matches the master's", checked_to=mine)
                    body, offset = body[mine - offset :], mine
                    if not body:
                        # The first report was where the check began, below what this
                        # slave holds: without this one the master would count it that
                        # far behind until the next write.
                        reported = mine
                        _report(writer, reported)
                        continue
                elif offset != store.commitlog.max_offset() and not (
                    store.commitlog.files.last is None and offset % store.commitlog.file_size == 0
                ):
                    # (An empty slave starts where the master starts it: RocketMQ's
                    # master sends only its newest segment to an empty slave.)
                    raise ReplicaError(
                        f"master sent offset {offset}, slave is at {store.commitlog.max_offset()}"
                    )
                if body:
                    reported = await asyncio.to_thread(append_replica, store, offset, body)
                    _report(writer, reported)
        finally:
            heartbeat.cancel()

    async def _heartbeats(self, writer: asyncio.StreamWriter, offset: Callable[[], int]) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_s)
            if writer.is_closing():
                return  # the session sees the loss on its next read or report
            _report(writer, offset())


def _report(writer: asyncio.StreamWriter, offset: int) -> None:
    """Send an offset report; a connection the master reset is a lost one.

    uvloop raises RuntimeError for a write on a transport it closed after a reset (a
    master killed with kill -9 while the slave was appending), asyncio drops it.
    """
    if writer.is_closing():
        raise ConnectionResetError("the master closed the HA connection")
    writer.write(REPORT.pack(offset))
