"""What a put on a client's behalf waits for before it is answered.

RocketMQ's ``CommitLog`` waits, for every put whose message has ``WAIT`` (``waitStoreMsgOK``,
true unless the producer cleared it), for the disk under SYNC_FLUSH and then for a
slave under SYNC_MASTER; a message with ``WAIT=false`` is answered as soon as it is
stored. Sends, send-backs, END_TRANSACTION's committed copies and stored replies all
go through :meth:`PutWait.settle`, so the rule lives in one place. A broker without a
slave pays one attribute check per put.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocklet.broker.flush_wait import wait_flushed
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.properties import Prop
from rocklet.store.results import PutResult

if TYPE_CHECKING:
    from rocklet.broker.ha.master import HAMaster

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


class PutWait:
    """Waits for the disk (SYNC_FLUSH) and a slave (SYNC_MASTER) after a put.

    Args:
        sync_flush_timeout_ms: ``syncFlushTimeout``: the longest wait for the disk.
        replicas: The master's HA service, or ``None`` (a slave, or no replication).
        sync_master: ``brokerRole=SYNC_MASTER``.
        slave_timeout_ms: ``slaveTimeout``: the longest wait for a slave.
    """

    def __init__(
        self,
        *,
        sync_flush_timeout_ms: int,
        replicas: HAMaster | None = None,
        sync_master: bool = False,
        slave_timeout_ms: int = 3000,
    ) -> None:
        self._flush_timeout_s = sync_flush_timeout_ms / 1000
        self._replicas = replicas
        self._sync_master = sync_master and replicas is not None
        self._slave_timeout_s = slave_timeout_ms / 1000

    async def settle(
        self, result: PutResult, *, wait: bool = True
    ) -> tuple[ResponseCode, str | None]:
        """Wake the HA writers, then wait as the mode and ``wait`` say.

        Args:
            result: A successful put.
            wait: The message's ``WAIT`` property (:func:`waits_for_store`).

        Returns:
            SUCCESS, or FLUSH_DISK_TIMEOUT with why, or SLAVE_NOT_AVAILABLE (no slave, or
            the best one too far behind: not waited for) or FLUSH_SLAVE_TIMEOUT (no
            acknowledgement within ``slaveTimeout``). In every case the message is
            stored on this broker.
        """
        replicas = self._replicas
        if replicas is not None and replicas.has_slaves:
            replicas.notify()  # the writers would otherwise wake only on their 100 ms tick
        if not wait:
            return ResponseCode.SUCCESS, None
        if result.durable is not None:
            remark = await wait_flushed(result, self._flush_timeout_s)
            if remark is not None:
                return ResponseCode.FLUSH_DISK_TIMEOUT, remark
        if not self._sync_master:
            return ResponseCode.SUCCESS, None
        assert replicas is not None
        end = result.wrote_offset + result.wrote_bytes
        # CommitLog.submitReplicaRequest: stored either way; the code says how far.
        if not replicas.slave_ok(end):
            return ResponseCode.SLAVE_NOT_AVAILABLE, None
        if await replicas.wait_replicated(end, self._slave_timeout_s):
            return ResponseCode.SUCCESS, None
        return ResponseCode.FLUSH_SLAVE_TIMEOUT, None
