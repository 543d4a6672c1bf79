"""What a put on a client's behalf waits for before it is answered.

RocketMQ's ``CommitLog`` waits, for every put whose message has ``WAIT`` (``waitStoreMsgOK``,
true unless the producer cleared it), for the disk under SYNC_FLUSH and then for a
slave under SYNC_MASTER; a message with ``WAIT=false`` is answered as soon as it is
stored. Sends, send-backs, END_TRANSACTION's committed copies and stored replies all
go through :class:`PutWait` (sends by callback, :meth:`PutWait.begin`; the others
awaited, :meth:`PutWait.settle`), so the rule lives in one place. A broker without a
slave pays one attribute check per put.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, TypeAlias

from rocklet.broker.flush_wait import FlushWaits
from rocklet.broker.offset_waits import Done
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.properties import Prop
from rocklet.store.results import PutResult

if TYPE_CHECKING:
    from rocklet.broker.ha.master import HAMaster
    from rocklet.store._flush import FlushService

__all__ = ["PutWait", "waits_for_store"]

_WAIT_KEY = Prop.WAIT + "\x01"


def waits_for_store(raw: str | None) -> bool:
    """Whether a message's encoded properties ask to wait (``Message.isWaitStoreMsgOK``).

    Java's ``Boolean.parseBoolean``: absent or ``true`` (any case) waits, anything else
    does not. Scans the encoded string instead of decoding it: this runs on every send.

    Args:
        raw: The request header's ``properties`` (name, 0x01, value, 0x02, ...).
    """
    if not raw:
        return True
    start = 0
    while True:
        at = raw.find(_WAIT_KEY, start)
        if at < 0:
            return True
        if at == 0 or raw[at - 1] == "\x02":  # a key, not the tail of another's value
            begin = at + len(_WAIT_KEY)
            end = raw.find("\x02", begin)
            value = raw[begin:] if end < 0 else raw[begin:end]
            return value.lower() == "true"
        start = at + 1


#: A put's answer: the code and the remark.
Outcome: TypeAlias = tuple[ResponseCode, str | None]
#: Receives the outcome of a put that had to wait.
Answer: TypeAlias = Callable[[ResponseCode, str | None], None]

_SUCCESS: Final[Outcome] = (ResponseCode.SUCCESS, None)
_SLAVE_NOT_AVAILABLE: Final[Outcome] = (ResponseCode.SLAVE_NOT_AVAILABLE, None)


class PutWait:
    """Waits for the disk (SYNC_FLUSH) and a slave (SYNC_MASTER) after a put.

    :meth:`begin` answers through a callback, without a task, a future or a timer per
    put (the waits are FIFOs, :mod:`rocklet.broker.offset_waits`); :meth:`settle` is
    the same awaited, for processors that rarely wait.

    Args:
        sync_flush_timeout_ms: ``syncFlushTimeout``: the longest wait for the disk.
        replicas: The master's HA service, or ``None`` (a slave, or no replication).
        sync_master: ``brokerRole=SYNC_MASTER``.
        slave_timeout_ms: ``slaveTimeout``: the longest wait for a slave.
        flush_service: The store's flush service (SYNC_FLUSH waits listen to it).
    """

    def __init__(
        self,
        *,
        sync_flush_timeout_ms: int,
        replicas: HAMaster | None = None,
        sync_master: bool = False,
        slave_timeout_ms: int = 3000,
        flush_service: FlushService,
    ) -> None:
        self._flush_timeout_s = sync_flush_timeout_ms / 1000
        self._replicas = replicas
        self._sync_master = sync_master and replicas is not None
        self._slave_timeout_s = slave_timeout_ms / 1000
        self._flush_service = flush_service
        self._flush_waits: FlushWaits | None = None

    def begin(self, result: PutResult, wait: bool, answer: Answer) -> Outcome | None:
        """Wake the HA writers, then wait as the mode and ``wait`` say, by callback.

        Args:
            result: A successful put.
            wait: The message's ``WAIT`` property (:func:`waits_for_store`).
            answer: Called once with the outcome when it is not known at once.

        Returns:
            The outcome when known now (``answer`` is then never called), else ``None``.
            Outcomes: SUCCESS, or FLUSH_DISK_TIMEOUT with why, or SLAVE_NOT_AVAILABLE
            (no slave, or the best one too far behind: not waited for) or
            FLUSH_SLAVE_TIMEOUT (no acknowledgement within ``slaveTimeout``). In every
            case the message is stored on this broker.
        """
        replicas = self._replicas
        if replicas is not None and replicas.has_slaves:
            replicas.notify()  # the writers would otherwise wake only on their 100 ms tick
        if not wait:
            return _SUCCESS
        if result.durable is not None:
            flushed = self._flushes().on_flushed(result, _after_flush(self, result, answer))
            if isinstance(flushed, str):
                return ResponseCode.FLUSH_DISK_TIMEOUT, flushed
            if flushed is not None:  # LATER: the callback continues
                return None
        return self._replicated(result, answer)

    async def settle(self, result: PutResult, *, wait: bool = True) -> Outcome:
        """:meth:`begin`, awaited.

        Args:
            result: A successful put.
            wait: The message's ``WAIT`` property (:func:`waits_for_store`).

        Returns:
            The outcome, as :meth:`begin` gives it.
        """
        fut: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()

        def answer(code: ResponseCode, remark: str | None) -> None:
            if not fut.done():
                fut.set_result((code, remark))

        outcome = self.begin(result, wait, answer)
        if outcome is not None:
            return outcome
        return await fut

    def _replicated(self, result: PutResult, answer: Answer) -> Outcome | None:
        """The SYNC_MASTER stage (after the disk's, when there is one)."""
        if not self._sync_master:
            return _SUCCESS
        replicas = self._replicas
        assert replicas is not None
        end = result.wrote_offset + result.wrote_bytes
        # CommitLog.submitReplicaRequest: stored either way; the code says how far.
        if not replicas.slave_ok(end):
            return _SLAVE_NOT_AVAILABLE
        if replicas.on_replicated(end, self._slave_timeout_s, _after_replica(answer)):
            return _SUCCESS
        return None

    def _flushes(self) -> FlushWaits:
        # Made on first use: it needs the running loop, which construction may precede.
        if self._flush_waits is None:
            self._flush_waits = FlushWaits(
                self._flush_service, self._flush_timeout_s, asyncio.get_running_loop()
            )
        return self._flush_waits


def _after_flush(put_wait: PutWait, result: PutResult, answer: Answer) -> Done:
    def flushed(why: str | None) -> None:
        if why is not None:
            answer(ResponseCode.FLUSH_DISK_TIMEOUT, why)
            return
        outcome = put_wait._replicated(result, answer)
        if outcome is not None:
            answer(*outcome)

    return flushed


def _after_replica(answer: Answer) -> Done:
    def replicated(why: str | None) -> None:
        if why is None:
            answer(ResponseCode.SUCCESS, None)
        else:
            answer(ResponseCode.FLUSH_SLAVE_TIMEOUT, None)

    return replicated
