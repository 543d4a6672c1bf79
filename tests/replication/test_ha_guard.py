"""Who may follow a master: allow-list, handshake and TLS on the HA port, with real
processes and hostile peers on loopback (docs/replication.md, "Who may follow").
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import ssl
from functools import partial
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from rocklet.broker.config import BrokerConfig, BrokerRole, ConfigError
from rocklet.broker.ha.guard import AllowList, RefusalLog
from rocklet.broker.ha.handshake import (
    ACCEPTED,
    MAC_SIZE,
    MAGIC,
    NONCE_SIZE,
    REFUSED,
    auth_message,
    master_mac,
)
from rocklet.broker.ha.wire import HEADER, HEADER_SIZE, REPORT
from rocklet.protocol.acl import Credentials, sign
from rocklet.protocol.bodies.cluster import KVTable
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import iter_messages
from rocklet.transport.dial import open_connection
from tests.adversity.procs import BrokerProcess, running_broker
from tests.broker.test_send_pull import cpp_send, pull
from tests.replication.group_nodes import NamesrvProcess
from tests.replication.nodes import (
    SlaveProcess,
    commitlog_bytes,
    ha_port,
    master_props,
    running_master,
    slave_props,
    until,
)
from tests.replication.test_ha_handshake import impostor_master
from tests.tlscerts import make_pki

TOPIC = "GuardT"
SLAVE = Credentials("haslave01", "haslave-secret")
READER = Credentials("reader01", "reader-secret")
_ACL = f"""\
accounts:
  - accessKey: {SLAVE.access_key}
    secretKey: {SLAVE.secret_key}
    admin: true
  - accessKey: {READER.access_key}
    secretKey: {READER.secret_key}
    admin: false
    defaultTopicPerm: SUB
