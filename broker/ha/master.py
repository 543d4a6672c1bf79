"""The master's side of HA: listen, ship commitlog bytes to each slave, count acks.

One connection per slave, two tasks each (RocketMQ's ``HAConnection`` read and write
services). The reader takes the slave's 8-byte offset reports: the first says where to
start, every one is an ack. The writer sends the commitlog from there in chunks of at
most ``haTransferBatchSize`` bytes that never cross a segment end, and a header-only
heartbeat after ``haSendHeartbeatInterval`` without data.

SYNC_MASTER waits (:meth:`HAMaster.on_replicated`) are grouped like SYNC_FLUSH's
group commit: every waiting send sits in one FIFO by its end offset
(:mod:`rocklet.broker.offset_waits`), and each ack releases all of them at or below
it, so a burst of sends costs one round trip, and no send costs a task or a timer.

Beyond RocketMQ: a slave that reports 0 (an empty store) gets the whole retained
commitlog from the master's min offset, not only the newest segment; a slave that
reports an offset past the master's end is told the master's end in a heartbeat (so a
Rocklet slave can report the divergence) and disconnected, with an ERROR naming both.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog

from rocklet.broker.ha.guard import AllowList, HAGuard
from rocklet.broker.ha.lag import MasterLag, SlaveLag
from rocklet.broker.ha.listener import HAListener
from rocklet.broker.ha.wire import HEADER, REPORT, REPORT_SIZE
from rocklet.broker.offset_waits import Done, OffsetWaits
from rocklet.store.message_store import MessageStore
from rocklet.store.replica import read_replica, record_at_or_after

__all__ = ["HAMaster"]

log = structlog.get_logger(__name__)

#: Longest wait for new data before a writer looks again (puts from worker threads
#: do not wake it; RocketMQ's writer waits the same 100 ms).
_POLL_S = 0.1
#: Further behind than this, a chunk is read in a worker thread (cold pages).
_COLD_BYTES = 4 * 1024 * 1024


#: What a wait that ended without an acknowledgement is told (timeout, no slave left,
#: stop); the send is answered FLUSH_SLAVE_TIMEOUT either way, as today.
_NOT_ACKED = "no slave acknowledged in time"


class _Slave:
    """One connected slave."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.request_offset = -1  #: first report; -1 until it arrives
        self.ack_offset = -1
        self.reported = asyncio.Event()
        #: A record start at or before ``ack_offset`` (and its store time), so a lag
        #: query walks only the records acknowledged since the last one.
        self.oldest_unacked: tuple[int, int] | None = None


