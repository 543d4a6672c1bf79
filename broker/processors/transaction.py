"""Processor family ``transaction`` (being written)."""

from __future__ import annotations

from broker.context import BrokerContext
from broker.remoting import ProcessorRegistry

__all__ = ["register"]


def register(registry: ProcessorRegistry, ctx: BrokerContext) -> None:
    """Register this family's request codes (none yet)."""
