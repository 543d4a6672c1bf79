"""RocketMQ's "VIP" port (listenPort - 2): the same requests, checks and answers.

A RocketMQ slave fetches its master's metadata there, so a Rocklet master must answer
on it; it must not be a way around the ACL either.
"""

from __future__ import annotations

import socket
from pathlib import Path

from rocklet.broker.app import Broker
from rocklet.client.instance import ClientInstance
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.dial import open_connection
from tests.broker.acl_helpers import ADMIN, acl_document, raw_request, write_acl
from tests.cluster import running_cluster, small_broker_config


async def _ask(port: int, code: int) -> RemotingCommand:
    async with await open_connection("127.0.0.1", port) as conn:
        return await conn.request(RemotingCommand(code), 5)


async def test_vip_port_serves_the_same_requests(tmp_path: Path) -> None:
    async with running_cluster(tmp_path, fast_listen_port=0) as cluster:
        vip = cluster.broker.fast_port
        assert vip is not None and vip != cluster.broker.port
        main = await _ask(cluster.broker.port, RequestCode.GET_ALL_TOPIC_CONFIG)
        fast = await _ask(vip, RequestCode.GET_ALL_TOPIC_CONFIG)
        assert fast.code == main.code == ResponseCode.SUCCESS
        assert fast.body == main.body


async def test_vip_port_is_listen_port_minus_two_and_a_taken_one_is_skipped(
    tmp_path: Path,
) -> None:
    # Hold a port P - 2 so the broker on P finds its VIP port taken: it starts anyway.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        config = small_broker_config(tmp_path, None, listen_port=taken + 2)
        broker = await Broker.start(config, host="127.0.0.1")
        try:
            assert broker.fast_port is None
        finally:
            await broker.stop()
    config = small_broker_config(tmp_path, None, listen_port=taken + 2)
    broker = await Broker.start(config, host="127.0.0.1")
    try:
        assert broker.fast_port == taken
        resp = await _ask(taken, RequestCode.GET_BROKER_RUNTIME_INFO)
        assert resp.code == ResponseCode.SUCCESS
    finally:
        await broker.stop()


async def test_vip_port_checks_the_acl_like_the_main_port(tmp_path: Path) -> None:
    acl_file = tmp_path / "conf" / "plain_acl.yml"
    write_acl(acl_file, acl_document())
    async with running_cluster(
        tmp_path / "store", acl_enable=True, acl_file=acl_file, fast_listen_port=0
    ) as cluster:
        vip = cluster.broker.fast_port
        assert vip is not None
        unsigned = await _ask(vip, RequestCode.GET_ALL_TOPIC_CONFIG)
        assert unsigned.code != ResponseCode.SUCCESS
        async with ClientInstance(cluster.namesrv_addr, credentials=ADMIN) as admin:
            signed = await raw_request(admin, f"127.0.0.1:{vip}", RequestCode.GET_ALL_TOPIC_CONFIG)
        assert signed.code == ResponseCode.SUCCESS, signed.remark
