"""What docs/security.md promises about white lists, batches and deletions, on a real
broker (loopback, port 0) with ACL on.

- A peer matching an account's ``whiteRemoteAddress`` needs no valid signature, but
  the request is that account's: its topic and group rights and the admin-only rules
  still apply (RocketMQ 4.9.4 lets it do anything).
- A peer in ``globalWhiteRemoteAddresses`` passes every check except the ACL admin
  requests, which still need an admin account.
- SEND_BATCH_MESSAGE needs PUB on its topic like a single send (a DENY topic is not
  written to, a new topic is not created), and SUB on the group for a retry topic.
- Deleting an account defined in two files removes both definitions.
- ``updateAclConfig`` needs the secret key and, without ``-m``, sets ``admin: false``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from rocklet.client import Admin, Message, Producer
from rocklet.client.errors import BrokerError
from rocklet.client.instance import ClientInstance
from rocklet.protocol.acl import Credentials
from rocklet.protocol.batch import BatchItem, encode_batch
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.properties import encode_properties
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
from tests.broker.test_acl_admin_cli import run_admin
from tests.cluster import Cluster, running_cluster

#: An account that may publish anywhere, from 127.0.0.* without a valid signature.
WHITE_USER = {
    "accessKey": "whiteuser",
    "secretKey": "white-user-secret",
    "whiteRemoteAddress": "127.0.0.*",
    "defaultTopicPerm": "PUB",
}
#: The white account signing with a secret that is not its own.
WRONG_SECRET = Credentials("whiteuser", "not-the-right-secret")
DENIED_TOPIC = "denied-topic"


@asynccontextmanager
async def acl_cluster(tmp_path: Path, document: dict[str, Any]) -> AsyncIterator[Cluster]:
    acl_file = tmp_path / "home" / "conf" / "plain_acl.yml"
    write_acl(acl_file, document)
    async with running_cluster(tmp_path / "store", acl_enable=True, acl_file=acl_file) as cluster:
        async with Admin(cluster.namesrv_addr, instance_name="admin", credentials=ADMIN) as admin:
            for topic in (TOPIC, DENIED_TOPIC):
                await admin.create_topic(topic, queue_nums=1)
        yield cluster


def _with_white_user() -> dict[str, Any]:
    document = acl_document()
    document["accounts"].append(dict(WHITE_USER))
    return document


async def _send(cluster: Cluster, creds: Credentials | None, topic: str = TOPIC) -> None:
    name = "p-" + (creds.access_key if creds else "anon")
    async with Producer(
        "acl-pg", cluster.namesrv_addr, instance_name=name, credentials=creds, retry_times=0
    ) as producer:
        await producer.send(Message(topic, b"hello"))


def _pull(topic: str, group: str) -> dict[str, str]:
    return {
        "consumerGroup": group,
        "topic": topic,
        "queueId": "0",
        "queueOffset": "0",
        "maxMsgNums": "32",
        "sysFlag": "0",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subVersion": "0",
    }


def _account_file(cluster: Cluster) -> Path:
    assert cluster.broker.acl is not None
    return cluster.broker.acl.default_file


async def test_an_account_white_address_stands_in_for_the_signature_only(
    tmp_path: Path,
) -> None:
    async with acl_cluster(tmp_path, _with_white_user()) as cluster:
        broker = cluster.broker.addr
        acl_file = _account_file(cluster)
        before = acl_file.read_bytes()
        # What the address allows: the account's own rights, with a wrong secret.
        await _send(cluster, WRONG_SECRET)
        async with ClientInstance(cluster.namesrv_addr, credentials=WRONG_SECRET) as white:
            # Not an admin: it may neither read every secret nor make itself admin...
            listing = await raw_request(white, broker, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
            assert listing.code == ResponseCode.SYSTEM_ERROR
            assert "Need admin permission for request code=54" in (listing.remark or "")
            assert ADMIN.secret_key.encode() not in listing.body
            promote = {**WHITE_USER, "admin": "true"}
            del promote["whiteRemoteAddress"]
            promoted = await raw_request(
                white, broker, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, promote
            )
            assert "Need admin permission for request code=50" in (promoted.remark or "")
            assert acl_file.read_bytes() == before
            # ... nor change the broker's configuration...
            config = await raw_request(
                white, broker, RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4"
            )
            assert "Need admin permission for request code=25" in (config.remark or "")
            # ... nor consume a topic it has no SUB on.
            pulled = await raw_request(white, broker, RequestCode.PULL_MESSAGE, _pull(TOPIC, GROUP))
            assert pulled.code == ResponseCode.SYSTEM_ERROR
            assert "No default permission for topic:acl-topic" in (pulled.remark or "")
        async with Admin(cluster.namesrv_addr, instance_name="a-w", credentials=WRONG_SECRET) as a:
            with pytest.raises(BrokerError, match="Need admin permission for request code=17"):
                await a.create_topic("white-made-topic", queue_nums=1)
        assert cluster.broker.ctx.topics.find("white-made-topic") is None
        # Still an account: a request naming none is refused as before.
        with pytest.raises(BrokerError, match="No accessKey is configured"):
            await _send(cluster, None)


async def test_the_global_white_list_still_needs_an_admin_for_the_acl(tmp_path: Path) -> None:
    document = acl_document()
    document["globalWhiteRemoteAddresses"] = ["127.0.0.1"]
    async with acl_cluster(tmp_path, document) as cluster:
        broker = cluster.broker.addr
        acl_file = _account_file(cluster)
        before = acl_file.read_bytes()
        # Documented: a globally white peer passes everything else unsigned.
        await _send(cluster, None, DENIED_TOPIC)
        async with Admin(cluster.namesrv_addr, instance_name="a-anon") as anonymous:
            await anonymous.create_topic("white-list-topic", queue_nums=1)
        async with ClientInstance(cluster.namesrv_addr) as unsigned:
            for code in (
                RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
                RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
                RequestCode.DELETE_ACL_CONFIG,
                RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                RequestCode.GET_BROKER_CLUSTER_ACL_INFO,
            ):
                fields = {"accessKey": "intruder1", "secretKey": "intruder-secret", "admin": "true"}
                answer = await raw_request(unsigned, broker, code, fields)
                assert answer.code == ResponseCode.SYSTEM_ERROR, code
                assert "No accessKey is configured" in (answer.remark or ""), code
                assert PRODUCER.secret_key.encode() not in answer.body
        async with ClientInstance(cluster.namesrv_addr, credentials=PRODUCER) as producer:
            listing = await raw_request(producer, broker, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
            assert "Need admin permission for request code=54" in (listing.remark or "")
        assert acl_file.read_bytes() == before
        async with ClientInstance(cluster.namesrv_addr, credentials=ADMIN) as admin:
            listing = await raw_request(admin, broker, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
            assert listing.code == ResponseCode.SUCCESS, listing.remark


def _batch(topic: str, group: str = "acl-pg") -> RemotingCommand:
    items = [
        BatchItem(0, f"b{i}".encode(), encode_properties({"UNIQ_KEY": f"BATCH{i:027d}"}))
        for i in range(2)
    ]
    fields = {
        "a": group,
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": "",
        "j": "0",
        "k": "false",
        "m": "true",
    }
    return RemotingCommand(
        RequestCode.SEND_BATCH_MESSAGE, ext_fields=fields, body=encode_batch(items)
    )


async def test_a_batch_needs_pub_on_its_topic_like_a_single_send(tmp_path: Path) -> None:
    document = acl_document(topicPerms=[f"{TOPIC}=PUB", f"{DENIED_TOPIC}=DENY"])
    async with acl_cluster(tmp_path, document) as cluster:
        broker = cluster.broker.addr
        store = cluster.broker.ctx.store
        async with ClientInstance(cluster.namesrv_addr, credentials=PRODUCER) as producer:
            sent = await producer.invoke(broker, _batch(TOPIC))
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            assert store.max_offset(TOPIC, 0) == 2

            denied = await producer.invoke(broker, _batch(DENIED_TOPIC))
            assert denied.code == ResponseCode.SYSTEM_ERROR
            assert "No default permission for topic:denied-topic" in (denied.remark or "")
            assert store.max_offset(DENIED_TOPIC, 0) == 0

            created = await producer.invoke(broker, _batch("batch-made-topic"))
            assert "No default permission for topic:batch-made-topic" in (created.remark or "")
            assert cluster.broker.ctx.topics.find("batch-made-topic") is None
        # A retry topic is the group's: SUB on the group, as for a single send.
        async with ClientInstance(cluster.namesrv_addr, credentials=CONSUMER) as consumer:
            retry = await consumer.invoke(broker, _batch("%RETRY%other-group", "other-group"))
            assert "No default permission for group:other-group" in (retry.remark or "")


async def test_deleting_an_account_removes_it_from_every_file(tmp_path: Path) -> None:
    first = Credentials("app-orders", "orders-secret-in-acl-dir")
    second = Credentials("app-orders", "orders-secret-in-default")
    default = acl_document()
    default["accounts"].append(
        {"accessKey": second.access_key, "secretKey": second.secret_key, "defaultTopicPerm": "PUB"}
    )
    extra_file = tmp_path / "home" / "conf" / "acl" / "orders.yml"
    write_acl(
        extra_file,
        {
            "accounts": [
                {
                    "accessKey": first.access_key,
                    "secretKey": first.secret_key,
                    "defaultTopicPerm": "PUB",
                }
            ]
        },
    )
    async with acl_cluster(tmp_path, default) as cluster:
        broker = cluster.broker.addr
        default_file = _account_file(cluster)
        await _send(cluster, first)  # the first definition is in force
        with pytest.raises(BrokerError, match="Check signature failed for accessKey=app-orders"):
            await _send(cluster, second)
        async with ClientInstance(cluster.namesrv_addr, credentials=ADMIN) as admin:
            deleted = await raw_request(
                admin, broker, RequestCode.DELETE_ACL_CONFIG, {"accessKey": first.access_key}
            )
            assert deleted.code == ResponseCode.SUCCESS, deleted.remark
            for path in (extra_file, default_file):
                document = yaml.safe_load(path.read_text())
                keys = [a["accessKey"] for a in document.get("accounts") or []]
                assert first.access_key not in keys, path
                assert document["dataVersion"][0]["counter"] == 1, path
                assert path.stat().st_mode & 0o777 == 0o600
                # The previous version is kept beside it, as for any edit.
                backup = path.with_name(path.name + ".bak")
                assert first.access_key in backup.read_text(), backup
            listing = await raw_request(admin, broker, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
            listed = {a["accessKey"] for a in yaml.safe_load(listing.body)["plainAccessConfigs"]}
            assert first.access_key not in listed and PRODUCER.access_key in listed
            again = await raw_request(
                admin, broker, RequestCode.DELETE_ACL_CONFIG, {"accessKey": first.access_key}
            )
            assert again.code == ResponseCode.DELETE_ACL_CONFIG_FAILED
        for creds in (first, second):
            with pytest.raises(BrokerError, match="No acl config for app-orders"):
                await _send(cluster, creds)
        await _send(cluster, PRODUCER)  # the other accounts are untouched


async def test_update_needs_the_secret_and_sets_admin_false_without_m(tmp_path: Path) -> None:
    """As docs/security.md says (and RocketMQ does): ``updateAclConfig`` without ``-s``
    is refused even for an existing account, and without ``-m`` demotes an admin."""
    second_admin = Credentials("second-admin", "second-admin-secret")
    document = acl_document()
    document["accounts"].append(
        {"accessKey": second_admin.access_key, "secretKey": second_admin.secret_key, "admin": True}
    )
    async with acl_cluster(tmp_path, document) as cluster:
        broker = cluster.broker.addr
        acl_file = _account_file(cluster)
        env = {"ROCKLET_ACCESS_KEY": ADMIN.access_key, "ROCKLET_SECRET_KEY": ADMIN.secret_key}
        before = acl_file.read_bytes()
        code, text = await run_admin(
            cluster.namesrv_addr, "updateAclConfig", "-b", broker, "-a", PRODUCER.access_key,
            "-t", f"{TOPIC}=PUB|SUB", env=env,
        )  # fmt: skip
        assert code == 1, text
        assert "CODE: 209" in text and "secretKey=<hidden> cannot be null" in text, text
        assert acl_file.read_bytes() == before
        code, text = await run_admin(
            cluster.namesrv_addr, "updateAclConfig", "-b", broker, "-a", second_admin.access_key,
            "-s", second_admin.secret_key, env=env,
        )  # fmt: skip
        assert code == 0, text
        accounts = {a["accessKey"]: a for a in yaml.safe_load(acl_file.read_text())["accounts"]}
        assert accounts[second_admin.access_key]["admin"] is False
        async with ClientInstance(cluster.namesrv_addr, credentials=second_admin) as demoted:
            listing = await raw_request(demoted, broker, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
            assert "Need admin permission for request code=54" in (listing.remark or "")
