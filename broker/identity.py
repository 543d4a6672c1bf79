"""Who this broker is and what it may serve: facts fixed once it listens.

Only the permission changes afterwards (UPDATE_BROKER_CONFIG ``brokerPermission``).

Nearly every processor needs a few of these (the broker's name in remarks, whether it
takes writes, the host field of stored records), so they travel together as one small
bundle instead of each processor reaching into the whole configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocklet.broker.config import BrokerConfig, BrokerRole
from rocklet.protocol.bodies.route import Perm

__all__ = ["BrokerIdentity"]

_READ = int(Perm.READ)
_WRITE = int(Perm.WRITE)


@dataclass(slots=True, eq=False)
class BrokerIdentity:
    """The running broker's name, address and permissions.

    Attributes:
        cluster_name: ``brokerClusterName``.
        broker_name: ``brokerName``.
        addr: ``ip:port`` clients reach this broker at (advertised).
        store_host: ``addr`` packed as a stored record's 8-byte host field.
        is_master: Whether this broker is a master (a slave takes no writes).
        permission: ``brokerPermission`` (PermName bits); changed in place, on the event
            loop, by UPDATE_BROKER_CONFIG.
    """

    cluster_name: str
    broker_name: str
    addr: str
    store_host: bytes
    is_master: bool
    permission: int

    @classmethod
    def of(cls, config: BrokerConfig, addr: str, store_host: bytes) -> BrokerIdentity:
        """Take the identity from the configuration and the bound address.

        Args:
            config: Broker settings.
            addr: The advertised ``ip:port``.
            store_host: ``addr`` packed as a record's host field.

        Returns:
            The identity.
        """
        return cls(
            cluster_name=config.broker_cluster_name,
            broker_name=config.broker_name,
            addr=addr,
            store_host=store_host,
            is_master=config.broker_role is not BrokerRole.SLAVE,
            permission=config.broker_permission,
        )

    @property
    def writable(self) -> bool:
        """Whether sends are accepted: a master whose permission has WRITE."""
        return self.is_master and bool(self.permission & _WRITE)

    @property
    def readable(self) -> bool:
        """Whether pulls are served: the permission has READ."""
        return bool(self.permission & _READ)
