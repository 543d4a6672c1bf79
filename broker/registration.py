"""The broker's registration with its name servers (REGISTER_BROKER / UNREGISTER_BROKER).

RocketMQ's ``BrokerOuterAPI.registerBrokerAll``: at start, every
``registerNameServerPeriod`` (30 s) and whenever the topic table changes, the broker
sends its whole topic table to every name server. A name server that does not answer
is retried on the next round; its connection is reopened then.
"""

from __future__ import annotations

import asyncio
import ssl
import sys
from collections.abc import Callable

import structlog

from rocklet.protocol.acl import Credentials, sign
from rocklet.protocol.bodies.register import RegisterBrokerBody
from rocklet.protocol.bodies.topic import TopicConfigSerializeWrapper
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.namesrv import (
    RegisterBrokerRequestHeader,
    UnregisterBrokerRequestHeader,
)
from rocklet.protocol.message import body_crc
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from rocklet.transport.errors import RemotingError

__all__ = ["NamesrvRegistrar", "RegistrationTracker", "parse_namesrv_addrs"]

log = structlog.get_logger(__name__)


def parse_namesrv_addrs(text: str | None) -> list[tuple[str, int]]:
    """Split ``namesrvAddr`` (``host:port;host:port``) into addresses."""
    out = []
    for item in (text or "").replace(",", ";").split(";"):
        host, _, port = item.strip().rpartition(":")
        if host and port.isdigit():
            out.append((host, int(port)))
    return out


class NamesrvRegistrar:
    """Registers one broker with every name server. Event loop only.

    Args:
        addrs: Name server addresses.
        identity: The header fields naming this broker (cluster, name, id, address).
        topics: Returns the current topic table.
        timeout_s: Per-request timeout (``registerBrokerTimeoutMills``).
        compressed: Send the compressed body form (``compressedRegister``).
        tls: Connect to the name servers over TLS with this context (RocketMQ's
            ``tls.enable`` for the broker); ``None``: plain TCP.
        credentials: Sign every request with this account (Rocklet: a name server
            with ACL on refuses unsigned registrations); ``None``: unsigned, as
            RocketMQ 4.9 brokers send them.
        on_master: Called with the ``haServerAddr`` and ``masterAddr`` of each
            accepted registration's answer (a slave learns its master there).
    """

    def __init__(
        self,
        addrs: list[tuple[str, int]],
        identity: RegisterBrokerRequestHeader,
        topics: Callable[[], TopicConfigSerializeWrapper],
        *,
        timeout_s: float = 6.0,
        compressed: bool = False,
        tls: ssl.SSLContext | None = None,
        credentials: Credentials | None = None,
        on_master: Callable[[str | None, str | None], None] | None = None,
    ) -> None:
        self._on_master = on_master
        self._credentials = credentials
        self._addrs = addrs
        self._tls = tls
        self._identity = identity
        self._topics = topics
        self._timeout_s = timeout_s
        self._compressed = compressed
        self._connections: dict[tuple[str, int], Connection] = {}
        self.registrations = 0

    async def register_all(self) -> int:
        """Register with every name server concurrently.

        Returns:
            How many name servers accepted the registration.
        """
        body = RegisterBrokerBody(self._topics())
        data = body.encode_compressed() if self._compressed else body.to_json()
        header = RegisterBrokerRequestHeader(
            broker_name=self._identity.broker_name,
            broker_addr=self._identity.broker_addr,
            cluster_name=self._identity.cluster_name,
            ha_server_addr=self._identity.ha_server_addr,
            broker_id=self._identity.broker_id,
            compressed=self._compressed,
            body_crc32=body_crc(data),
        )
        cmd = RemotingCommand(
            RequestCode.REGISTER_BROKER, ext_fields=header.to_ext_fields(), body=data
        )
        results = await asyncio.gather(*(self._send(a, cmd) for a in self._addrs))
        accepted = sum(results)
        self.registrations += accepted
        return accepted

    async def unregister_all(self) -> None:
        """Tell every name server this broker is leaving (best effort)."""
        header = UnregisterBrokerRequestHeader(
            broker_name=self._identity.broker_name,
            broker_addr=self._identity.broker_addr,
            cluster_name=self._identity.cluster_name,
            broker_id=self._identity.broker_id,
        )
        cmd = RemotingCommand(RequestCode.UNREGISTER_BROKER, ext_fields=header.to_ext_fields())
        await asyncio.gather(*(self._send(a, cmd) for a in self._addrs))

    async def close(self) -> None:
        """Close the name server connections. Idempotent."""
        conns, self._connections = list(self._connections.values()), {}
        for conn in conns:
            await conn.close()

    async def _send(self, addr: tuple[str, int], cmd: RemotingCommand) -> bool:
        try:
            conn = self._connections.get(addr)
            if conn is None or not conn.is_open:
                conn = await open_connection(
                    *addr, connect_timeout_s=self._timeout_s, tls=self._tls
                )
                self._connections[addr] = conn
            signed = cmd if self._credentials is None else sign(cmd, self._credentials)
            response = await conn.request(signed, self._timeout_s)
        except (RemotingError, OSError) as exc:
            log.warning("name server unreachable", namesrv=f"{addr[0]}:{addr[1]}", error=str(exc))
            return False
        if response.code != ResponseCode.SUCCESS:
            log.warning(
                "name server refused the broker",
                namesrv=f"{addr[0]}:{addr[1]}",
                code=response.code,
                remark=response.remark,
            )
            return False
        if self._on_master is not None and cmd.code == RequestCode.REGISTER_BROKER:
            fields = response.ext_fields
            self._on_master(fields.get("haServerAddr"), fields.get("masterAddr"))
        return True


class RegistrationTracker:
    """Which version of the topic table the name servers have been sent.

    RocketMQ registers a changed topic table *before* it answers the request that changed
    it (``AdminBrokerProcessor.updateAndCreateTopic``), so a client that creates a topic
    and then asks a name server for its route finds it. Processors wait here for the
    registration round carrying their change. Event loop only.
    """

    def __init__(self) -> None:
        self._registered = -1
        self._changed = asyncio.Condition()

    @classmethod
    def done(cls) -> RegistrationTracker:
        """A tracker for a broker without name servers: every version counts as sent."""
        tracker = cls()
        tracker._registered = sys.maxsize
        return tracker

    @property
    def registered(self) -> int:
        """The highest topic-table version (data version counter) registered so far."""
        return self._registered

    async def mark(self, counter: int) -> None:
        """Record that a registration round carrying version ``counter`` has finished."""
        async with self._changed:
            self._registered = max(self._registered, counter)
            self._changed.notify_all()

    async def wait_for(self, counter: int, timeout_s: float) -> bool:
        """Wait until version ``counter`` has been registered.

        Returns:
            Whether it was, within ``timeout_s``.
        """
        try:
            async with asyncio.timeout(timeout_s), self._changed:
                await self._changed.wait_for(lambda: self._registered >= counter)
        except TimeoutError:
            return False
        return True

    async def wait_next(self) -> None:
        """Wait for the next registration round to finish (tests and tooling)."""
        async with self._changed:
            seen = self._registered
            await self._changed.wait_for(lambda: self._registered > seen)
