"""How far replication is behind, as a master and as a slave see it.

RocketMQ 4.9.4 reports nothing about HA in GET_BROKER_RUNTIME_INFO: its only measure is
``slaveFallBehindMuch`` (the master's max offset minus the best slave's ack), written to
the broker log once a minute as "Slave fall behind master: N bytes". Rocklet puts the
same figure, per slave and in seconds too, in brokerStatus (keys below), in
``rocklet admin clusterList`` and in Prometheus metrics (docs/replication.md,
"Watching replication").

Lag in seconds comes from store timestamps: on the master, the age of the oldest
message a slave has not wholly acknowledged; 0 when the slave has everything.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MasterLag", "SlaveLag", "SlaveView"]


def _seconds(value: float) -> str:
    return f"{value:.3f}"


@dataclass(frozen=True, slots=True)
class SlaveLag:
    """One connected slave, as the master sees it.

    Attributes:
        addr: The slave's end of the HA connection (``host:port``).
        ack_offset: The offset it last reported (-1 before its first report).
        lag_bytes: The master's max commitlog offset minus ``ack_offset``.
        lag_seconds: Age of the oldest message it has not acknowledged (0 if none).
    """

    addr: str
    ack_offset: int
    lag_bytes: int
    lag_seconds: float


@dataclass(frozen=True, slots=True)
class MasterLag:
    """A master's replication state.

    Attributes:
        port: The HA port it listens on.
        max_offset: Its max commitlog offset.
        acked_offset: The highest offset any slave acknowledged (RocketMQ's
            ``push2SlaveMaxOffset``, what SYNC_MASTER waits on).
        slaves: The connected slaves, in the order they connected.
    """

    port: int
    max_offset: int
    acked_offset: int
    slaves: tuple[SlaveLag, ...]

    def keys(self) -> dict[str, str]:
        """The brokerStatus keys (Rocklet's own; RocketMQ 4.9.4 has none for HA)."""
        keys = {
            "haListenPort": str(self.port),
            "haConnectedSlaves": str(len(self.slaves)),
            "haSlaveAckOffset": str(self.acked_offset),
            # RocketMQ's slaveFallBehindMuch: behind the best slave (0 without one).
            "haSlaveFallBehind": str(max(0, self.max_offset - self.acked_offset)),
            "haMaxLagBytes": str(max((s.lag_bytes for s in self.slaves), default=0)),
            "haMaxLagSeconds": _seconds(max((s.lag_seconds for s in self.slaves), default=0)),
        }
        for i, slave in enumerate(self.slaves):
            keys[f"haSlave{i}Addr"] = slave.addr
            keys[f"haSlave{i}AckOffset"] = str(slave.ack_offset)
            keys[f"haSlave{i}LagBytes"] = str(slave.lag_bytes)
            keys[f"haSlave{i}LagSeconds"] = _seconds(slave.lag_seconds)
        return keys


@dataclass(frozen=True, slots=True)
class SlaveView:
    """A slave's own replication state, as of the last frame from its master.

    Attributes:
        master_addr: The master's HA address (empty until known).
        connected: Whether the HA connection is up.
        diverged: Why replication stopped for good, or ``None``.
        offset: The slave's max commitlog offset.
        master_offset: The highest master offset the slave has seen (the end of the
            last chunk, or a heartbeat's offset); -1 before the first frame.
        lag_bytes: ``master_offset - offset`` (0 before the first frame).
        lag_seconds: 0 when connected and caught up with what it has seen; otherwise
            the age of its newest message (everything it lacks was stored later).
    """

    master_addr: str
    connected: bool
    diverged: str | None
    offset: int
    master_offset: int
    lag_bytes: int
    lag_seconds: float

    def keys(self) -> dict[str, str]:
        """The brokerStatus keys (Rocklet's own)."""
        return {
            "haMasterAddress": self.master_addr,
            "haConnected": str(self.connected).lower(),
            "haDiverged": self.diverged or "false",
            "haOffset": str(self.offset),
            "haMasterOffset": str(self.master_offset),
            "haLagBytes": str(self.lag_bytes),
            "haLagSeconds": _seconds(self.lag_seconds),
        }
