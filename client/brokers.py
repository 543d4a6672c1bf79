"""The narrow view of a client instance that consumer parts talk to brokers through.

Offset stores, pull loops, send-backs and rebalancing need two things from
:class:`~rocklet.client.instance.ClientInstance`: send a request, and find a broker
group's master (or, with the master gone, a slave) in the cached routes. They depend
on these Protocols instead of the instance, so each can be built and read on its own.
"""

from __future__ import annotations

from typing import Protocol

from rocklet.protocol.command import RemotingCommand

__all__ = ["BrokerInvoker", "MasterLookup", "PullBrokers", "SubscribeLookup"]


class MasterLookup(Protocol):
    """Finds a broker group's master (:class:`~rocklet.client.routes.RouteCache`)."""

    def master_addr(self, broker_name: str) -> str | None:
        """The master address of ``broker_name`` from the cached routes, if known."""
        ...

    def admin_addr(self, broker_name: str) -> str | None:
        """The master of ``broker_name``, else its lowest-id slave, if known."""
        ...


class BrokerInvoker(Protocol):
    """Sends requests to brokers found in the cached routes (the client instance)."""

    @property
    def routes(self) -> MasterLookup:
        """The cached routes."""
        ...

    async def invoke(
        self, addr: str, cmd: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Send a request to ``addr`` and return the answer."""
        ...


class SubscribeLookup(MasterLookup, Protocol):
    """Also picks the broker a queue is pulled from, and refreshes routes on demand."""

    def subscribe_addr(
        self, broker_name: str, broker_id: int, avoid: str | None = None
    ) -> tuple[str, int] | None:
        """Where to pull from: ``broker_id``'s address, else the lowest id's."""
        ...

    async def topic_route(self, topic: str, *, refresh: bool = False) -> object:
        """Fetch a topic's route (``refresh``: ask the name server now)."""
        ...


class PullBrokers(Protocol):
    """Sends pulls to the broker the cached routes pick (the client instance)."""

    @property
    def routes(self) -> SubscribeLookup:
        """The cached routes."""
        ...

    async def invoke(
        self, addr: str, cmd: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Send a request to ``addr`` and return the answer."""
        ...