"""
#: How long a refused connection may stay open: the master closes it "at once".
_CLOSE_S = 5.0


async def _request(
    addr: str,
    cmd: RemotingCommand,
    *,
    tls: ssl.SSLContext | None = None,
    creds: Credentials | None = None,
) -> RemotingCommand:
    host, _, port = addr.rpartition(":")
    async with await open_connection(host, int(port), tls=tls) as conn:
        return await conn.request(cmd if creds is None else sign(cmd, creds), 10)


async def _status(addr: str, **how: object) -> dict[str, str]:
    resp = await _request(addr, RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO), **how)  # type: ignore[arg-type]
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return dict(KVTable.from_json(resp.body).table)


async def _send(addr: str, n: int, **how: object) -> None:
    for i in range(n):
        cmd = cpp_send(TOPIC, f"g{i:05d}".encode().ljust(600, b"."), queue_id=i % 2)
        resp = await _request(addr, cmd, **how)  # type: ignore[arg-type]
        assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)


async def _caught_up(master: str, slave: str, **how: object) -> int:
    want = int((await _status(master, **how))["commitLogMaxOffset"])

    async def there() -> bool:
        return int((await _status(slave))["commitLogMaxOffset"]) >= want

    await until(f"the slave reaching {want}", there)
    return want


async def _rest(reader: asyncio.StreamReader, timeout_s: float = _CLOSE_S) -> bytes:
    """Everything the master sends until it closes (within ``timeout_s``).

    A refused peer whose bytes the master never read is reset rather than closed
    (the kernel's answer to a close with unread data): that counts as closed too.
    """
    got = bytearray()
    async with asyncio.timeout(timeout_s):
        with contextlib.suppress(ConnectionResetError):
            while chunk := await reader.read(65536):
                got += chunk
    return bytes(got)


async def _hello(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    """Open a handshake; the master's nonce."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(MAGIC)
    head = await reader.readexactly(len(MAGIC) + NONCE_SIZE)
    assert head[: len(MAGIC)] == MAGIC
    return reader, writer, head[len(MAGIC) :]


def _auth(creds: Credentials, nonce: bytes) -> bytes:
    """An AUTH message for the master's ``nonce``, with a fresh slave nonce."""
    return auth_message(creds, nonce, secrets.token_bytes(NONCE_SIZE))


async def _refused_after(port: int, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(payload)
    try:
        return await _rest(reader)
    finally:
        writer.close()


async def _refusals(master: BrokerProcess, reason: str) -> int:
    return sum("HA connection refused" in line and reason in line for line in master.lines)


async def _signature_refusals(master: BrokerProcess, want: int) -> bool:
    # The log reaches us through a pipe, after the socket's close: wait for it.
    return await _refusals(master, "wrong signature") == want


async def test_acl_master_serves_only_a_slave_that_proves_its_account(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(_ACL)
    props = master_props(aclEnable="true", aclFile=str(acl))
    async with running_master(tmp_path / "m", props) as master:
        port = await ha_port(master)
        # A peer that starts a handshake and stalls (closed after 10 s; checked last).
        idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
        idle_writer.write(MAGIC[:3])
        await _send(master.broker_addr, 60, creds=SLAVE)

        # A stranger speaking RocketMQ's wire (an offset report): nothing, closed.
        assert await _refused_after(port, REPORT.pack(0)) == b""
        await until("the refusal's WARNING", lambda: _refusals(master, "offset 0"))
        assert any("127.0.0.1:" in ln for ln in master.lines if "HA connection refused" in ln)
        # Garbage, and a handshake whose access key length is absurd.
        assert await _refused_after(port, bytes(range(7, 107))) == b""
        reader, writer, _ = await _hello(port)
        writer.write(b"\xff\xff" + b"k" * 100)
        assert await _rest(reader) == b""
        writer.close()
        await until("the length refusal", lambda: _refusals(master, "length 65535"))

        # A peer midway through the handshake is no slave: SYNC_MASTER would not count it.
        reader, writer, nonce = await _hello(port)
        assert (await _status(master.broker_addr, creds=SLAVE))["haConnectedSlaves"] == "0"
        # Wrong secret, a non-admin account, an unknown account: refused, then closed.
        writer.write(_auth(Credentials(SLAVE.access_key, "not-the-secret"), nonce))
        assert await _rest(reader) == REFUSED
        writer.close()
        for creds, why in ((READER, "not admin"), (Credentials("nobody01", "x" * 8), "no ACL")):
            reader, writer, nonce = await _hello(port)
            writer.write(_auth(creds, nonce))
            assert await _rest(reader) == REFUSED
            writer.close()
            await until(f"the {why} refusal", partial(_refusals, master, why))
        await until("the wrong signature's refusal", partial(_signature_refusals, master, 1))

        # The right account gets the master's proof, then the commitlog...
        reader, writer, nonce = await _hello(port)
        slave_nonce = secrets.token_bytes(NONCE_SIZE)
        proof = auth_message(SLAVE, nonce, slave_nonce)
        writer.write(proof)
        assert await reader.readexactly(1) == ACCEPTED
        mac = await reader.readexactly(MAC_SIZE)
        assert mac == master_mac(SLAVE.secret_key, nonce, slave_nonce, SLAVE.access_key)
        writer.write(REPORT.pack(0))
        offset, size = HEADER.unpack(await reader.readexactly(HEADER_SIZE))
        assert (offset, size > 0) == (0, True)
        writer.close()
        # ... but its recorded proof is worth nothing on another connection.
        reader, writer, _ = await _hello(port)
        writer.write(proof)
        assert await _rest(reader) == REFUSED
        writer.close()
        await until("the replay's refusal", partial(_signature_refusals, master, 2))

        # A Rocklet slave configured with the account follows, and its metadata sync
        # (signed requests to the master's ACL-checked port) brings the topic.
        slave = SlaveProcess(
            tmp_path / "s",
            master.namesrv_addr,
            slave_props(
                haAuthEnable="true", accessKey=SLAVE.access_key, secretKey=SLAVE.secret_key
            ),
        )
        try:
            await slave.start()
            end = await _caught_up(master.broker_addr, slave.broker_addr, creds=SLAVE)
            assert commitlog_bytes(slave.store, end) == commitlog_bytes(master.store, end)
            await _send(master.broker_addr, 20, creds=SLAVE)
            end = await _caught_up(master.broker_addr, slave.broker_addr, creds=SLAVE)
            assert commitlog_bytes(slave.store, end) == commitlog_bytes(master.store, end)
            resp = await _request(slave.broker_addr, pull(TOPIC, 0, 0))
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            assert len(list(iter_messages(resp.body))) > 0
            assert not any("master refused the sync" in ln for ln in slave.lines)
            status = await _status(master.broker_addr, creds=SLAVE)
            assert status["haConnectedSlaves"] == "1"
            assert any("slave authenticated" in ln for ln in master.lines)
        finally:
            await slave.close()
        assert await _rest(idle_reader, 15) == b""
        idle_writer.close()
        await until("the stall's refusal", lambda: _refusals(master, "no handshake in time"))


async def test_master_refuses_addresses_outside_the_allow_list(tmp_path: Path) -> None:
    props = master_props(haAllowedSlaves="10.9.9.0/24, slave-b.invalid")
    async with running_master(tmp_path / "m", props) as master:
        port = await ha_port(master)
        await _send(master.broker_addr, 5)
        assert await _refused_after(port, REPORT.pack(0)) == b""
        await until("the WARNING", lambda: _refusals(master, "not in haAllowedSlaves"))
        line = next(ln for ln in master.lines if "not in haAllowedSlaves" in ln)
        assert "127.0.0.1:" in line
        # Bound to loopback with a list the operator wrote: no "open port" warning.
        assert not any("sends the commitlog to anyone" in ln for ln in master.lines)


async def test_default_master_on_every_interface_warns(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    async with running_broker(tmp_path / "m", master_props(), ("--host", "0.0.0.0")) as master:
        await ha_port(master)
        await until(
            "the open-port WARNING",
            lambda: any("sends the commitlog to anyone" in ln for ln in master.lines),
        )
        line = next(ln for ln in master.lines if "sends the commitlog to anyone" in ln)
        assert "loopback,private" in line


async def test_tls_acl_master_serves_a_tls_slave_and_refuses_plaintext(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(_ACL)
    tls = {
        "tls.server.mode": "enforcing",
        "tls.server.certPath": str(pki.server_cert),
        "tls.server.keyPath": str(pki.server_key),
        "tls.client.trustCertPath": str(pki.ca_file),
    }
    ctx = pki.client_context()
    props = master_props(aclEnable="true", aclFile=str(acl), **tls)
    async with running_master(tmp_path / "m", props) as master:
        port = await ha_port(master)
        await _send(master.broker_addr, 30, tls=ctx, creds=SLAVE)
        # RocketMQ's plaintext wire against the TLS port: nothing back, closed, logged.
        assert await _refused_after(port, REPORT.pack(0)) == b""
        await until("the TLS refusal", lambda: _refusals(master, "TLS handshake failed"))
        # TLS, then the handshake, then the data; the metadata sync signed, over TLS.
        slave_conf = {
            "tls.enable": "true",
            "tls.client.trustCertPath": str(pki.ca_file),
            "haAuthEnable": "true",
            "accessKey": SLAVE.access_key,
            "secretKey": SLAVE.secret_key,
        }
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props(**slave_conf))
        try:
            await slave.start()
            end = await _caught_up(master.broker_addr, slave.broker_addr, tls=ctx, creds=SLAVE)
            assert commitlog_bytes(slave.store, end) == commitlog_bytes(master.store, end)
            resp = await _request(slave.broker_addr, pull(TOPIC, 1, 0))
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            assert any("slave authenticated" in ln for ln in master.lines)
        finally:
            await slave.close()


def test_allow_list_entries_and_config_checks() -> None:
    async def check() -> None:
        default = AllowList(None)
        assert await default.allows("127.0.0.1") and await default.allows("::1")
        assert await default.allows("192.168.3.4") and await default.allows("::ffff:10.1.2.3")
        assert not await default.allows("8.8.8.8") and not await default.allows("2001:db8::1")
        listed = AllowList("10.0.0.5, 2001:db8::/32, localhost")
        assert await listed.allows("10.0.0.5") and not await listed.allows("10.0.0.6")
        assert await listed.allows("2001:db8::7")
        assert await listed.allows("127.0.0.1")  # by the name, resolved when asked
        assert await AllowList("*").allows("8.8.8.8")

    asyncio.run(check())
    for bad in ("10.0.0.0/40", "a b", "10.0.0.1,,10.0.0.2", "x/y"):
        with pytest.raises(ConfigError, match="haAllowedSlaves"):
            BrokerConfig(ha_allowed_slaves=bad)
    with pytest.raises(ConfigError, match="needs accessKey"):
        BrokerConfig(broker_id=1, broker_role=BrokerRole.SLAVE, ha_auth_enable=True)
    with pytest.raises(ConfigError, match="needs aclEnable"):
        BrokerConfig(ha_auth_enable=True)


def test_refusals_are_logged_at_most_a_limit_a_minute() -> None:
    now = [0.0]
    refusals = RefusalLog(limit=3, clock=lambda: now[0])
    with capture_logs() as logs:
        for i in range(10):
            refusals.warn("HA connection refused", peer=f"10.0.0.{i}:1")
        assert [e["peer"] for e in logs] == ["10.0.0.0:1", "10.0.0.1:1", "10.0.0.2:1"]
        assert refusals.suppressed == 7
        now[0] = 61.0
        refusals.warn("HA connection refused", peer="10.0.0.99:1")
    assert [e.get("count") for e in logs[3:]] == [7, None]
    assert logs[-1]["peer"] == "10.0.0.99:1" and refusals.suppressed == 0


async def _update_config(addr: str, body: bytes) -> RemotingCommand:
    return await _request(addr, RemotingCommand(RequestCode.UPDATE_BROKER_CONFIG, body=body))


async def test_a_new_allow_list_applies_at_once_and_cuts_off_who_it_leaves_out(
    tmp_path: Path,
) -> None:
    async with running_master(tmp_path / "m", master_props(haAllowedSlaves="loopback")) as master:
        await ha_port(master)
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props())
        try:
            await slave.start()

            async def slaves(count: str) -> bool:
                return (await _status(master.broker_addr)).get("haConnectedSlaves") == count

            await until("the slave connecting", lambda: slaves("1"))
            await _send(master.broker_addr, 3)
            before = await _caught_up(master.broker_addr, slave.broker_addr)

            # A bad entry refuses the whole update, naming the key; nothing changes.
            bad = await _update_config(master.broker_addr, b"haAllowedSlaves=10.0.0.0/99\n")
            assert bad.code == ResponseCode.SYSTEM_ERROR and "haAllowedSlaves" in (bad.remark or "")
            assert (await _status(master.broker_addr))["haConnectedSlaves"] == "1"

            # Loopback off the list: the connected slave is cut off, and stays off.
            done = await _update_config(master.broker_addr, b"haAllowedSlaves=10.9.9.0/24\n")
            assert done.code == ResponseCode.SUCCESS, done.remark
            assert "haAllowedSlaves" not in (done.remark or "")  # not "after a restart"
            await until("the slave cut off", lambda: slaves("0"))
            await until("its reconnection refused", lambda: _refusals(master, "haAllowedSlaves"))
            await _send(master.broker_addr, 3)
            assert int((await _status(slave.broker_addr))["commitLogMaxOffset"]) == before

            # Back on the list: it reconnects and catches up, without a restart.
            done = await _update_config(master.broker_addr, b"haAllowedSlaves=loopback\n")
            assert done.code == ResponseCode.SUCCESS, done.remark
            await until("the slave back", lambda: slaves("1"))
            assert await _caught_up(master.broker_addr, slave.broker_addr) > before
            saved = (tmp_path / "m" / "broker.conf").read_text(encoding="utf-8")
            assert "haAllowedSlaves=loopback" in saved
        finally:
            await slave.close()


async def test_slave_refuses_an_impostor_master_and_appends_nothing(tmp_path: Path) -> None:
    # A slave told to follow a fake master (haMasterAddress) that accepts its account
    # but answers with a MAC under another secret, then sends a frame of "data".
    namesrv = NamesrvProcess(tmp_path / "ns")
    async with impostor_master("wrong secret") as (port, after):
        conf = slave_props(
            haAuthEnable="true",
            accessKey=SLAVE.access_key,
            secretKey=SLAVE.secret_key,
            haMasterAddress=f"127.0.0.1:{port}",
        )
        slave = SlaveProcess(tmp_path / "s", "", conf)
        try:
            await namesrv.start()
            slave._namesrv = namesrv.namesrv_addr
            await slave.start()
            # Two connections: the refusal is reported, and retried, every time.
            for _ in range(2):
                assert await asyncio.wait_for(after.get(), 30) == b""  # no offset report

            def said_why() -> bool:
                return any(
                    "HA handshake with the master failed" in ln
                    and f"the peer at 127.0.0.1:{port} could not prove" in ln
                    for ln in slave.lines
                )

            await until("the slave's WARNING", said_why)
            status = await _status(slave.broker_addr)
            assert status["commitLogMaxOffset"] == "0"
            assert (status["haConnected"], status["haMasterOffset"]) == ("false", "-1")
            segments = sorted((slave.store / "commitlog").glob("*"))
            assert all(not path.read_bytes().strip(b"\0") for path in segments)
        finally:
            await slave.close()
            await namesrv.kill9()


async def test_slave_with_ha_tls_off_follows_a_plain_ha_port(tmp_path: Path) -> None:
    # A master in permissive mode: its name server and broker port take TLS, its HA
    # port is plain TCP (as a RocketMQ master's). A slave with tls.enable=true reaches
    # the name server over TLS; its HA connection needs haTlsEnable=false.
    pki = make_pki(tmp_path / "pki")
    tls = {
        "tls.server.mode": "permissive",
        "tls.server.certPath": str(pki.server_cert),
        "tls.server.keyPath": str(pki.server_key),
    }
    slave_tls = {"tls.enable": "true", "tls.client.trustCertPath": str(pki.ca_file)}
    async with running_master(tmp_path / "m", master_props(**tls)) as master:
        await ha_port(master)
        await _send(master.broker_addr, 40)
        # The default (TLS as tls.enable) fails against the plain port ("[SSL:
        # WRONG_VERSION_NUMBER]": the master read its ClientHello as offsets): no data.
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props(**slave_tls))
        try:
            await slave.start()
            await until(
                "the failed TLS handshake",
                lambda: any(
                    "cannot reach the master's HA port" in ln and "SSL" in ln for ln in slave.lines
                ),
            )
            assert int((await _status(slave.broker_addr))["commitLogMaxOffset"]) == 0
        finally:
            await slave.close()
        slave = SlaveProcess(
            tmp_path / "s", master.namesrv_addr, slave_props(haTlsEnable="false", **slave_tls)
        )
        try:
            await slave.start()
            end = await _caught_up(master.broker_addr, slave.broker_addr)
            assert commitlog_bytes(slave.store, end) == commitlog_bytes(master.store, end)
            await _send(master.broker_addr, 10)
            end = await _caught_up(master.broker_addr, slave.broker_addr)
            assert commitlog_bytes(slave.store, end) == commitlog_bytes(master.store, end)
            # (It learned the HA address from its REGISTER_BROKER answer: over TLS.)
        finally:
            await slave.close()


async def test_slave_without_the_client_certificate_a_master_requires_says_so(
    tmp_path: Path,
) -> None:
    # TLS 1.3 lets a client finish its handshake before the server checks its
    # certificate, so the refusal reaches the slave as a bare close: it used to log
    # "HA connection lost ... 0 bytes read on a total of 12 expected bytes", every second.
    pki = make_pki(tmp_path / "pki")
    tls = {
        "tls.server.mode": "enforcing",
        "tls.server.certPath": str(pki.server_cert),
        "tls.server.keyPath": str(pki.server_key),
        "tls.server.trustCertPath": str(pki.ca_file),
        "tls.server.need.client.auth": "require",
    }
    async with running_master(tmp_path / "m", master_props(**tls)) as master:
        port = await ha_port(master)
        slave_conf = {
            "tls.enable": "true",
            "tls.client.trustCertPath": str(pki.ca_file),
            "haMasterAddress": f"127.0.0.1:{port}",
        }
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props(**slave_conf))
        try:
            await slave.start()
            # Three refusals on the master's side: the slave retried twice meanwhile.
            await until("three refusals", lambda: _refused_at_least(master, 3))
            said = [ln for ln in slave.lines if "closed the HA connection" in ln]
            assert len(said) == 1, said
            assert "HA connection refused" in said[0] and "client certificate" in said[0]
            assert not any("HA connection lost" in ln for ln in slave.lines)
            assert sum("following the master" in ln for ln in slave.lines) == 1
        finally:
            await slave.close()


async def _refused_at_least(master: BrokerProcess, count: int) -> bool:
    return await _refusals(master, "did not return a certificate") >= count
