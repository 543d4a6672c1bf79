"""Replication lag as Prometheus gauges (imported only when ``metricsPort`` is set).

A master exports one series per connected slave, labelled by the slave's end of the HA
connection (it changes when the slave reconnects; RocketMQ's HA wire carries no broker
id); a slave exports its own view. The figures are those of brokerStatus's ``ha*`` keys
(docs/replication.md, "Watching replication").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from rocklet.broker.ha.lag import MasterLag, SlaveView

__all__ = ["ReplicationCollector"]


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(name, documentation)
    gauge.add_metric([], value)
    return gauge


class ReplicationCollector:
    """Gauges read from the broker's HA side when Prometheus scrapes.

    Args:
        lag: Returns the current state (:meth:`rocklet.broker.ha.service.Replication.lag`).
    """

    def __init__(self, lag: Callable[[], MasterLag | SlaveView]) -> None:
        self._lag = lag

    def collect(self) -> Iterable[Metric]:
        """Build the gauges from the current state."""
        state = self._lag()
        if isinstance(state, MasterLag):
            yield from _master(state)
        else:
            yield from _slave(state)


def _master(state: MasterLag) -> Iterable[Metric]:
    yield _gauge(
        "rocklet_ha_connected_slaves",
        "Slaves connected to this master's HA port.",
        len(state.slaves),
    )
    yield _gauge(
        "rocklet_ha_slave_fall_behind_bytes",
        "Max commitlog offset minus the best slave's acknowledged offset "
        "(RocketMQ's slaveFallBehindMuch).",
        max(0, state.max_offset - state.acked_offset),
    )
    families = {
        "ack": GaugeMetricFamily(
            "rocklet_ha_slave_ack_offset_bytes",
            "The commitlog offset the slave last acknowledged.",
            labels=["slave"],
        ),
        "bytes": GaugeMetricFamily(
            "rocklet_ha_slave_lag_bytes",
            "The master's max commitlog offset minus the slave's acknowledged offset.",
            labels=["slave"],
        ),
        "seconds": GaugeMetricFamily(
            "rocklet_ha_slave_lag_seconds",
            "Age (store time) of the oldest message the slave has not acknowledged; "
            "0 when it has everything.",
            labels=["slave"],
        ),
    }
    for slave in state.slaves:
        families["ack"].add_metric([slave.addr], slave.ack_offset)
        families["bytes"].add_metric([slave.addr], slave.lag_bytes)
        families["seconds"].add_metric([slave.addr], slave.lag_seconds)
    yield from families.values()


def _slave(state: SlaveView) -> Iterable[Metric]:
    yield _gauge(
        "rocklet_ha_connected", "1 while this slave is connected to its master.", state.connected
    )
    yield _gauge(
        "rocklet_ha_diverged",
        "1 once replication stopped because the commitlogs differ.",
        state.diverged is not None,
    )
    yield _gauge(
        "rocklet_ha_master_offset_bytes",
        "The highest master commitlog offset the last frames showed.",
        state.master_offset,
    )
    yield _gauge(
        "rocklet_ha_lag_bytes",
        "The master's offset as last seen minus this slave's.",
        state.lag_bytes,
    )
    yield _gauge(
        "rocklet_ha_lag_seconds",
        "0 when connected and caught up; else the age of this slave's newest message.",
        state.lag_seconds,
    )