class HAMaster:
    """The master's HA service. Event loop only.

    Args:
        store: The master's store.
        batch_bytes: ``haTransferBatchSize``.
        heartbeat_s: ``haSendHeartbeatInterval`` in seconds.
        fallbehind_max: ``haSlaveFallbehindMax``: a slave further behind is not OK.
        housekeeping_s: ``haHousekeepingInterval``: a silent slave is dropped after it.
        guard: Who may follow (allow-list, TLS, handshake); default: the default
            ``haAllowedSlaves`` only.
    """

    def __init__(
        self,
        store: MessageStore,
        *,
        batch_bytes: int = 32 * 1024,
        heartbeat_s: float = 5.0,
        fallbehind_max: int = 256 * 1024 * 1024,
        housekeeping_s: float = 20.0,
        guard: HAGuard | None = None,
    ) -> None:
        self._store = store
        self._guard = guard or HAGuard(AllowList(None))
        #: Connections still being admitted (aborted by :meth:`stop`).
        self._admitting: set[asyncio.StreamWriter] = set()
        self._batch = batch_bytes
        self._heartbeat_s = heartbeat_s
        self._fallbehind = fallbehind_max
        self._housekeeping_s = housekeeping_s
        self._server: HAListener | None = None
        self._slaves: dict[_Slave, asyncio.StreamWriter] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._data = asyncio.Event()
        self._waits = OffsetWaits(_NOT_ACKED)
        #: Highest offset any slave acknowledged (``push2SlaveMaxOffset``).
        self.acked_offset = 0
        #: Whether a slave is connected (checked on the send path before notifying).
        self.has_slaves = False
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        """Listen for slaves.

        Args:
            host: Interface.
            port: ``haListenPort`` (0: any free port).

        Returns:
            The bound port.
        """
        self._server = await HAListener.open(host, port, self._guard, self._admit)
        self.port = self._server.port
        log.info("ha listening", host=host, port=self.port)
        return self.port

    async def stop(self) -> None:
        """Close the listener and every slave connection; fail the waits. Idempotent."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        # Hang up rather than cancel: the connection tasks then end on their own.
        for writer in [*self._slaves.values(), *self._admitting]:
            writer.transport.abort()
        if self._tasks:
            _, stuck = await asyncio.wait(list(self._tasks), timeout=5)
            for task in stuck:
                task.cancel()
        self._release_all()

    def _release_all(self) -> None:
        self._waits.fail_all(_NOT_ACKED)

    def notify(self) -> None:
        """Wake the writers: the commitlog grew (the send path calls it)."""
        self._data.set()
        self._data.clear()  # the waiting writers are woken all the same

    def slave_ok(self, end_offset: int) -> bool:
        """Whether a SYNC_MASTER send may wait for a slave (``HAService.isSlaveOK``).

        Args:
            end_offset: Offset just past the message.
        """
        return self.has_slaves and end_offset - self.acked_offset < self._fallbehind

    def on_replicated(self, end_offset: int, timeout_s: float, done: Done) -> bool:
        """Call ``done`` once a slave acknowledged ``end_offset``, unless it already has.

        The caller has woken the writers (:meth:`notify`) after the put: the send path
        does that for every put, waiting or not, so this does not do it again.

        Args:
            end_offset: Offset just past the message.
            timeout_s: ``slaveTimeout`` in seconds (the same for every call).
            done: Called later with ``None`` when acknowledged, else with why not
                (timeout, the last slave left, the service stopped).

        Returns:
            ``True`` when already acknowledged (``done`` is not called), ``False``
            when ``done`` will be.
        """
        if self.acked_offset >= end_offset:
            return True
        self._waits.add(end_offset, timeout_s, done)
        return False

    @property
    def waiting(self) -> int:
        """Sends waiting for an acknowledgement."""
        return len(self._waits)

    async def wait_replicated(self, end_offset: int, timeout_s: float) -> bool:
        """Wait until a slave acknowledged ``end_offset`` (:meth:`on_replicated`, awaited).

        Args:
            end_offset: Offset just past the message.
            timeout_s: ``slaveTimeout`` in seconds.

        Returns:
            Whether it was acknowledged in time.
        """
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def done(why: str | None) -> None:
            if not fut.done():
                fut.set_result(why is None)

        if self.on_replicated(end_offset, timeout_s, done):
            return True
        self.notify()
        return await fut

    def status(self) -> dict[str, str]:
        """The keys this adds to brokerStatus (Rocklet's own)."""
        return self.lag().keys()

    def lag(self, now_ms: int | None = None) -> MasterLag:
        """How far each connected slave is behind. Any thread (reads the store).

        Args:
            now_ms: Wall-clock time to age messages against (default: now).

        Returns:
            The master's offsets and one entry per slave, in connection order.
        """
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        store = self._store
        end = store.commitlog_max_offset()
        slaves = []
        for slave in list(self._slaves):  # a copy: connections come and go on the loop
            ack = slave.ack_offset
            behind_from = max(ack, store.commitlog_min_offset())
            seconds = 0.0
            if behind_from < end:
                hint = slave.oldest_unacked
                found = record_at_or_after(store, behind_from, hint[0] if hint else -1)
                if found is not None:
                    slave.oldest_unacked = found
                    seconds = max(0, now_ms - found[1]) / 1000
            slaves.append(SlaveLag(slave.peer, ack, max(0, end - max(ack, 0)), seconds))
        return MasterLag(self.port, end, self.acked_offset, tuple(slaves))

    # -- connections -------------------------------------------------------------------

    def _on_ack(self, slave: _Slave, offset: int) -> None:
        slave.ack_offset = offset
        if offset <= self.acked_offset:
            return
        self.acked_offset = offset
        self._waits.advance(offset)

    async def allow(self, allowed: AllowList) -> list[str]:
        """Put a new ``haAllowedSlaves`` in force (UPDATE_BROKER_CONFIG).

        New connections are checked against it, and the slaves connected now that it
        does not admit are disconnected: taking a host off the list must cut it off,
        not only keep it from coming back.

        Returns:
            The peers disconnected (``host:port``).
        """
        self._guard.allowed = allowed
        dropped: list[str] = []
        for slave, writer in list(self._slaves.items()):
            host = slave.peer.rsplit(":", 1)[0]
            if not await allowed.allows(host):
                writer.transport.abort()
                dropped.append(slave.peer)
        log.warning("haAllowedSlaves changed", allowed=allowed.text, disconnected=dropped)
        return dropped

    async def _admit(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Nothing of the commitlog flows, and the peer does not count as a slave for
        # SYNC_MASTER, until the guard admits it (broker/ha/guard.py).
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._admitting.add(writer)
        try:
            admitted = await self._guard.admit(reader, writer)
        except Exception:  # a bug in the guard must refuse, not leave the socket open
            log.exception("HA connection refused: the admission check failed")
            admitted = False
        finally:
            self._admitting.discard(writer)
            self._tasks.discard(task)
        if not admitted:
            writer.transport.abort()
            return
        await self._accept(reader, writer)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = writer.get_extra_info("peername")[:2]
        peer = f"{host}:{port}"
        slave = _Slave(peer)
        self._slaves[slave] = writer
        self.has_slaves = True
        log.info("slave connected", slave=peer)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        sender = asyncio.create_task(self._send_loop(slave, writer))
        self._tasks.add(sender)
        try:
            await self._read_loop(slave, reader)
        except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
            log.info("slave disconnected", slave=peer, reason=str(exc) or type(exc).__name__)
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
            self._tasks.discard(sender)
            del self._slaves[slave]
            self.has_slaves = bool(self._slaves)
            if not self.has_slaves:
                self._release_all()  # nobody left to acknowledge them
            writer.close()
            self._tasks.discard(task)

    async def _read_loop(self, slave: _Slave, reader: asyncio.StreamReader) -> None:
        while True:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation
            # that arrives as the read completes, and the broker would not stop.
            async with asyncio.timeout(self._housekeeping_s):
                data = await reader.readexactly(REPORT_SIZE)
            (offset,) = REPORT.unpack(data)
            if slave.request_offset < 0:
                slave.request_offset = offset
                slave.reported.set()
                log.info("slave reported", slave=slave.peer, offset=offset)
            if offset > self._store.commitlog.max_offset():
                # A slave past our end has bytes we never wrote (4.9.x closes too).
                log.error(
                    "slave is ahead of the master: its commitlog diverged",
                    slave=slave.peer,
                    slave_offset=offset,
                    master_offset=self._store.commitlog.max_offset(),
                )
                continue  # the writer tells the slave our end and hangs up
            self._on_ack(slave, offset)

    async def _send_loop(self, slave: _Slave, writer: asyncio.StreamWriter) -> None:
        await slave.reported.wait()
        store = self._store
        commitlog = store.commitlog
        loop = asyncio.get_running_loop()
        start = slave.request_offset
        if start == 0:
            start = store.commitlog_min_offset()  # beyond RocketMQ: all that is retained
        nxt = start
        last_write = loop.time()
        while True:
            end = commitlog.max_offset()
            if nxt > end:
                # Tell the slave where we end, then hang up.
                writer.write(HEADER.pack(end, 0))
                await writer.drain()
                writer.close()
                return
            chunk: bytes | None = b""
            if nxt < end:
                if end - nxt > _COLD_BYTES:
                    chunk = await asyncio.to_thread(read_replica, store, nxt, self._batch)
                else:
                    chunk = read_replica(store, nxt, self._batch)
                if chunk is None:
                    log.error(
                        "slave asks for commitlog bytes the master no longer has",
                        slave=slave.peer,
                        offset=nxt,
                        master_min_offset=store.commitlog_min_offset(),
                    )
                    writer.close()
                    return
            if chunk:
                writer.write(HEADER.pack(nxt, len(chunk)) + chunk)
                await writer.drain()
                nxt += len(chunk)
                last_write = loop.time()
                continue
            if loop.time() - last_write >= self._heartbeat_s:
                writer.write(HEADER.pack(nxt, 0))
                await writer.drain()
                last_write = loop.time()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_POLL_S):
                    await self._data.wait()
