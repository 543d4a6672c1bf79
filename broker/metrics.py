"""Where the broker's hot paths report puts, gets and requests.

The broker reports to a :class:`MetricsSink`. With metrics off (the default) it is
:data:`NULL_METRICS`, which drops every report, and the Prometheus client library is
never imported; with ``metricsPort`` set, :mod:`rocklet.broker.prometheus` (the
``metrics`` extra) provides the real sink and the HTTP endpoint.
"""

from __future__ import annotations

from typing import Final, Protocol

__all__ = ["NULL_METRICS", "MetricsSink", "NullMetrics"]


class MetricsSink(Protocol):
    """What the broker's hot paths report. Implementations must be thread-safe."""

    def on_put(self, topic: str, count: int, nbytes: int) -> None:
        """Messages were written to the store."""
        ...

    def on_get(
        self, group: str, topic: str, queue_id: int, count: int, nbytes: int, read_ms: int
    ) -> None:
        """A pull answered with messages, read from the store in ``read_ms`` whole ms."""
        ...

    def on_get_miss(self) -> None:
        """A pull answered without messages (not found, moved, or filtered out)."""
        ...

    def on_request(self, request_code: int, response_code: int | None, duration_s: float) -> None:
        """A request was processed (``response_code`` is ``None`` when nothing was sent)."""
        ...

    def on_topic_deleted(self, topic: str) -> None:
        """A topic was deleted: forget what was reported under it. Event loop only."""
        ...

    def on_group_deleted(self, group: str) -> None:
        """A consumer group was deleted: forget what was reported under it. Event loop only."""
        ...


class NullMetrics:
    """The sink used when metrics are off: every report is dropped."""

    def on_put(self, topic: str, count: int, nbytes: int) -> None:
        """Drop the report."""

    def on_get(
        self, group: str, topic: str, queue_id: int, count: int, nbytes: int, read_ms: int
    ) -> None:
        """Drop the report."""

    def on_get_miss(self) -> None:
        """Drop the report."""

    def on_request(self, request_code: int, response_code: int | None, duration_s: float) -> None:
        """Drop the report."""

    def on_topic_deleted(self, topic: str) -> None:
        """Nothing to forget."""

    def on_group_deleted(self, group: str) -> None:
        """Nothing to forget."""


#: The shared no-op sink (the default of :attr:`rocklet.broker.context.BrokerContext.metrics`).
NULL_METRICS: Final = NullMetrics()
