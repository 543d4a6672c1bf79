"""Name server with ACL on (Rocklet only): signed registrations pass, strangers cannot
hijack or erase routes, lookups stay open."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from rocklet.broker.app import Broker
from rocklet.broker.config import NamesrvConfig
from rocklet.broker.namesrv import NamesrvServer
from rocklet.client import Admin, Credentials
from rocklet.client.instance import ClientInstance
from rocklet.protocol.bodies.register import RegisterBrokerBody
from rocklet.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.namesrv import RegisterBrokerRequestHeader
from rocklet.protocol.message import body_crc
from tests.broker.acl_helpers import ADMIN, PRODUCER, acl_document, write_acl
from tests.cluster import small_broker_config

#: The broker's own account toward the name server (admin there).
BROKER_CREDS = Credentials("broker-a-key", "broker-a-secret")


@asynccontextmanager
async def guarded_namesrv(tmp_path: Path) -> AsyncIterator[NamesrvServer]:
    acl_file = tmp_path / "ns" / "plain_acl.yml"
    document = acl_document()
    document["accounts"].append(
        {"accessKey": BROKER_CREDS.access_key, "secretKey": BROKER_CREDS.secret_key, "admin": True}
    )
    write_acl(acl_file, document)
    config = NamesrvConfig(acl_enable=True, acl_file=acl_file)
    namesrv = await NamesrvServer.start("127.0.0.1", 0, config=config)
    try:
        yield namesrv
    finally:
        await namesrv.stop()


def _hijack(topic: str) -> RemotingCommand:
    """A stranger's REGISTER_BROKER claiming ``topic`` for an address it controls."""
    wrapper = TopicConfigSerializeWrapper(topic_config_table={topic: TopicConfig(topic, 4, 4)})
    data = RegisterBrokerBody(wrapper).to_json()
    header = RegisterBrokerRequestHeader(
        broker_name="evil",
        broker_addr="127.0.0.1:1",
        cluster_name="DefaultCluster",
        ha_server_addr="127.0.0.1:2",
        broker_id=0,
        body_crc32=body_crc(data),
    )
    return RemotingCommand(
        RequestCode.REGISTER_BROKER, ext_fields=header.to_ext_fields(), body=data
    )


async def test_signed_broker_registers_and_strangers_are_refused(tmp_path: Path) -> None:
    async with guarded_namesrv(tmp_path) as namesrv:
        addr = f"127.0.0.1:{namesrv.port}"
        config = dataclasses.replace(
            small_broker_config(tmp_path / "store", addr),
            access_key=BROKER_CREDS.access_key,
            secret_key=BROKER_CREDS.secret_key,
        )
        broker = await Broker.start(config, host="127.0.0.1")
        try:
            async with Admin(addr, instance_name="ns-admin") as anonymous:
                # Lookups stay open: an unsigned client sees the broker.
                assert "broker-a" in (await anonymous.cluster_info()).broker_addr_table
            async with ClientInstance(addr) as stranger:
                hijack = await stranger.invoke(addr, _hijack("orders"))
                assert hijack.code == ResponseCode.SYSTEM_ERROR
                assert "No accessKey is configured" in (hijack.remark or "")
                erase = await stranger.invoke(
                    addr,
                    RemotingCommand(
                        RequestCode.DELETE_TOPIC_IN_NAMESRV, ext_fields={"topic": "TBW102"}
                    ),
                )
                assert "No accessKey is configured" in (erase.remark or "")
                kv = await stranger.invoke(
                    addr,
                    RemotingCommand(
                        RequestCode.PUT_KV_CONFIG,
                        ext_fields={"namespace": "ORDER_TOPIC_CONFIG", "key": "t", "value": "x"},
                    ),
                )
                assert kv.code == ResponseCode.SYSTEM_ERROR
            async with ClientInstance(addr, credentials=PRODUCER) as not_admin:
                signed_hijack = await not_admin.invoke(addr, _hijack("orders"))
                assert "Need admin permission for request code=103" in (signed_hijack.remark or "")
            assert "evil" not in namesrv.routes.cluster_info().broker_addr_table
            assert namesrv.routes.get_topic_route("TBW102") is not None
            async with ClientInstance(addr, credentials=ADMIN) as admin:
                # An admin account may delete (a topic nobody serves: harmless here).
                deleted = await admin.invoke(
                    addr,
                    RemotingCommand(
                        RequestCode.DELETE_TOPIC_IN_NAMESRV, ext_fields={"topic": "gone"}
                    ),
                )
                assert deleted.code == ResponseCode.SUCCESS
        finally:
            await broker.stop()


async def test_a_broker_without_credentials_is_not_registered(tmp_path: Path) -> None:
    async with guarded_namesrv(tmp_path) as namesrv:
        config = small_broker_config(tmp_path / "store", f"127.0.0.1:{namesrv.port}")
        broker = await Broker.start(config, host="127.0.0.1")
        try:
            assert "broker-a" not in namesrv.routes.cluster_info().broker_addr_table
        finally:
            await broker.stop()
