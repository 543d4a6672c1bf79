"""Request processors, one module per request family.

Each module exposes ``register(registry, ctx)``, which builds its processor objects
from the narrow collaborators it needs and registers them by request code.
"""

from __future__ import annotations

from rocklet.broker.context import BrokerContext
from rocklet.broker.processors import (
    admin,
    client_manage,
    consumer_manage,
    pull,
    query,
    reply,
    send,
    sendback,
    transaction,
)
from rocklet.transport import ProcessorRegistry

__all__ = ["register_all"]

_FAMILIES = (send, pull, query, client_manage, consumer_manage, sendback, transaction, reply, admin)


def register_all(registry: ProcessorRegistry, ctx: BrokerContext) -> None:
    """Register every request family's processors."""
    for family in _FAMILIES:
        family.register(registry, ctx)
