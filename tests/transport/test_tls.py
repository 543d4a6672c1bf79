"""TLS on the remoting server over real loopback sockets, certificates made per test.

The modes (disabled, permissive, enforcing) as RocketMQ's HandshakeHandler has them,
client verification, mutual TLS, certificate rotation and hostile sockets. The same
paths run under uvloop in the process tests (tests/ops/test_tls_processes.py).
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from rocklet.protocol import RemotingCommand
from rocklet.transport import ProcessorRegistry, RemotingServer, RequestContext
from rocklet.transport.connection import HandlerResult
from rocklet.transport.dial import open_connection
from rocklet.transport.errors import ConnectionClosedError, TlsHandshakeError
from rocklet.transport.tls import (
    ClientAuth,
    ServerTls,
    ServerTlsConfig,
    TlsConfigError,
    TlsMode,
    client_context,
)
from tests.logcapture import capture_sdk_logs
from tests.tlscerts import Pki, make_pki

ECHO = 1000
TIMEOUT = 5.0


def registry() -> ProcessorRegistry:
    async def echo(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        return cmd.make_response(0, body=cmd.body)

    reg = ProcessorRegistry()
    reg.register(ECHO, echo)
    return reg


def server_tls(pki: Pki, mode: TlsMode, **kw: object) -> ServerTls:
    config = ServerTlsConfig(
        mode=mode,
        cert_path=pki.server_cert,
        key_path=pki.server_key,
        **kw,  # type: ignore[arg-type]
    )
    return ServerTls(config)


@asynccontextmanager
async def serving(tls: ServerTls | None) -> AsyncIterator[RemotingServer]:
    server = RemotingServer("127.0.0.1", 0, registry(), name="test", tls=tls)
    await server.start()
    try:
        yield server
    finally:
        await server.stop(grace_s=1)


async def echo_over(port: int, ctx: ssl.SSLContext | None, host: str = "127.0.0.1") -> bytes:
    async with await open_connection(host, port, tls=ctx, connect_timeout_s=TIMEOUT) as conn:
        answer = await conn.request(RemotingCommand(ECHO, body=b"ping"), TIMEOUT)
    assert answer.code == 0
    return answer.body


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


async def test_permissive_serves_tls_and_plain_on_one_port(pki: Pki) -> None:
    async with serving(server_tls(pki, TlsMode.PERMISSIVE)) as server:
        assert await echo_over(server.port, pki.client_context()) == b"ping"
        assert await echo_over(server.port, None) == b"ping"
        assert server.tls_mode == "permissive"


@pytest.mark.parametrize(
    ("not_before", "not_after", "said"),
    [
        (None, datetime.datetime(2020, 1, 1), "has expired"),
        (datetime.datetime(2999, 1, 1), None, "is not valid yet"),
    ],
)
def test_an_out_of_date_server_certificate_is_warned_about(
    pki: Pki,
    not_before: datetime.datetime | None,
    not_after: datetime.datetime | None,
    said: str,
) -> None:
    # OpenSSL loads it silently; the first sign would be every verifying client failing.
    leaf = pki.ca.issue_cert("localhost", "127.0.0.1", not_before=not_before, not_after=not_after)
    leaf.cert_chain_pems[0].write_to_path(str(pki.server_cert))
    leaf.private_key_pem.write_to_path(str(pki.server_key))
    with capture_sdk_logs() as logs:
        server_tls(pki, TlsMode.ENFORCING)
    (warning,) = [e for e in logs if e["log_level"] == "warning"]
    assert said in warning["event"] and warning["path"] == str(pki.server_cert)
    with capture_sdk_logs() as logs:
        server_tls(make_pki(pki.dir / "fresh"), TlsMode.ENFORCING)
    assert [e for e in logs if e["log_level"] == "warning"] == []


async def test_enforcing_closes_plain_connections(pki: Pki) -> None:
    async with serving(server_tls(pki, TlsMode.ENFORCING)) as server:
        assert await echo_over(server.port, pki.client_context()) == b"ping"
        conn = await open_connection("127.0.0.1", server.port)
        with pytest.raises(ConnectionClosedError, match="requires TLS"):
            await conn.request(RemotingCommand(ECHO, body=b"ping"), TIMEOUT)


async def test_disabled_refuses_a_tls_handshake(pki: Pki) -> None:
    async with serving(None) as server:
        assert await echo_over(server.port, None) == b"ping"
        with pytest.raises(TlsHandshakeError, match="accept TLS on this port") as refused:
            await open_connection("127.0.0.1", server.port, tls=pki.client_context())
        # The reason is named, never an empty gap ("failed:  during the handshake").
        assert "failed:  " not in str(refused.value), refused.value


async def test_the_client_refuses_a_certificate_from_an_unknown_ca(pki: Pki) -> None:
    other = make_pki(pki.dir / "other")
    async with serving(server_tls(pki, TlsMode.ENFORCING)) as server:
        with pytest.raises(TlsHandshakeError, match="certificate verify failed"):
            await open_connection("127.0.0.1", server.port, tls=other.client_context())
        # The system's CAs do not know a test CA either: verification is the default.
        with pytest.raises(TlsHandshakeError, match="certificate verify failed"):
            await open_connection("127.0.0.1", server.port, tls=client_context())


async def test_the_client_refuses_a_certificate_for_another_host(tmp_path: Path) -> None:
    pki = make_pki(tmp_path, names=("broker.example.com",))
    async with serving(server_tls(pki, TlsMode.ENFORCING)) as server:
        with pytest.raises(TlsHandshakeError, match=r"IP address mismatch|Hostname mismatch"):
            await open_connection("127.0.0.1", server.port, tls=pki.client_context())
        # The name it does carry works, wherever it resolves.
        body = await echo_over_named(server.port, pki, "broker.example.com")
        assert body == b"ping"


async def echo_over_named(port: int, pki: Pki, name: str) -> bytes:
    conn = await open_connection("127.0.0.1", port, tls=pki.client_context(), server_hostname=name)
    async with conn:
        answer = await conn.request(RemotingCommand(ECHO, body=b"ping"), TIMEOUT)
    return answer.body


async def test_verification_can_be_turned_off_explicitly(pki: Pki) -> None:
    async with serving(server_tls(pki, TlsMode.ENFORCING)) as server:
        insecure = client_context(verify=False)
        assert insecure.verify_mode == ssl.CERT_NONE and not insecure.check_hostname
        assert await echo_over(server.port, insecure) == b"ping"


async def test_mutual_tls_refuses_a_client_without_a_certificate(pki: Pki) -> None:
    tls = server_tls(
        pki, TlsMode.ENFORCING, need_client_auth=ClientAuth.REQUIRE, trust_cert_path=pki.ca_file
    )
    async with serving(tls) as server:
        assert await echo_over(server.port, pki.client_context(with_cert=True)) == b"ping"
        # TLS 1.3: the client learns of the refusal after its handshake, on first use;
        # what it is told points at its certificate, not at plain TCP.
        with pytest.raises((TlsHandshakeError, ConnectionClosedError)) as refused:
            await echo_over(server.port, pki.client_context())
        assert "client certificate" in str(refused.value), refused.value
        assert "plain connections" not in str(refused.value)
        # A certificate from another CA is refused too.
        stranger = make_pki(pki.dir / "stranger")
        ctx = pki.client_context()
        ctx.load_cert_chain(stranger.client_cert, stranger.client_key)
        with pytest.raises((TlsHandshakeError, ConnectionClosedError)) as refused:
            await echo_over(server.port, ctx)
        assert "client certificate" in str(refused.value), refused.value
        assert server.connections == frozenset()


async def test_optional_client_auth_takes_clients_with_and_without(pki: Pki) -> None:
    tls = server_tls(
        pki, TlsMode.ENFORCING, need_client_auth=ClientAuth.OPTIONAL, trust_cert_path=pki.ca_file
    )
    async with serving(tls) as server:
        assert await echo_over(server.port, pki.client_context(with_cert=True)) == b"ping"
        assert await echo_over(server.port, pki.client_context()) == b"ping"


async def test_a_rotated_certificate_is_used_for_new_connections(pki: Pki) -> None:
    tls = server_tls(pki, TlsMode.ENFORCING)
    async with serving(tls) as server:
        old = await open_connection("127.0.0.1", server.port, tls=pki.client_context())
        new_ca = pki.rotate()
        trusting_new = ssl.create_default_context()
        new_ca.configure_trust(trusting_new)
        assert await echo_over(server.port, trusting_new) == b"ping"
        assert tls.reloads == 1
        with pytest.raises(TlsHandshakeError, match="certificate verify failed"):
            await open_connection("127.0.0.1", server.port, tls=pki.client_context())
        # The connection made before the rotation goes on with its session.
        async with old:
            answer = await old.request(RemotingCommand(ECHO, body=b"still"), TIMEOUT)
        assert answer.body == b"still"


async def test_a_certificate_without_its_key_keeps_the_old_pair(pki: Pki) -> None:
    tls = server_tls(pki, TlsMode.ENFORCING)
    async with serving(tls) as server:
        before = pki.server_key.read_bytes()
        pki.rotate()
        pki.server_key.write_bytes(before)  # the new certificate, the old key
        assert await echo_over(server.port, pki.client_context()) == b"ping"
        assert tls.reloads == 0


async def test_hostile_sockets_are_closed_and_the_server_goes_on(pki: Pki) -> None:
    tls = server_tls(pki, TlsMode.PERMISSIVE, handshake_timeout_s=0.2)
    async with serving(tls) as server:
        # Silent: never sends a byte. Half a handshake: a record header, then nothing.
        # Garbage after a handshake byte. Garbage instead of a frame.
        openings = [b"", b"\x16\x03\x01\x02\x00", b"\x16" + bytes(range(256)) * 4, b"\xff" * 64]
        for opening in openings:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(opening)
            # The server closes each; reading sees EOF (or a reset) well within TIMEOUT.
            try:
                rest = await asyncio.wait_for(reader.read(), TIMEOUT)
            except ConnectionResetError:
                rest = b""
            assert rest == b"", opening
            writer.close()
        assert await echo_over(server.port, pki.client_context()) == b"ping"
        assert await echo_over(server.port, None) == b"ping"


def test_tls_on_without_a_certificate_is_a_clear_error() -> None:
    with pytest.raises(TlsConfigError, match=r"tls.server.certPath and tls.server.keyPath"):
        ServerTlsConfig(mode=TlsMode.ENFORCING)
    with pytest.raises(TlsConfigError, match=r"tls.server.trustCertPath"):
        ServerTlsConfig(
            mode=TlsMode.PERMISSIVE,
            cert_path=Path("c"),
            key_path=Path("k"),
            need_client_auth=ClientAuth.REQUIRE,
        )


def test_an_encrypted_key_needs_its_password(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    pki = make_pki(tmp_path)
    key = serialization.load_pem_private_key(pki.server_key.read_bytes(), password=None)
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"s3cret"),
        )
    )
    config = ServerTlsConfig(mode=TlsMode.ENFORCING, cert_path=pki.server_cert, key_path=encrypted)
    with pytest.raises(TlsConfigError, match="cannot load certificate"):
        ServerTls(config)  # no password: refused, never a prompt on the terminal
    config = ServerTlsConfig(
        mode=TlsMode.ENFORCING,
        cert_path=pki.server_cert,
        key_path=encrypted,
        key_password="s3cret",
    )
    ServerTls(config)
    assert "s3cret" not in repr(config)
