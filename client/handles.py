"""What producers and consumers give their client instance.

The client instance keeps one :class:`ProducerHandle` per producer group and one
:class:`ConsumerHandle` per consumer group: heartbeats describe the groups through
them, and requests a broker sends (:mod:`rocklet.client.dispatch`) are answered by
them. Protocols, so the instance never imports the producer or consumer classes.
"""

from __future__ import annotations

from typing import Protocol

from rocklet.client.message import MessageExt
from rocklet.protocol.bodies.heartbeat import ConsumerData
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.running import ConsumerRunningInfo
from rocklet.protocol.headers.transaction import CheckTransactionStateRequestHeader

__all__ = ["ConsumerHandle", "ProducerHandle"]


class ConsumerHandle(Protocol):
    """What a consumer gives the instance (implemented by the consumers)."""

    def consumer_data(self) -> ConsumerData:
        """The group, model and subscriptions, for heartbeats."""
        ...

    def rebalance_soon(self) -> None:
        """Rebalance now: the broker said the group's members changed (code 40)."""
        ...

    async def running_info(self) -> ConsumerRunningInfo:
        """A snapshot for GET_CONSUMER_RUNNING_INFO (307)."""
        ...

    async def reset_offset(self, offsets: dict[MessageQueue, int]) -> None:
        """Jump to these offsets (RESET_CONSUMER_CLIENT_OFFSET, 220)."""
        ...

    def consume_offsets(self, topic: str) -> dict[MessageQueue, int]:
        """In-memory offsets of ``topic``'s queues (GET_CONSUMER_STATUS_FROM_CLIENT, 221).

        Every topic's when ``topic`` is blank, as Java's ``cloneOffsetTable``.
        """
        ...


class ProducerHandle(Protocol):
    """What a producer gives the instance (transaction producers answer check-backs)."""

    async def check_transaction_state(
        self, msg: MessageExt, header: CheckTransactionStateRequestHeader, broker_addr: str
    ) -> None:
        """Answer a CHECK_TRANSACTION_STATE (39) for ``msg`` with END_TRANSACTION."""
        ...
