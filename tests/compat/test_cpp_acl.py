"""The official C++ client (``rocketmq==0.4.4``) signing with ``set_session_credentials``
against ``rocklet standalone`` with ``aclEnable=true``: accepted and refused cases.

The C++ client signs like Java's ``AclClientRPCHook`` and adds its own ``OnsChannel``
ext field, which is signed too; a broker that verified anything else would refuse it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from rocklet.client import Admin
from tests.broker.acl_helpers import (
    ADMIN,
    CONSUMER,
    GROUP,
    PRODUCER,
    TOPIC,
    acl_document,
    write_acl,
)
from tests.compat.harness import (
    DriverPool,
    Standalone,
    driver_pool,
    running_standalone,
    wait_for_route,
)

pytestmark = pytest.mark.compat

_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
_MANAGER = "org.apache.rocketmq.acl.plain.PlainPermissionManager"
QUEUES = 2
COUNT = 8
TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    root = tmp_path_factory.mktemp("standalone-acl")
    acl_file = root / "conf" / "plain_acl.yml"
    write_acl(acl_file, acl_document())
    properties = {
        "brokerIP1": "127.0.0.1",
        "aclEnable": "true",
        "aclFile": str(acl_file),
        "mappedFileSizeCommitLog": str(16 * 1024 * 1024),
    }
    with running_standalone(root, properties) as broker:
        yield broker


@pytest.fixture
async def pool(standalone: Standalone, tmp_path: Path) -> AsyncIterator[DriverPool]:
    async with Admin(standalone.namesrv_addr, instance_name="acl-admin", credentials=ADMIN) as a:
        await a.create_topic(TOPIC, queue_nums=QUEUES)
    await wait_for_route(standalone.namesrv_addr, TOPIC, QUEUES)
    async with driver_pool(tmp_path / "home", standalone.namesrv_addr) as drivers:
        yield drivers


def _keys(creds: Any) -> dict[str, str]:
    return {"access_key": creds.access_key, "secret_key": creds.secret_key}


def _sends(prefix: str) -> list[dict[str, Any]]:
    return [
        {"mode": "sync", "keys": f"{prefix}-{i}", "body": f"{prefix} {i}"} for i in range(COUNT)
    ]


async def _refused_sends(pool: DriverPool, name: str, **creds: str) -> str:
    """Run a one-message producer that must fail; returns the broker's remarks it logged.

    The wheel reports only "No route info of this topic" once its retries are spent;
    the broker's remark is in the C++ client's own log (``~/logs/rocketmq-cpp``).
    """
    driver = await pool.spawn(name, "produce", topic=TOPIC, sends=_sends(name)[:1], **creds)
    summary = await driver.finish(TIMEOUT_S)
    assert summary["errors"] == 1, driver.diagnostics()
    logs = (driver.home / "logs" / "rocketmq-cpp").glob(f"{driver.proc.pid}_*")
    return "".join(
        line
        for log in logs
        for line in log.read_text(errors="replace").splitlines(keepends=True)
        if "remark:" in line
    )


async def test_signed_cpp_clients_produce_push_and_pull(pool: DriverPool) -> None:
    sent = await pool.produce("signed", TOPIC, _sends("signed"), **_keys(PRODUCER))
    assert [e["status"] for e in sent] == ["OK"] * COUNT

    push = await pool.spawn(
        "push",
        "push",
        topic=TOPIC,
        group=GROUP,
        expect_count=COUNT,
        timeout_s=TIMEOUT_S,
        **_keys(CONSUMER),
    )
    summary = await push.finish(TIMEOUT_S + 15)
    assert summary["stopped"] == "signal", push.diagnostics()
    assert sorted(e["keys"] for e in push.of("consumed")) == sorted(
        s["keys"] for s in _sends("signed")
    )

    pull = await pool.spawn("pull", "pull", topic=TOPIC, group=GROUP, **_keys(CONSUMER))
    summary = await pull.finish(TIMEOUT_S)
    assert summary["consumed"] == COUNT, pull.diagnostics()


async def test_unsigned_forged_and_unpermitted_cpp_sends_are_refused(pool: DriverPool) -> None:
    # Without credentials the C++ client still sends an empty AccessKey (its RPC hook
    # is always on), so the refusal is "No acl config for " (a Java broker's too).
    anonymous = await _refused_sends(pool, "anon")
    assert f"{_EXCEPTION}: No acl config for , {_MANAGER}.validate(" in anonymous
    forged = {"access_key": PRODUCER.access_key, "secret_key": "not-the-secret"}
    remarks = await _refused_sends(pool, "forged", **forged)
    assert "Check signature failed for accessKey=producer1" in remarks
    remarks = await _refused_sends(pool, "reader", **_keys(CONSUMER))
    assert "No default permission for topic:acl-topic" in remarks
