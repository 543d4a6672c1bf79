"""``rocklet admin``'s ACL verbs against a broker with ACL on (in process, the code the
command runs): the accounts file changes, the change takes effect, refusals say why."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest
import yaml

from rocklet.admin.run import run_admin_async
from rocklet.admin.verbs_acl import json_object
from rocklet.broker.app import Broker
from rocklet.cli import build_parser
from rocklet.produce import run_produce_async
from rocklet.protocol.errors import BodyError
from tests.broker.acl_helpers import ADMIN, PRODUCER, TOPIC, acl_document, write_acl
from tests.cluster import running_cluster, small_broker_config

TIMEOUT_S = 20.0
NEW_KEY = "newuser1"
NEW_SECRET = "new-user-secret-1"
ADMIN_ENV = {"ROCKLET_ACCESS_KEY": ADMIN.access_key, "ROCKLET_SECRET_KEY": ADMIN.secret_key}


async def run_admin(namesrv: str, *argv: str, env: dict[str, str]) -> tuple[int, str]:
    """``rocklet admin ARGV -n NAMESRV`` with ``env``: exit code and everything printed."""
    args = build_parser().parse_args(["admin", *argv, "-n", namesrv])
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.wait_for(run_admin_async(args, out, err, environ=env), TIMEOUT_S)
    return code, out.getvalue() + err.getvalue()


async def test_acl_verbs_edit_the_accounts_and_the_change_takes_effect(tmp_path: Path) -> None:
    acl_file = tmp_path / "conf" / "plain_acl.yml"
    write_acl(acl_file, acl_document())
    async with running_cluster(tmp_path / "store", acl_enable=True, acl_file=acl_file) as cluster:
        ns = ["-n", cluster.namesrv_addr]
        broker = cluster.broker.addr

        async def admin(*argv: str) -> tuple[int, str]:
            return await run_admin(cluster.namesrv_addr, *argv, env=ADMIN_ENV)

        async def produce_as(access_key: str, secret_key: str) -> tuple[int, str]:
            argv = ["produce", "-t", TOPIC, "--body", "hi", "--timeout", "3", *ns]
            argv += ["--access-key", access_key, "--secret-key", secret_key]
            out, err = io.StringIO(), io.StringIO()
            run = run_produce_async(build_parser().parse_args(argv), io.StringIO(), out, err, {})
            code = await asyncio.wait_for(run, TIMEOUT_S)
            return code, out.getvalue() + err.getvalue()

        def accounts() -> dict[str, dict[str, object]]:
            document = yaml.safe_load(acl_file.read_text())
            return {a["accessKey"]: a for a in document["accounts"]}

        code, text = await admin("updateTopic", "-c", "DefaultCluster", "-t", TOPIC)
        assert code == 0, text
        code, text = await produce_as(NEW_KEY, NEW_SECRET)
        assert code == 1, text  # no such account yet

        # A new account, on every master of the cluster.
        code, text = await admin(
            "updateAclConfig", "-c", "DefaultCluster", "-a", NEW_KEY, "-s", NEW_SECRET,
            "-t", f"{TOPIC}=PUB", "-i", "DENY", "-u", "SUB",
        )  # fmt: skip
        assert code == 0, text
        assert f"create or update plain access config to {broker} success." in text
        account = accounts()[NEW_KEY]
        assert account["topicPerms"] == [f"{TOPIC}=PUB"]
        assert account["defaultTopicPerm"] == "DENY"
        assert account["admin"] is False
        code, text = await produce_as(NEW_KEY, NEW_SECRET)
        assert code == 0, text

        # Listing: secrets masked unless asked for.
        code, text = await admin("getAclConfig", "-b", broker)
        assert code == 0, text
        assert NEW_KEY in text and f"{TOPIC}=PUB" in text
        assert NEW_SECRET not in text and PRODUCER.secret_key not in text
        assert "globalWhiteRemoteAddresses: [10.10.103.*]" in text
        code, text = await admin("getAclConfig", "-b", broker, "--json")
        listed = json.loads(text)[broker]
        assert NEW_SECRET not in text
        assert NEW_KEY in {a["accessKey"] for a in listed["plainAccessConfigs"]}
        code, text = await admin("getAclConfig", "-b", broker, "--show-secrets")
        assert code == 0 and NEW_SECRET in text

        # Versions: the default file, with the edit counted.
        code, text = await admin("clusterAclConfigVersion", "-c", "DefaultCluster", "--json")
        assert code == 0, text
        versions = json.loads(text)[broker]
        assert versions["clusterName"] == "DefaultCluster"
        (path, version), *_ = versions["allAclFileVersion"].items()
        assert Path(path) == acl_file and version["counter"] >= 1
        code, text = await admin("clusterAclConfigVersion", "-b", broker)
        assert "#AclConfigVersionNum" in text and str(acl_file) in text

        # The global white list is replaced.
        code, text = await admin("updateGlobalWhiteAddr", "-b", broker, "-g", "10.1.1.*,10.2.2.*")
        assert code == 0, text
        assert yaml.safe_load(acl_file.read_text())["globalWhiteRemoteAddresses"] == [
            "10.1.1.*",
            "10.2.2.*",
        ]

        # Deleted: the account no longer signs anything; deleting again is refused.
        code, text = await admin("deleteAclConfig", "-c", "DefaultCluster", "-a", NEW_KEY)
        assert code == 0, text
        assert NEW_KEY not in accounts()
        code, text = await produce_as(NEW_KEY, NEW_SECRET)
        assert code == 1, text
        code, text = await admin("deleteAccessConfig", "-b", broker, "-a", NEW_KEY)
        assert code == 1
        assert f"delete plain access config account from {broker} failed" in text
        assert f"accesskey[{NEW_KEY}]" in text


async def test_acl_verbs_report_refusals(tmp_path: Path) -> None:
    acl_file = tmp_path / "conf" / "plain_acl.yml"
    write_acl(acl_file, acl_document())
    async with running_cluster(tmp_path / "store", acl_enable=True, acl_file=acl_file) as cluster:
        broker = cluster.broker.addr
        before = acl_file.read_bytes()

        async def admin(*argv: str, env: dict[str, str]) -> tuple[int, str]:
            return await run_admin(cluster.namesrv_addr, *argv, env=env)

        # Not an admin account: refused, nothing written.
        producer_env = {
            "ROCKLET_ACCESS_KEY": PRODUCER.access_key,
            "ROCKLET_SECRET_KEY": PRODUCER.secret_key,
        }
        code, text = await admin(
            "updateAclConfig", "-b", broker, "-a", NEW_KEY, "-s", NEW_SECRET, env=producer_env
        )
        assert code == 1 and "failed" in text, text
        code, text = await admin("getAclConfig", "-b", broker, env=producer_env)
        assert code == 1 and ADMIN.secret_key not in text, text

        # A secret key too short for RocketMQ: the broker's reason is shown.
        code, text = await admin(
            "updateAclConfig", "-b", broker, "-a", NEW_KEY, "-s", "short", env=ADMIN_ENV
        )
        assert code == 1 and "failed" in text, text
        assert "secretKey" in text or "length" in text, text
        assert acl_file.read_bytes() == before

        # Neither -b nor -c.
        code, text = await admin("getAclConfig", env=ADMIN_ENV)
        assert code == 1 and "-b" in text and "-c" in text, text


async def test_acl_reads_of_a_cluster_go_on_past_a_broker_that_refuses(tmp_path: Path) -> None:
    # broker-a has ACL on; broker-b has not, so it refuses the ACL requests (as RocketMQ).
    acl_file = tmp_path / "conf" / "plain_acl.yml"
    write_acl(acl_file, acl_document())
    async with running_cluster(tmp_path / "a", acl_enable=True, acl_file=acl_file) as cluster:
        other = await Broker.start(
            small_broker_config(tmp_path / "b", cluster.namesrv_addr, broker_name="broker-b")
        )
        try:
            for verb in ("getAclConfig", "clusterAclConfigVersion"):
                code, text = await run_admin(
                    cluster.namesrv_addr, verb, "-c", "DefaultCluster", "--json", env=ADMIN_ENV
                )
                assert code == 1, text
                data = json.loads(text[: text.rindex("}") + 1])
                assert data[cluster.broker.addr].get("ok") is not False, text
                refused = data[f"127.0.0.1:{other.port}"]
                assert refused["ok"] is False and refused["error"], text
        finally:
            await other.stop()


@pytest.mark.parametrize("text", [b"not json", b"[1, 2]", b'{"a": '])
def test_a_broker_answer_that_is_not_an_object_is_a_clear_error(text: bytes) -> None:
    with pytest.raises(BodyError, match="ACL configuration"):
        json_object(text, "ACL configuration")
