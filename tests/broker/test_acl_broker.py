"""Plain ACL on a real broker (loopback, port 0), driven by the SDK with and without credentials.

Accepted and refused sends, pulls and offset commits; admin-only requests refused to
ordinary accounts (the topic keeps serving); the ACL admin requests 50-54 editing the
file durably; secret rotation picked up by the file watcher; no secret in the logs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import structlog
import yaml

from rocklet.client import Admin, Message, Producer, PullConsumer
from rocklet.client.errors import BrokerError
from rocklet.client.instance import ClientInstance
from rocklet.protocol.acl import Credentials
from rocklet.protocol.codes import RequestCode, ResponseCode
from tests.broker.acl_helpers import (
    ADMIN,
    CONSUMER,
    GROUP,
    PRODUCER,
    TOPIC,
    acl_document,
    raw_request,
    write_acl,
)
from tests.cluster import Cluster, running_cluster

RELOAD_WAIT_S = 10.0
_ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"


@asynccontextmanager
async def acl_cluster(tmp_path: Path) -> AsyncIterator[tuple[Cluster, Path]]:
    acl_file = tmp_path / "home" / "conf" / "plain_acl.yml"
    write_acl(acl_file, acl_document())
    async with running_cluster(tmp_path / "store", acl_enable=True, acl_file=acl_file) as cluster:
        async with Admin(cluster.namesrv_addr, instance_name="admin", credentials=ADMIN) as admin:
            await admin.create_topic(TOPIC, queue_nums=2)
        yield cluster, acl_file


async def _send(cluster: Cluster, creds: Credentials | None, topic: str = TOPIC) -> None:
    name = "p-" + (creds.access_key if creds else "anon")
    async with Producer(
        "acl-pg", cluster.namesrv_addr, instance_name=name, credentials=creds, retry_times=0
    ) as producer:
        await producer.send(Message(topic, b"hello"))


async def test_signed_sends_pass_and_others_are_refused_with_rocketmqs_remarks(
    tmp_path: Path,
) -> None:
    async with acl_cluster(tmp_path) as (cluster, _):
        await _send(cluster, PRODUCER)
        with pytest.raises(BrokerError) as unsigned:
            await _send(cluster, None)
        assert unsigned.value.code == ResponseCode.SYSTEM_ERROR
        assert str(unsigned.value.remark).startswith(
            f"{_ACCESS_PREFIX}No accessKey is configured, "
            "org.apache.rocketmq.acl.plain.PlainPermissionManager.validate"
        )
        with pytest.raises(BrokerError, match="Check signature failed for accessKey=producer1"):
            await _send(cluster, Credentials(PRODUCER.access_key, "not-the-secret"))
        with pytest.raises(BrokerError, match="No acl config for nobody-at-all"):
            await _send(cluster, Credentials("nobody-at-all", "whatever-secret"))
        with pytest.raises(BrokerError, match="No default permission for topic:acl-topic"):
            await _send(cluster, CONSUMER)  # SUB only


_ACCESS_PREFIX = f"{_ACL_EXCEPTION}: "


async def test_pulls_and_offset_commits_need_sub_on_topic_and_group(tmp_path: Path) -> None:
    async with acl_cluster(tmp_path) as (cluster, _):
        await _send(cluster, PRODUCER)
        async with PullConsumer(
            GROUP, cluster.namesrv_addr, instance_name="c-ok", credentials=CONSUMER
        ) as consumer:
            found = []
            for mq in await consumer.fetch_queues(TOPIC):
                result = await consumer.pull(mq, 0)
                found.extend(result.messages)
                await consumer.commit(mq, result.next_begin_offset)
            assert [m.body for m in found] == [b"hello"]
        async with PullConsumer(
            "other-group", cluster.namesrv_addr, instance_name="c-bad", credentials=CONSUMER
        ) as stranger:
            mq = (await stranger.fetch_queues(TOPIC))[0]
            with pytest.raises(BrokerError, match="No default permission for group:other-group"):
                await stranger.pull(mq, 0)


async def test_admin_requests_are_refused_to_ordinary_accounts_and_the_topic_keeps_serving(
    tmp_path: Path,
) -> None:
    async with acl_cluster(tmp_path) as (cluster, _):
        broker = cluster.broker.addr
        async with Admin(cluster.namesrv_addr, instance_name="a-p", credentials=PRODUCER) as admin:
            with pytest.raises(BrokerError, match="Need admin permission for request code=215"):
                await admin.delete_topic(TOPIC)
            with pytest.raises(BrokerError, match="Need admin permission for request code=17"):
                await admin.create_topic("other-topic", queue_nums=1)
        instance = ClientInstance(cluster.namesrv_addr, credentials=PRODUCER)
        async with instance:
            config = await raw_request(
                instance,
                broker,
                RequestCode.UPDATE_BROKER_CONFIG,
                body=b"autoCreateTopicEnable=false",
            )
            assert config.code == ResponseCode.SYSTEM_ERROR
            assert "Need admin permission for request code=25" in (config.remark or "")
            for code in (
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                RequestCode.DELETE_SUBSCRIPTIONGROUP,
                RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,  # Rocklet: ACL admin is admin-only
            ):
                answer = await raw_request(instance, broker, code, {"groupName": "g"})
                assert f"Need admin permission for request code={int(code)}" in (
                    answer.remark or ""
                )
        await _send(cluster, PRODUCER)  # the topic is still there and writable


async def test_the_acl_admin_requests_edit_the_file_durably(tmp_path: Path) -> None:
    started_ms = int(time.time() * 1000)
    async with acl_cluster(tmp_path) as (cluster, acl_file):
        broker = cluster.broker.addr
        async with ClientInstance(cluster.namesrv_addr, credentials=ADMIN) as admin:
            # Before any edit: counter 0, stamped with the file's load time (RocketMQ's).
            loaded = await raw_request(admin, broker, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
            first = json.loads(loaded.ext_fields["version"])
            assert first["counter"] == 0
            assert started_ms <= first["timestamp"] <= int(time.time() * 1000)
            fields = {
                "accessKey": "newcomer1",
                "secretKey": "newcomer-secret",
                "admin": "false",
                "defaultTopicPerm": "PUB",
                "topicPerms": f"{TOPIC}=PUB,denied-topic=DENY",
            }
            created = await raw_request(
                admin, broker, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields
            )
            assert created.code == ResponseCode.SUCCESS, created.remark
            document = yaml.safe_load(acl_file.read_text())
            newcomer = next(a for a in document["accounts"] if a["accessKey"] == "newcomer1")
            assert newcomer["topicPerms"] == [f"{TOPIC}=PUB", "denied-topic=DENY"]
            assert document["dataVersion"][0]["counter"] == 1
            assert acl_file.stat().st_mode & 0o777 == 0o600  # the mode survives the rewrite
            await _send(cluster, Credentials("newcomer1", "newcomer-secret"))  # at once

            bad = dict(fields, secretKey="short")
            refused = await raw_request(
                admin, broker, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, bad
            )
            assert refused.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
            assert "short" not in (refused.remark or "")

            white = await raw_request(
                admin,
                broker,
                RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                {"globalWhiteAddrs": "10.10.*.*,192.168.0.1"},
            )
            assert white.code == ResponseCode.SUCCESS, white.remark
            assert yaml.safe_load(acl_file.read_text())["globalWhiteRemoteAddresses"] == [
                "10.10.*.*",
                "192.168.0.1",
            ]

            versions = await raw_request(admin, broker, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
            assert versions.code == ResponseCode.SUCCESS
            assert '"counter":2' in versions.ext_fields["version"]
            assert str(acl_file) in versions.ext_fields["allAclFileVersion"]
            assert versions.ext_fields["brokerAddr"] == broker

            listing = await raw_request(admin, broker, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
            body = yaml.safe_load(listing.body)  # JSON is YAML
            assert "newcomer1" in {a["accessKey"] for a in body["plainAccessConfigs"]}
            assert body["globalWhiteAddrs"] == ["10.10.*.*", "192.168.0.1"]

            deleted = await raw_request(
                admin, broker, RequestCode.DELETE_ACL_CONFIG, {"accessKey": "newcomer1"}
            )
            assert deleted.code == ResponseCode.SUCCESS
            again = await raw_request(
                admin, broker, RequestCode.DELETE_ACL_CONFIG, {"accessKey": "newcomer1"}
            )
            assert again.code == ResponseCode.DELETE_ACL_CONFIG_FAILED
        with pytest.raises(BrokerError, match="No acl config for newcomer1"):
            await _send(cluster, Credentials("newcomer1", "newcomer-secret"))


async def test_a_rotated_secret_takes_over_within_seconds(tmp_path: Path) -> None:
    async with acl_cluster(tmp_path) as (cluster, acl_file):
        assert cluster.broker.acl is not None
        await _send(cluster, PRODUCER)
        generation = cluster.broker.acl.generation
        write_acl(acl_file, acl_document(secretKey="rotated-secret-2"))
        async with asyncio.timeout(RELOAD_WAIT_S):  # the watcher looks every 500 ms
            await cluster.broker.acl.wait_generation(generation + 1)
        with pytest.raises(BrokerError, match="Check signature failed for accessKey=producer1"):
            await _send(cluster, PRODUCER)
        await _send(cluster, Credentials(PRODUCER.access_key, "rotated-secret-2"))


async def test_a_broken_file_keeps_the_previous_acl(tmp_path: Path) -> None:
    async with acl_cluster(tmp_path) as (cluster, acl_file):
        acl = cluster.broker.acl
        assert acl is not None
        acl_file.write_text("accounts: [ {accessKey: x", encoding="utf-8")
        assert not await acl.check_once()  # reported, not applied
        await _send(cluster, PRODUCER)


async def test_acl_on_without_its_file_stops_the_start(tmp_path: Path) -> None:
    from rocklet.broker.config import ConfigError

    with pytest.raises(ConfigError, match="does not exist"):
        async with running_cluster(
            tmp_path / "store", acl_enable=True, acl_file=tmp_path / "missing.yml"
        ):
            pass


async def test_secrets_are_never_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    secrets = [PRODUCER.secret_key, ADMIN.secret_key, CONSUMER.secret_key, "newcomer-secret"]
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as events:
        async with acl_cluster(tmp_path) as (cluster, _):
            await _send(cluster, PRODUCER)
            with pytest.raises(BrokerError):
                await _send(cluster, Credentials(PRODUCER.access_key, "wrong-secret-3"))
            async with ClientInstance(cluster.namesrv_addr, credentials=ADMIN) as admin:
                await raw_request(
                    admin,
                    cluster.broker.addr,
                    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
                    {"accessKey": "newcomer1", "secretKey": "newcomer-secret"},
                )
                config = await raw_request(
                    admin, cluster.broker.addr, RequestCode.GET_BROKER_CONFIG
                )
                assert b"secretKey" not in config.body
            logged = repr(events) + caplog.text + repr(cluster.broker.ctx.config)
    assert events, "nothing was captured: the check would prove nothing"
    for secret in [*secrets, "wrong-secret-3"]:
        assert secret not in logged
