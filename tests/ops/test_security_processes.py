"""ACL and TLS together, on real ``rocklet namesrv`` and ``rocklet broker`` processes.

The deployment docs/security.md recommends: both servers in TLS ``enforcing`` mode with
ACL on, the broker signing its registration with an admin account of the name server's
file. Signed clients over TLS are served; an unsigned client over TLS, a stranger's
registration over TLS, and any plain-TCP client are refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rocklet.client import Admin, Message, Producer, PullConsumer
from rocklet.client.errors import BrokerError, ConnectionClosedError
from rocklet.client.pull_consumer import PullStatus
from rocklet.protocol import RemotingCommand, RequestCode
from rocklet.protocol.acl import sign
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.headers import RegisterBrokerRequestHeader
from rocklet.transport.dial import open_connection
from tests.broker.acl_helpers import (
    ADMIN,
    CONSUMER,
    GROUP,
    PRODUCER,
    TOPIC,
    acl_document,
    write_acl,
)
from tests.ops.test_tls_processes import BROKER_READY, _drain, _owned, _stop
from tests.test_cli import LISTENING, TIMEOUT, spawn, wait_for_line
from tests.tlscerts import Pki, make_pki


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def _tls_lines(pki: Pki) -> str:
    return (
        "tls.server.mode=enforcing\n"
        f"tls.server.certPath={pki.server_cert}\ntls.server.keyPath={pki.server_key}\n"
        f"tls.client.trustCertPath={pki.ca_file}\n"
    )


async def test_signed_clients_over_tls_are_served_and_everyone_else_is_refused(
    tmp_path: Path, pki: Pki
) -> None:
    acl_file = tmp_path / "conf" / "plain_acl.yml"
    write_acl(acl_file, acl_document())
    ns_conf = tmp_path / "namesrv.properties"
    ns_conf.write_text("aclEnable=true\n" + _tls_lines(pki))
    ns = await spawn(
        "namesrv", "-c", str(ns_conf), "--port", "0", "--host", "127.0.0.1",
        "--acl-file", str(acl_file),
    )  # fmt: skip
    async with _owned([ns]):
        ns_port = int((await wait_for_line(ns, LISTENING)).group(2))
        namesrv = f"127.0.0.1:{ns_port}"
        conf = tmp_path / "broker.conf"
        conf.write_text(
            f"listenPort=0\nstorePathRootDir={tmp_path / 'store'}\nbrokerIP1=127.0.0.1\n"
            f"mappedFileSizeCommitLog=1048576\naclEnable=true\naclFile={acl_file}\n"
            f"accessKey={ADMIN.access_key}\nsecretKey={ADMIN.secret_key}\n" + _tls_lines(pki)
        )
        broker = await spawn("broker", "-c", str(conf), "--namesrv", namesrv, "--host", "127.0.0.1")
        async with _owned([broker]):
            # It registered: over TLS, signed with the admin account the name server knows.
            assert (await wait_for_line(broker, BROKER_READY)).groups() == ("True", "enforcing")
            drains = [_drain(ns), _drain(broker)]
            ctx = pki.client_context()

            async with Admin(namesrv, tls=ctx, credentials=ADMIN) as admin:
                await admin.create_topic(TOPIC, queue_nums=2)
            async with Producer("sec-pg", namesrv, tls=ctx, credentials=PRODUCER) as producer:
                sent = await producer.send(Message(TOPIC, b"signed and encrypted"))
            async with PullConsumer(GROUP, namesrv, tls=ctx, credentials=CONSUMER) as consumer:
                found = await consumer.pull(sent.message_queue, sent.queue_offset, 1)
            assert found.status is PullStatus.FOUND
            assert [m.body for m in found.messages] == [b"signed and encrypted"]

            # TLS alone is not enough: an unsigned send is refused by the broker's ACL.
            with pytest.raises(BrokerError, match="No accessKey is configured"):
                async with Producer("anon-pg", namesrv, tls=ctx, retry_times=0) as anon:
                    await anon.send(Message(TOPIC, b"unsigned"))

            # Nor can a stranger who speaks TLS register a broker of their own.
            conn = await open_connection("127.0.0.1", ns_port, tls=ctx)
            header = RegisterBrokerRequestHeader(
                broker_name="broker-evil",
                broker_addr="127.0.0.1:1",
                cluster_name="DefaultCluster",
                ha_server_addr="",
                broker_id=0,
            )
            hijack = RemotingCommand(
                RequestCode.REGISTER_BROKER, ext_fields=header.to_ext_fields(), body=b"{}"
            )
            answer = await conn.request(hijack, TIMEOUT)
            assert answer.code == ResponseCode.SYSTEM_ERROR
            assert "No accessKey is configured" in (answer.remark or "")
            # ... signed with an account that is not an admin of the name server's file.
            answer = await conn.request(sign(hijack, PRODUCER), TIMEOUT)
            assert answer.code == ResponseCode.SYSTEM_ERROR
            assert "Need admin permission" in (answer.remark or "")
            await conn.close()
            async with Admin(namesrv, tls=ctx) as reader:  # lookups stay open
                info = await reader.cluster_info()
            assert set(info.broker_addr_table) == {"broker-a"}

            # And a plain-TCP client gets nowhere, signed or not.
            with pytest.raises(ConnectionClosedError, match="requires TLS"):
                async with Admin(namesrv, credentials=ADMIN) as plain:
                    await plain.cluster_info()
            await _stop([ns, broker])
            for drain in drains:
                await drain
