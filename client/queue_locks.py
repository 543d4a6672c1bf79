"""Broker locks on an orderly consumer's queues (LOCK_BATCH_MQ, UNLOCK_BATCH_MQ).

An orderly (not broadcasting) consumer consumes a queue only while it holds that
queue's lock on the broker, so two members never consume one queue at once, even
while a rebalance moves it (RocketMQ's ``RebalanceImpl.lock`` / ``lockAll`` /
``unlock``). A lock is renewed every 20 s; the broker lets it expire after 60 s, the
client counts it lost after 30 s (:data:`~rocklet.client.process_queue.LOCK_MAX_LIVE_MS`).
Each outcome is recorded on the queue's ProcessQueue. Failures are logged and count
as "not locked": the next renewal or consume attempt tries again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from rocklet.client.brokers import BrokerInvoker
from rocklet.client.errors import TransportError
from rocklet.client.message import MessageExt
from rocklet.client.process_queue import ProcessQueue
from rocklet.protocol.bodies.consumer import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.logs import get_logger

__all__ = ["LockInstance", "QueueLocks"]

_log = get_logger(__name__)


class LockInstance(BrokerInvoker, Protocol):
    """What locking needs from the client instance: requests, routes and its id."""

    @property
    def client_id(self) -> str:
        """The lock owner's id."""
        ...


class QueueLocks:
    """Locks the queues of one consumer group on their brokers.

    Args:
        group: The consumer group.
        instance: Sends the requests.
        process_queues: The owned queues (read live): outcomes are recorded there.
    """

    def __init__(
        self,
        group: str,
        instance: LockInstance,
        process_queues: Mapping[MessageQueue, ProcessQueue[MessageExt]],
    ) -> None:
        self._group = group
        self._instance = instance
        self._process_queues = process_queues

    async def lock(self, mq: MessageQueue) -> bool:
        """Lock one queue on its broker (LOCK_BATCH_MQ).

        Args:
            mq: The queue.

        Returns:
            Whether this client holds the lock now (also recorded on its ProcessQueue).
        """
        locked = await self._lock_batch(mq.broker_name, [mq])
        ok = mq in locked
        pq = self._process_queues.get(mq)
        if pq is not None:
            pq.set_locked(ok)
        return ok

    async def lock_all(self) -> None:
        """Renew the locks of every owned queue, one request per broker (every 20 s)."""
        for broker_name, mqs in _by_broker(self._process_queues).items():
            locked = await self._lock_batch(broker_name, mqs)
            for mq in mqs:
                pq = self._process_queues.get(mq)
                if pq is not None:
                    pq.set_locked(mq in locked)

    async def _lock_batch(self, broker_name: str, mqs: Sequence[MessageQueue]) -> set[MessageQueue]:
        addr = self._instance.routes.master_addr(broker_name)
        if addr is None:
            return set()
        body = LockBatchRequestBody(self._group, self._instance.client_id, tuple(mqs))
        cmd = RemotingCommand(RequestCode.LOCK_BATCH_MQ, body=body.to_json())
        try:
            answer = await self._instance.invoke(addr, cmd)
        except TransportError as exc:
            _log.warning("lock request failed", group=self._group, broker=addr, error=str(exc))
            return set()
        if answer.code != ResponseCode.SUCCESS:
            _log.warning("lock refused", group=self._group, broker=addr, code=answer.code)
            return set()
        return set(LockBatchResponseBody.from_json(answer.body).lock_ok_mq_set)

    async def unlock(self, mqs: Iterable[MessageQueue]) -> None:
        """Release broker locks (UNLOCK_BATCH_MQ), one request per broker; failures logged.

        Args:
            mqs: The queues.
        """
        for broker_name, group in _by_broker(mqs).items():
            addr = self._instance.routes.master_addr(broker_name)
            if addr is None:
                continue
            body = UnlockBatchRequestBody(self._group, self._instance.client_id, tuple(group))
            cmd = RemotingCommand(RequestCode.UNLOCK_BATCH_MQ, body=body.to_json())
            try:
                answer = await self._instance.invoke(addr, cmd)
            except TransportError as exc:
                _log.warning("unlock failed", group=self._group, broker=addr, error=str(exc))
                continue
            if answer.code != ResponseCode.SUCCESS:
                _log.warning("unlock refused", group=self._group, broker=addr, code=answer.code)


def _by_broker(mqs: Iterable[MessageQueue]) -> dict[str, list[MessageQueue]]:
    out: dict[str, list[MessageQueue]] = defaultdict(list)
    for mq in sorted(mqs):
        out[mq.broker_name].append(mq)
    return out
