"""TLS against real ``rocklet`` server processes (uvloop), certificates made per test.

The servers get their TLS settings the ways RocketMQ users give them: ``-D`` on the
command line, ``tls.config.file``, and (Rocklet's addition) ``broker.conf``. The
clients are the SDK (producer, push and pull consumers, admin), the command-line
tools and the healthcheck.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocklet.benchsuite.procs import free_ports
from rocklet.client import Admin, Message, Producer, PullConsumer, PushConsumer
from rocklet.client.errors import ConnectionClosedError, TlsHandshakeError
from rocklet.client.pull_consumer import PullStatus
from rocklet.protocol import RemotingCommand, RequestCode
from rocklet.transport.dial import open_connection
from tests.client.consumers import Collector
from tests.ops.test_healthcheck import healthcheck
from tests.test_cli import BROKER_LISTENING, LISTENING, TIMEOUT, spawn, wait_for_line
from tests.tlscerts import Pki, make_pki

BROKER_READY = re.compile(r"broker started.*namesrv_tls=(\w+).*tls=(\w+)")


@dataclass
class Servers:
    """A running ``rocklet standalone`` (or namesrv + broker pair) and its ports."""

    namesrv_port: int
    broker_port: int
    procs: list[asyncio.subprocess.Process]

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"


@asynccontextmanager
async def standalone(
    tmp_path: Path, *tls_args: str, ports: tuple[int, ...] = (0, 0)
) -> AsyncIterator[Servers]:
    proc = await spawn(
        "standalone", "--data-dir", str(tmp_path / "data"),
        "--namesrv-port", str(ports[0]), "--listen-port", str(ports[1]), *tls_args,
    )  # fmt: skip
    async with _owned([proc]):
        ns = await wait_for_line(proc, LISTENING)
        broker = await wait_for_line(proc, BROKER_LISTENING)
        drain = _drain(proc)
        yield Servers(int(ns.group(2)), int(broker.group(1)), [proc])
        await _stop([proc])
        await drain


@asynccontextmanager
async def _owned(procs: list[asyncio.subprocess.Process]) -> AsyncIterator[None]:
    try:
        yield
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


def _drain(proc: asyncio.subprocess.Process) -> asyncio.Task[bytes]:
    assert proc.stdout is not None
    return asyncio.create_task(proc.stdout.read())


async def _stop(procs: list[asyncio.subprocess.Process]) -> None:
    for proc in reversed(procs):
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0


def server_keys(pki: Pki) -> list[str]:
    return [
        f"-Dtls.server.certPath={pki.server_cert}",
        f"-Dtls.server.keyPath={pki.server_key}",
        f"-Dtls.client.trustCertPath={pki.ca_file}",
    ]


async def send_and_pull(namesrv: str, tls: ssl.SSLContext | None, topic: str, body: bytes) -> bytes:
    """Send one message and read it back at its offset, both over ``tls``."""
    async with Producer("tls-producer", namesrv, tls=tls) as producer:
        sent = await producer.send(Message(topic, body))
    async with PullConsumer("tls-puller", namesrv, tls=tls) as consumer:
        result = await consumer.pull(sent.message_queue, sent.queue_offset, 1)
    assert result.status is PullStatus.FOUND
    return result.messages[0].body


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


async def test_enforcing_namesrv_and_broker_processes_serve_only_tls(
    tmp_path: Path, pki: Pki
) -> None:
    # The name server takes its keys from a tls.config.file named with -D, the broker
    # from broker.conf: the two ways RocketMQ files and Rocklet's own both work.
    tls_file = tmp_path / "tls.properties"
    tls_file.write_text(
        f"tls.server.certPath={pki.server_cert}\ntls.server.keyPath={pki.server_key}\n"
    )
    ns = await spawn(
        "namesrv", "--port", "0", "--host", "127.0.0.1",
        "-D", "tls.server.mode=enforcing", "-D", f"tls.config.file={tls_file}",
    )  # fmt: skip
    async with _owned([ns]):
        ns_port = int((await wait_for_line(ns, LISTENING)).group(2))
        conf = tmp_path / "broker.conf"
        conf.write_text(
            f"listenPort=0\nstorePathRootDir={tmp_path / 'store'}\nbrokerIP1=127.0.0.1\n"
            "mappedFileSizeCommitLog=1048576\ntls.server.mode=enforcing\n"
            f"tls.server.certPath={pki.server_cert}\ntls.server.keyPath={pki.server_key}\n"
            f"tls.client.trustCertPath={pki.ca_file}\n"
        )
        broker = await spawn(
            "broker", "-c", str(conf), "--namesrv", f"127.0.0.1:{ns_port}", "--host", "127.0.0.1"
        )
        async with _owned([broker]):
            ready = await wait_for_line(broker, BROKER_READY)
            # Enforcing: the broker registers over TLS too (tls.enable's default).
            assert ready.groups() == ("True", "enforcing")
            drains = [_drain(ns), _drain(broker)]
            namesrv = f"127.0.0.1:{ns_port}"
            ctx = pki.client_context()
            assert await send_and_pull(namesrv, ctx, "TlsTopic", b"over tls") == b"over tls"

            # A push consumer receives over TLS as well.
            collector = Collector()
            consumer = PushConsumer("tls-push", namesrv, consume_from="first", tls=ctx)
            async with consumer.subscribe("TlsTopic", "*", collector):
                await collector.wait_bodies(1)
            assert collector.bodies == {b"over tls"}

            # Plain TCP is refused on both ports, with a clear error.
            with pytest.raises(ConnectionClosedError, match="requires TLS"):
                async with Admin(namesrv) as admin:
                    await admin.cluster_info()
            conn = await open_connection("127.0.0.1", ns_port)
            with pytest.raises(ConnectionClosedError, match="requires TLS"):
                await conn.request(RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO), TIMEOUT)
            await conn.close()
            await _stop([ns, broker])
            for drain in drains:
                await drain


async def test_permissive_takes_tls_and_plain_clients_on_one_port(tmp_path: Path, pki: Pki) -> None:
    async with standalone(tmp_path, *server_keys(pki)) as servers:  # no mode: permissive
        assert await send_and_pull(servers.namesrv, None, "Mixed", b"plain") == b"plain"
        ctx = pki.client_context()
        assert await send_and_pull(servers.namesrv, ctx, "Mixed", b"tls") == b"tls"
        async with Admin(servers.namesrv, tls=ctx) as admin:
            info = await admin.cluster_info()
        assert info.broker_addr_table["broker-a"].broker_addrs == {
            0: f"127.0.0.1:{servers.broker_port}"
        }


async def test_a_server_without_tls_refuses_a_tls_client(tmp_path: Path, pki: Pki) -> None:
    async with standalone(tmp_path) as servers:
        with pytest.raises(TlsHandshakeError, match="accept TLS"):
            async with Admin(servers.namesrv, tls=pki.client_context()) as admin:
                await admin.cluster_info()
        assert await send_and_pull(servers.namesrv, None, "Plain", b"still fine") == b"still fine"


async def test_the_client_verifies_the_server_by_default(tmp_path: Path, pki: Pki) -> None:
    # A certificate from the trusted CA, but for another name than the address used.
    leaf = pki.ca.issue_cert("broker.example.com")
    leaf.cert_chain_pems[0].write_to_path(str(pki.server_cert))
    leaf.private_key_pem.write_to_path(str(pki.server_key))
    async with standalone(tmp_path, "-Dtls.server.mode=enforcing", *server_keys(pki)) as servers:
        with pytest.raises(TlsHandshakeError, match="IP address mismatch"):
            async with Admin(servers.namesrv, tls=pki.client_context()) as admin:
                await admin.cluster_info()
        # tls=True: the system's CAs, which do not know the test CA.
        with pytest.raises(TlsHandshakeError, match="certificate verify failed"):
            async with Admin(servers.namesrv, tls=True) as admin:
                await admin.cluster_info()


async def test_mutual_tls_needs_a_client_certificate(tmp_path: Path, pki: Pki) -> None:
    args = (
        "-Dtls.server.mode=enforcing",
        *server_keys(pki),
        "-Dtls.server.need.client.auth=require",
        f"-Dtls.server.trustCertPath={pki.ca_file}",
        # The broker's own registration shows a certificate too.
        f"-Dtls.client.certPath={pki.client_cert}",
        f"-Dtls.client.keyPath={pki.client_key}",
    )
    async with standalone(tmp_path, *args) as servers:
        with_cert = pki.client_context(with_cert=True)
        assert await send_and_pull(servers.namesrv, with_cert, "Mtls", b"m") == b"m"
        with pytest.raises((TlsHandshakeError, ConnectionClosedError)):
            async with Admin(servers.namesrv, tls=pki.client_context()) as admin:
                await admin.cluster_info()


async def test_a_rotated_certificate_is_picked_up_by_the_running_server(
    tmp_path: Path, pki: Pki
) -> None:
    async with standalone(tmp_path, "-Dtls.server.mode=enforcing", *server_keys(pki)) as servers:
        assert await send_and_pull(servers.namesrv, pki.client_context(), "Rot", b"1") == b"1"
        new_ca = pki.rotate()
        new_ca.cert_pem.write_to_path(str(tmp_path / "new-ca.pem"))
        new_ctx = ssl_context(tmp_path / "new-ca.pem")
        # New connections get the new certificate: verified against the new CA only.
        assert await send_and_pull(servers.namesrv, new_ctx, "Rot", b"2") == b"2"
        with pytest.raises(TlsHandshakeError, match="certificate verify failed"):
            await open_connection("127.0.0.1", servers.namesrv_port, tls=pki.client_context())


def ssl_context(ca_file: Path) -> ssl.SSLContext:
    from rocklet.client import tls_context

    return tls_context(ca_file=ca_file)


async def test_hostile_sockets_do_not_stall_the_server(tmp_path: Path, pki: Pki) -> None:
    args = ("-Dtls.server.handshakeTimeoutMillis=300", *server_keys(pki))
    async with standalone(tmp_path, *args) as servers:
        stalled = []
        for opening in (b"", b"\x16\x03\x01\x02\x00", b"\x16" + b"\x00" * 300, b"\x00" * 40):
            reader, writer = await asyncio.open_connection("127.0.0.1", servers.namesrv_port)
            writer.write(opening)
            stalled.append((reader, writer))
        # Meanwhile both kinds of client are served.
        ctx = pki.client_context()
        assert await send_and_pull(servers.namesrv, ctx, "Hostile", b"ok") == b"ok"
        assert await send_and_pull(servers.namesrv, None, "Hostile", b"ok2") == b"ok2"
        for reader, writer in stalled:  # each is closed by the server
            with suppress(ConnectionResetError):
                assert await asyncio.wait_for(reader.read(), TIMEOUT) == b""
            writer.close()


async def test_cli_tools_and_healthcheck_speak_tls(tmp_path: Path, pki: Pki) -> None:
    ports = free_ports(2)
    args = ("-Dtls.server.mode=enforcing", *server_keys(pki))
    async with standalone(tmp_path, *args, ports=ports) as servers:
        ns = servers.namesrv
        ca = ("--tls-ca-file", str(pki.ca_file))
        code, out = await run_cli("produce", "-n", ns, "-t", "CliTls", "--body", "hi", *ca)
        assert code == 0, out
        code, out = await run_cli("consume", "-n", ns, "-t", "CliTls", "--count", "1", *ca)
        assert code == 0 and "hi" in out, out
        code, out = await run_cli("admin", "clusterList", "-n", ns, "--json", *ca)
        assert code == 0 and f"127.0.0.1:{servers.broker_port}" in out, out
        code, out = await run_cli("admin", "clusterList", "-n", ns)
        assert code == 1 and "requires TLS" in out, out
        code, out = await run_cli("produce", "-n", ns, "-t", "CliTls", "--body", "x", "--tls")
        assert code == 1 and "certificate verify failed" in out, out
        pid = servers.procs[0].pid
        assert (await healthcheck(pid))[0] == 0


async def run_cli(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rocklet", *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), TIMEOUT * 2)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_tls_on_without_a_certificate_stops_the_start(tmp_path: Path) -> None:
    proc = await spawn("namesrv", "--port", "0", "-D", "tls.server.mode=enforcing")
    out, _ = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode == 2
    assert "needs tls.server.certPath and tls.server.keyPath" in out.decode()
