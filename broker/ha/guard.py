"""Who may follow a master: the address allow-list, TLS and the handshake.

RocketMQ 4.x sends the commitlog to whoever connects to the HA port and sends 8
bytes. A Rocklet master admits a connection in three steps, each closing it at once,
with a WARNING naming the peer, before a byte of commitlog is sent:

1. the peer's address must match ``haAllowedSlaves`` (:class:`AllowList`);
2. with ``tls.server.mode=enforcing`` the connection must complete a TLS handshake;
3. when authentication is required (``haAuthEnable``, default ``aclEnable``) the peer
   must complete the handshake of :mod:`rocklet.broker.ha.handshake` as an
   ``admin: true`` account of the broker's ACL files; the master then proves in turn
   that it holds the same account's secret key.

Steps 1 and 2 run on the raw socket (:mod:`rocklet.broker.ha.listener`), step 3 on
the streams (:meth:`HAGuard.admit`).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import secrets
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

import structlog

from rocklet.broker.ha.handshake import (
    ACCEPTED,
    MAC_SIZE,
    MAGIC,
    MAGIC_V1,
    MAX_KEY_BYTES,
    NONCE_SIZE,
    REFUSED,
    master_mac,
    slave_mac,
)
from rocklet.transport.log_limit import LimitedWarnings

if TYPE_CHECKING:
    from rocklet.transport.tls import ServerTls

__all__ = [
    "DEFAULT_ALLOWED",
    "NAME_FAILURE_TTL_S",
    "NAME_TTL_S",
    "AllowList",
    "AllowListError",
    "HAGuard",
    "RefusalLog",
    "Resolver",
    "SlaveAccount",
    "resolve_host",
]

log = structlog.get_logger(__name__)

_Net = ipaddress.IPv4Network | ipaddress.IPv6Network
_Addr = ipaddress.IPv4Address | ipaddress.IPv6Address
_LOOPBACK: Final = ("127.0.0.0/8", "::1/128")
_PRIVATE: Final = (
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "169.254.0.0/16",
    "fc00::/7",
    "fe80::/10",
)
#: ``haAllowedSlaves`` when unset: loopback and private networks, so unchanged
#: RocketMQ confs keep working on one host and in a compose network, while a master
#: with a public address does not serve the internet.
DEFAULT_ALLOWED: Final = "loopback,private"
#: Longest a connection may take to finish the handshake: more than RocketMQ's
#: slave waits before its first report (haSendHeartbeatInterval, 5 s), so a RocketMQ
#: slave is refused for what it sent, which says what it is.
_ADMIT_TIMEOUT_S: Final = 10.0
#: Longest a host name of the allow-list may take to resolve.
_RESOLVE_TIMEOUT_S: Final = 2.0
#: How long a resolved ``haAllowedSlaves`` name is used before it is looked up again:
#: a stranger connecting in a loop costs one lookup per name per 30 s, not one per
#: connection, and a slave whose container came back on a new address is refused for
#: at most this long (its retries then get in).
NAME_TTL_S: Final = 30.0
#: How long a failed lookup (no answer, timeout) is remembered: shorter, so a slave
#: whose name is not in DNS yet (its container still starting) is admitted soon after.
NAME_FAILURE_TTL_S: Final = 5.0

#: Resolves a host name to its addresses (text); raises OSError when it cannot.
Resolver = Callable[[str], Awaitable[Collection[str]]]


class AllowListError(ValueError):
    """An ``haAllowedSlaves`` entry that is not an address, network, name or keyword."""


def _ip(text: str) -> _Addr:
    ip = ipaddress.ip_address(text.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped  # a dual-stack socket's view of an IPv4 peer
    return ip


async def resolve_host(name: str) -> list[str]:
    """The addresses ``name`` resolves to (the event loop's ``getaddrinfo``)."""
    infos = await asyncio.get_running_loop().getaddrinfo(name, None)
    return [str(info[4][0]) for info in infos]


class AllowList:
    """``haAllowedSlaves``: who may connect to a master's HA port.

    Comma-separated addresses, CIDR networks, host names and the keywords
    ``loopback``, ``private`` and ``*`` (anyone, as RocketMQ). Host names are
    resolved when a peer connects that no address or network entry admits (a slave's
    container may get a new address when it restarts); an answer is kept for
    :data:`NAME_TTL_S`, a failure for :data:`NAME_FAILURE_TTL_S`, and connections
    arriving while a name is being looked up wait for that one lookup. The cache
    belongs to the list: a list put in force by UPDATE_BROKER_CONFIG starts without
    one, so a name taken off the list is never consulted again.

    Args:
        text: The property's value; ``None``: :data:`DEFAULT_ALLOWED`.
        resolver: Looks a name up (tests pass their own); default: :func:`resolve_host`.
        clock: Seconds, monotonic, for the cache's expiry.

    Raises:
        AllowListError: An entry is empty or not understood.
    """

    def __init__(
        self,
        text: str | None,
        *,
        resolver: Resolver = resolve_host,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.text = DEFAULT_ALLOWED if text is None else text
        self.default = text is None
        self.anyone = False
        self._nets: list[_Net] = []
        self._names: list[str] = []
        self._resolver = resolver
        self._clock = clock
        #: Name -> (when it expires, its addresses); an empty set for a failed lookup.
        self._cache: dict[str, tuple[float, frozenset[_Addr]]] = {}
        #: Lookups under way, which later connections for the same name wait for.
        self._lookups: dict[str, asyncio.Task[frozenset[_Addr]]] = {}
        for raw in self.text.split(","):
            entry = raw.strip()
            if entry == "*":
                self.anyone = True
            elif entry == "loopback":
                self._nets += [ipaddress.ip_network(n) for n in _LOOPBACK]
            elif entry == "private":
                self._nets += [ipaddress.ip_network(n) for n in _PRIVATE]
            elif not entry:
                raise AllowListError(f"haAllowedSlaves has an empty entry: {self.text!r}")
            else:
                try:
                    self._nets.append(ipaddress.ip_network(entry, strict=False))
                except ValueError:
                    if "/" in entry or not all(c.isalnum() or c in "-._" for c in entry):
                        raise AllowListError(
                            f"haAllowedSlaves: {entry!r} is not an address, a network "
                            "(CIDR), a host name, 'loopback', 'private' or '*'"
                        ) from None
                    self._names.append(entry)

    async def allows(self, host: str) -> bool:
        """Whether a peer at ``host`` may follow.

        Args:
            host: The peer's IP address as the socket reports it.
        """
        if self.anyone:
            return True
        try:
            ip = _ip(host)
        except ValueError:
            return False
        if any(ip in net for net in self._nets if net.version == ip.version):
            return True
        for name in self._names:
            if ip in await self._addresses(name):
                return True
        return False

    async def _addresses(self, name: str) -> frozenset[_Addr]:
        cached = self._cache.get(name)
        if cached is not None and self._clock() < cached[0]:
            return cached[1]
        lookup = self._lookups.get(name)
        if lookup is None:
            lookup = asyncio.create_task(self._lookup(name), name=f"ha-resolve-{name}")
            self._lookups[name] = lookup
        # Shielded: a connection dropped while it waits must not cancel the lookup
        # that the other connections wait for too.
        return await asyncio.shield(lookup)

    async def _lookup(self, name: str) -> frozenset[_Addr]:
        try:
            async with asyncio.timeout(_RESOLVE_TIMEOUT_S):
                found = await self._resolver(name)
            addresses = frozenset(_ip(text) for text in found)
            ttl = NAME_TTL_S
        except (OSError, TimeoutError, ValueError) as exc:  # ValueError: IDNA, bad address
            log.warning(
                "cannot resolve an haAllowedSlaves name",
                name=name,
                error=str(exc) or type(exc).__name__,
                retry_after_s=NAME_FAILURE_TTL_S,
            )
            addresses, ttl = frozenset(), NAME_FAILURE_TTL_S
        finally:
            del self._lookups[name]
        self._cache[name] = (self._clock() + ttl, addresses)
        return addresses


class RefusalLog(LimitedWarnings):
    """WARNINGs for refused connections, at most ``limit`` a minute.

    A stranger reconnecting in a loop (or a RocketMQ slave of an ACL master, every 5 s)
    must not flood the log.

    Args:
        limit: WARNINGs per minute.
        clock: Seconds, monotonic (tests pass their own).
    """

    def __init__(self, limit: int = 20, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(log, "HA connections refused without a log line", limit, clock)


class SlaveAccount(Protocol):
    """What the guard needs of an ACL account (:class:`rocklet.broker.acl.accounts.Account`)."""

    @property
    def secret_key(self) -> bytes: ...  # noqa: D102

    @property
    def admin(self) -> bool: ...  # noqa: D102


@dataclass(slots=True)
class HAGuard:
    """The master's admission rules for HA connections.

    Attributes:
        allowed: ``haAllowedSlaves`` (replaced when UPDATE_BROKER_CONFIG changes it:
            :meth:`~rocklet.broker.ha.master.HAMaster.allow`).
        tls: The broker's TLS when ``tls.server.mode=enforcing``; ``None``: plain TCP.
        accounts: Returns the ACL accounts in force when slaves must authenticate
            (read per connection, so an ACL file reload applies); ``None``: no
            handshake (the RocketMQ wire).
        refusals: Where refusals are logged (rate-limited).
    """

    allowed: AllowList
    tls: ServerTls | None = None
    accounts: Callable[[], Mapping[str, SlaveAccount]] | None = None
    refusals: RefusalLog = field(default_factory=RefusalLog)

    async def admit(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Run the handshake, when one is required.

        Steps 1 and 2 (address, TLS) were done by
        :class:`~rocklet.broker.ha.listener.HAListener` before the streams existed.

        Returns:
            Whether the peer may follow; a refusal is logged, and the caller closes the
            connection (nothing has been sent on it but the handshake's own bytes).
        """
        if self.accounts is None:
            return True
        peer = writer.get_extra_info("peername")
        who = f"{peer[0]}:{peer[1]}" if peer else "?"
        try:
            async with asyncio.timeout(_ADMIT_TIMEOUT_S):
                why = await self._authenticate(reader, writer)
        except TimeoutError:
            why = "no handshake in time"
        except (OSError, asyncio.IncompleteReadError) as exc:
            why = f"connection lost: {exc or type(exc).__name__}"
        if why is None:
            return True
        self.refusals.warn("HA connection refused", peer=who, reason=why)
        return False

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> str | None:
        """The master's half of the handshake: ``None``, or why the peer is refused.

        Every length on the wire is checked before it is used; the master's MAC is
        sent only to a peer whose own MAC and account check out.
        """
        assert self.accounts is not None
        hello = await reader.readexactly(len(MAGIC))
        if hello == MAGIC_V1:
            # Its handshake cannot check the master, so it is not answered in the old
            # form: the slave must be upgraded (it logs "closed during the handshake").
            return (
                "a Rocklet slave of an older version (HA handshake v1, without mutual "
                "authentication): upgrade it"
            )
        if hello != MAGIC:
            offset = int.from_bytes(hello, "big", signed=True)
            return (
                "it did not authenticate (haAuthEnable is on: a RocketMQ slave, or not a "
                f"slave; its first 8 bytes read as offset {offset})"
            )
        nonce = secrets.token_bytes(NONCE_SIZE)
        writer.write(MAGIC + nonce)
        size = int.from_bytes(await reader.readexactly(2), "big")
        if not 0 < size <= MAX_KEY_BYTES:
            return f"access key length {size} out of range 1..{MAX_KEY_BYTES}"
        raw_key = await reader.readexactly(size)
        slave_nonce = await reader.readexactly(NONCE_SIZE)
        got = await reader.readexactly(MAC_SIZE)
        try:
            access_key = raw_key.decode("utf-8")
        except UnicodeDecodeError:
            return "access key is not UTF-8"
        account = self.accounts().get(access_key)
        why: str | None = None
        if account is None:
            why = f"no ACL account accessKey={access_key}"
        elif not hmac.compare_digest(
            got, slave_mac(account.secret_key, nonce, slave_nonce, access_key)
        ):
            why = f"wrong signature for accessKey={access_key}"
        elif not account.admin:
            why = f"accessKey={access_key} is not admin: true (a slave receives every topic)"
        if why is None:
            assert account is not None
            # The master's own proof, only to a slave that proved itself: a stranger
            # must not get a MAC of the account's secret over nonces it chose.
            writer.write(ACCEPTED + master_mac(account.secret_key, nonce, slave_nonce, access_key))
        else:
            writer.write(REFUSED)
        await writer.drain()
        if why is None:
            log.info(
                "slave authenticated", peer=writer.get_extra_info("peername"), access_key=access_key
            )
        return why
