"""The lifecycle every consumer goes through (push, pull and lite pull alike)."""

from __future__ import annotations

import enum

__all__ = ["ConsumerStatus"]


class ConsumerStatus(enum.Enum):
    """Lifecycle of a consumer: created, running, closing (shutting down), closed."""

    CREATED = "created"
    RUNNING = "running"
    CLOSING = "closing"
    CLOSED = "closed"
