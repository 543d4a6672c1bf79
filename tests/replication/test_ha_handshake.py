"""The HA handshake's two proofs, the allow-list's name cache and the slave's HA TLS
switch, in one process (docs/replication.md, "Who may follow a master").

The master's half is :class:`HAGuard` behind a loopback server on port 0, the slave's
is :func:`dial_master`; an impostor master is a small server that speaks the handshake
without the account's secret. Names resolve through a fake resolver, never DNS.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import secrets
import ssl
from collections.abc import AsyncIterator, Collection, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
from structlog.testing import capture_logs

from rocklet.broker.config import BrokerConfig, BrokerRole, ConfigError
from rocklet.broker.ha.guard import (
    NAME_FAILURE_TTL_S,
    NAME_TTL_S,
    AllowList,
    HAGuard,
    SlaveAccount,
)
from rocklet.broker.ha.handshake import (
    ACCEPTED,
    MAC_SIZE,
    MAGIC,
    MAGIC_V1,
    MASTER_CONTEXT,
    NONCE_SIZE,
    SLAVE_CONTEXT,
    HandshakeError,
    dial_master,
    master_mac,
    slave_mac,
)
from rocklet.broker.ha.service import ha_client_tls
from rocklet.broker.ha.wire import HEADER, HEADER_SIZE, REPORT
from rocklet.broker.tls_config import TlsSettings
from rocklet.protocol.acl import Credentials

SLAVE = Credentials("haslave01", "haslave-secret")
_WAIT_S = 10.0


@dataclass
class _Account:
    secret_key: bytes
    admin: bool = True


_ACCOUNTS: Mapping[str, SlaveAccount] = {SLAVE.access_key: _Account(b"haslave-secret")}


@asynccontextmanager
async def _master() -> AsyncIterator[tuple[int, asyncio.Queue[bool]]]:
    """A master's guard on a loopback port: its port, and each connection's verdict.

    An admitted peer gets an empty frame at the offset it reports (the RocketMQ wire).
    """
    verdicts: asyncio.Queue[bool] = asyncio.Queue()
    guard = HAGuard(AllowList("loopback"), accounts=lambda: _ACCOUNTS)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            admitted = await guard.admit(reader, writer)
            await verdicts.put(admitted)
            if admitted:
                (offset,) = REPORT.unpack(await reader.readexactly(REPORT.size))
                writer.write(HEADER.pack(offset, 0))
                await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], verdicts
    finally:
        server.close()
        await server.wait_closed()


@asynccontextmanager
async def impostor_master(proof: str) -> AsyncIterator[tuple[int, asyncio.Queue[bytes]]]:
    """A fake master that answers ACCEPTED with a MAC it cannot make, then data.

    Args:
        proof: ``"wrong secret"``: the master's MAC under another secret;
            ``"reflected"``: the slave's own MAC sent back.

    Yields:
        Its port, and for each connection what the slave sent after the answer.
    """
    after: asyncio.Queue[bytes] = asyncio.Queue()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            assert await reader.readexactly(len(MAGIC)) == MAGIC
            nonce = secrets.token_bytes(NONCE_SIZE)
            writer.write(MAGIC + nonce)
            size = int.from_bytes(await reader.readexactly(2), "big")
            key = (await reader.readexactly(size)).decode()
            slave_nonce = await reader.readexactly(NONCE_SIZE)
            slave_proof = await reader.readexactly(MAC_SIZE)
            if proof == "reflected":
                mac = slave_proof
            else:
                mac = master_mac("not-the-secret", nonce, slave_nonce, key)
            writer.write(ACCEPTED + mac + HEADER.pack(0, 4) + b"DATA")
            got = b""
            with contextlib.suppress(ConnectionError):
                got = await reader.read()  # until the slave closes
            await after.put(got)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], after
    finally:
        server.close()
        await server.wait_closed()


def test_the_master_and_slave_macs_differ_for_the_same_inputs() -> None:
    secret, key = SLAVE.secret_key, SLAVE.access_key
    ours, theirs = secrets.token_bytes(NONCE_SIZE), secrets.token_bytes(NONCE_SIZE)
    as_slave = slave_mac(secret, ours, theirs, key)
    as_master = master_mac(secret, ours, theirs, key)
    assert len(as_slave) == len(as_master) == MAC_SIZE
    assert as_slave != as_master
    # The bytes docs/replication.md gives: context, master nonce, slave nonce, key.
    body = ours + theirs + key.encode()
    assert as_slave == hmac.digest(secret.encode(), SLAVE_CONTEXT + body, hashlib.sha256)
    assert as_master == hmac.digest(secret.encode(), MASTER_CONTEXT + body, hashlib.sha256)
    # Each covers both nonces, in their places.
    assert master_mac(secret, theirs, ours, key) != as_master
    assert master_mac(secret, ours, secrets.token_bytes(NONCE_SIZE), key) != as_master


async def test_slave_and_master_prove_themselves_to_each_other() -> None:
    async with _master() as (port, verdicts):
        reader, writer = await dial_master("127.0.0.1", port, credentials=SLAVE)
        try:
            writer.write(REPORT.pack(0))
            head = await asyncio.wait_for(reader.readexactly(HEADER_SIZE), _WAIT_S)
            assert HEADER.unpack(head) == (0, 0)
        finally:
            writer.close()
        assert await verdicts.get() is True
        # A slave with a wrong secret is refused by the master.
        wrong = Credentials(SLAVE.access_key, "not-the-secret")
        with pytest.raises(HandshakeError, match="refused accessKey=haslave01"):
            await dial_master("127.0.0.1", port, credentials=wrong)
        assert await verdicts.get() is False


async def test_a_v1_slave_is_refused_naming_an_older_version() -> None:
    with capture_logs() as logs:
        async with _master() as (port, verdicts):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(MAGIC_V1)
            try:
                async with asyncio.timeout(_WAIT_S):
                    with contextlib.suppress(ConnectionResetError):
                        assert await reader.read() == b""  # nothing, then closed
            finally:
                writer.close()
            assert await verdicts.get() is False
    refusals = [e for e in logs if e["event"] == "HA connection refused"]
    assert len(refusals) == 1
    assert "a Rocklet slave of an older version" in refusals[0]["reason"]


@pytest.mark.parametrize("proof", ["wrong secret", "reflected"])
async def test_dial_master_refuses_an_impostor_master(proof: str) -> None:
    async with impostor_master(proof) as (port, after):
        with pytest.raises(HandshakeError) as caught:
            await dial_master("127.0.0.1", port, credentials=SLAVE)
        message = str(caught.value)
        assert f"the peer at 127.0.0.1:{port} could not prove it holds the secret key" in message
        assert "accessKey=haslave01" in message and "impostor" in message
        # The slave hung up without a byte more: no offset report, so no data asked for.
        assert await asyncio.wait_for(after.get(), _WAIT_S) == b""


class _Resolver:
    """A fake DNS: answers per name, counts lookups, can hold them until released."""

    def __init__(self, answers: dict[str, Collection[str] | OSError]) -> None:
        self.answers = answers
        self.calls: list[str] = []
        self.called = asyncio.Event()
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, name: str) -> Collection[str]:
        self.calls.append(name)
        self.called.set()
        await self.gate.wait()
        answer = self.answers[name]
        if isinstance(answer, OSError):
            raise answer
        return answer


async def test_concurrent_connections_share_one_lookup_until_it_expires() -> None:
    now = [100.0]
    dns = _Resolver({"slave-a.test": ["10.1.1.1"]})
    allowed = AllowList("10.0.0.9, slave-a.test", resolver=dns, clock=lambda: now[0])
    dns.gate.clear()
    peers = [asyncio.create_task(allowed.allows("10.1.1.1")) for _ in range(20)]
    await asyncio.wait_for(dns.called.wait(), _WAIT_S)
    assert not any(p.done() for p in peers)  # all twenty wait for the one lookup
    dns.gate.set()
    assert await asyncio.wait_for(asyncio.gather(*peers), _WAIT_S) == [True] * 20
    assert dns.calls == ["slave-a.test"]
    # Strangers and the listed address cost nothing while the answer is fresh.
    assert not await allowed.allows("10.9.9.9")
    assert await allowed.allows("10.0.0.9")
    now[0] += NAME_TTL_S - 0.1
    assert await allowed.allows("10.1.1.1") and len(dns.calls) == 1

    # The slave's container came back on a new address: admitted once the entry expires.
    dns.answers["slave-a.test"] = ["10.1.1.2"]
    assert not await allowed.allows("10.1.1.2")
    now[0] += 0.2
    assert await allowed.allows("10.1.1.2")
    assert not await allowed.allows("10.1.1.1")
    assert dns.calls == ["slave-a.test"] * 2


async def test_a_failed_lookup_is_remembered_for_the_shorter_time() -> None:
    now = [0.0]
    dns = _Resolver({"slave-b.test": OSError("Name or service not known")})
    allowed = AllowList("slave-b.test", resolver=dns, clock=lambda: now[0])
    with capture_logs() as logs:
        assert not await allowed.allows("10.2.2.2")
        assert not await allowed.allows("10.2.2.2")
    assert dns.calls == ["slave-b.test"]
    assert [e["name"] for e in logs if "cannot resolve" in e["event"]] == ["slave-b.test"]
    assert NAME_FAILURE_TTL_S < NAME_TTL_S
    now[0] += NAME_FAILURE_TTL_S - 0.1
    assert not await allowed.allows("10.2.2.2") and len(dns.calls) == 1
    # The name appears in DNS (its container started): the next lookup admits it.
    dns.answers["slave-b.test"] = ["10.2.2.2"]
    now[0] += 0.2
    assert await allowed.allows("10.2.2.2")
    assert len(dns.calls) == 2


async def test_a_dropped_connection_does_not_cancel_the_shared_lookup() -> None:
    dns = _Resolver({"slave-a.test": ["10.1.1.1"]})
    allowed = AllowList("slave-a.test", resolver=dns)
    dns.gate.clear()
    first = asyncio.create_task(allowed.allows("10.1.1.1"))
    second = asyncio.create_task(allowed.allows("10.1.1.1"))
    await asyncio.wait_for(dns.called.wait(), _WAIT_S)
    first.cancel()
    dns.gate.set()
    assert await asyncio.wait_for(second, _WAIT_S)
    assert first.cancelled() and dns.calls == ["slave-a.test"]


async def test_a_new_list_never_uses_the_old_lists_names() -> None:
    dns = _Resolver({"slave-a.test": ["10.1.1.1"], "slave-b.test": ["10.2.2.2"]})
    old = AllowList("slave-a.test, slave-b.test", resolver=dns)
    assert await old.allows("10.1.1.1") and await old.allows("10.2.2.2")
    assert dns.calls == ["slave-a.test", "slave-b.test"]
    # UPDATE_BROKER_CONFIG puts a new list in force (HAMaster.allow).
    new = AllowList("slave-b.test", resolver=dns)
    dns.calls.clear()
    assert not await new.allows("10.1.1.1")
    assert await new.allows("10.2.2.2")
    assert dns.calls == ["slave-b.test"]  # a fresh lookup, and none of slave-a


def test_the_slave_ha_tls_follows_tls_enable_unless_ha_tls_enable_says_otherwise() -> None:
    def slave(**keys: bool) -> BrokerConfig:
        return BrokerConfig(broker_id=1, broker_role=BrokerRole.SLAVE, **keys)  # type: ignore[arg-type]

    ctx = ssl.create_default_context()
    on, off = TlsSettings(client_enabled=True), TlsSettings(client_enabled=False)
    assert ha_client_tls(slave(), on, ctx) is ctx  # the default: as tls.enable
    assert ha_client_tls(slave(), off, None) is None
    assert ha_client_tls(slave(ha_tls_enable=True), on, ctx) is ctx
    assert ha_client_tls(slave(ha_tls_enable=False), on, ctx) is None
    made = ha_client_tls(slave(ha_tls_enable=True), off, None)
    assert isinstance(made, ssl.SSLContext) and made.check_hostname
    assert ha_client_tls(BrokerConfig(ha_tls_enable=True), on, ctx) is None  # a master
    with pytest.raises(ConfigError, match="haTlsEnable"):
        BrokerConfig.from_properties({"haTlsEnable": "yes"})
    assert BrokerConfig.from_properties({"haTlsEnable": "false"}).ha_tls_enable is False
