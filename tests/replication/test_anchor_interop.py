"""Replication against real Apache RocketMQ 4.9.4.

Needs an unpacked 4.9.4 binary release (``$ROCKETMQ_HOME``, else
``/tmp/anchor/rocketmq-4.9.4``; see tests/java/javatier.py for the jars a snapshot may
lack) and Java; skipped, saying which is missing, otherwise. RocketMQ is started as the
benchmark starts it (``start_rocketmq``). Segments are 4 MiB on both sides.

- A RocketMQ slave follows a Rocklet master: byte-identical commitlogs, and it syncs
  the master's topics (through the VIP port, listenPort - 2), consumer offsets, delay
  offsets and subscription groups.
- A Rocklet slave follows a RocketMQ master: byte-identical commitlogs, pulls served,
  and the same four tables synced.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from rocklet.benchsuite.vsrmq.servers import RunningSystem, start_rocketmq
from rocklet.client.admin import Admin
from rocklet.protocol import fastjson
from rocklet.protocol.bodies.subscription_group import (
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import (
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from tests.adversity.procs import running_broker
from tests.broker.test_send_pull import cpp_send
from tests.java.javatier import RELEASE, release
from tests.replication.nodes import (
    SlaveProcess,
    commitlog_bytes,
    ha_port,
    slave_props,
    until,
)
from tests.replication.test_replication import _connect, bodies, max_offset

SEGMENT = 4 * 1024 * 1024
#: A RocketMQ name server or broker, to come up (a busy two-core box is slow at it).
_BOOT_TIMEOUT_S = 180.0


def _missing() -> str | None:
    if not (RELEASE / "lib").is_dir():
        return f"no RocketMQ 4.9.4 release at {RELEASE} (set ROCKETMQ_HOME)"
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        return "no java (set JAVA_HOME or put java on PATH)"
    return None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(_missing() is not None, reason=_missing() or ""),
    pytest.mark.timeout(300),
]


def _rmq_up(store: Path, **conf: str) -> RunningSystem:
    """RocketMQ's name server and one broker, its store at ``store``.

    ``conf`` is added to the broker's config and wins over it (a slave's role, id and
    name server, say). Configs and logs go to ``<store>.run/``. Called from the test's
    thread, never a worker thread: the servers are told to die with the thread that
    started them.
    """
    work = store.with_name(f"{store.name}.run")
    work.mkdir(parents=True, exist_ok=True)
    where = {"storePathRootDir": str(store), "storePathCommitLog": str(store / "commitlog")}
    return start_rocketmq(release(), work, _BOOT_TIMEOUT_S, {**where, **conf})


def _rmq_slave(store: Path, namesrv: str) -> RunningSystem:
    """A RocketMQ slave (brokerId 1) of the broker-a that ``namesrv`` routes."""
    slave = {"brokerId": "1", "brokerRole": "SLAVE", "namesrvAddr": namesrv}
    return _rmq_up(store, mappedFileSizeCommitLog=str(SEGMENT), **slave)


async def _rmq_topic(ns: str, topic: str, queues: int) -> None:
    """Create ``topic`` through RocketMQ's name server; wait until it routes it."""
    async with Admin(ns) as admin:
        await admin.create_topic(topic, queue_nums=queues)

        async def routed() -> bool:
            try:
                return bool((await admin.topic_route(topic)).queue_datas)
            except Exception:
                return False

        await until(f"the route of {topic} on the RocketMQ name server", routed, 30)


async def _send(addr: str, n: int, start: int = 0) -> None:
    async with await _connect(addr) as conn:
        for i in range(start, start + n):
            body = f"a{i:06d}".encode().ljust(900, b"-")
            resp = await conn.request(cpp_send("AnchorHa", body, queue_id=i % 4), 10)
            assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)


async def _ask(addr: str, code: RequestCode, body: bytes | None = None) -> bytes:
    cmd = RemotingCommand(code) if body is None else RemotingCommand(code, body=body)
    async with await _connect(addr) as conn:
        resp = await conn.request(cmd, 10)
    assert resp.code == ResponseCode.SUCCESS, (code, resp.code, resp.remark)
    return resp.body or b""


async def _commit(addr: str, offset: int) -> None:
    header = UpdateConsumerOffsetRequestHeader("AnchorCG", "AnchorHa", 0, offset)
    cmd = RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=header.to_ext_fields())
    async with await _connect(addr) as conn:
        resp = await conn.request(cmd, 10)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def _committed(addr: str) -> int | None:
    header = QueryConsumerOffsetRequestHeader("AnchorCG", "AnchorHa", 0)
    cmd = RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, ext_fields=header.to_ext_fields())
    async with await _connect(addr) as conn:
        resp = await conn.request(cmd, 10)
    return int(resp.ext_fields["offset"]) if resp.code == ResponseCode.SUCCESS else None


async def _metadata_on(addr: str) -> None:
    """A group, a committed offset (moved back once: a reset stamp) and a delayed message."""
    group = SubscriptionGroupConfig("AnchorGroup", retry_max_times=5)
    await _ask(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, group.to_json())
    await _commit(addr, 50)
    await _commit(addr, 42)
    async with await _connect(addr) as conn:
        resp = await conn.request(cpp_send("AnchorDelay", b"later", props={"DELAY": "1"}), 10)
        assert resp.code == ResponseCode.SUCCESS, resp.remark


def _port_with_vip() -> int:
    """A free port P whose P - 2 is free too (RocketMQ's slave asks the VIP port)."""
    while True:
        with socket.socket() as main:
            main.bind(("127.0.0.1", 0))
            port = int(main.getsockname()[1])
            if port < 1026:
                continue
            with socket.socket() as vip:
                try:
                    vip.bind(("127.0.0.1", port - 2))
                except OSError:
                    continue
        return port


async def _delay_offsets(addr: str) -> dict[str, int]:
    return dict(fastjson.loads(await _ask(addr, RequestCode.GET_ALL_DELAY_OFFSET))["offsetTable"])


async def test_rocketmq_slave_follows_a_rocklet_master(tmp_path: Path) -> None:
    props = {"mappedFileSizeCommitLog": str(SEGMENT)}
    (tmp_path / "m").mkdir()
    port = ("--listen-port", str(_port_with_vip()))
    async with running_broker(tmp_path / "m", props, port) as master:
        await ha_port(master)
        await _send(master.broker_addr, 3000)
        await _metadata_on(master.broker_addr)

        async def delivered() -> bool:
            return (await _delay_offsets(master.broker_addr)).get("1") == 1

        await until("the master delivering the delayed message", delivered)
        rmq = tmp_path / "rmq-slave"
        rocketmq = _rmq_slave(rmq, master.namesrv_addr)
        try:
            await _send(master.broker_addr, 3000, start=3000)  # crosses a segment
            end = await max_offset(master.broker_addr)
            want = commitlog_bytes(master.store, end)

            def same() -> bool:
                return commitlog_bytes(rmq, end) == want

            # Its first report comes ~5 s after it connects (RocketMQ's slave).
            await until("the RocketMQ slave's commitlog matching", same, 90)
            # A topic the slave's first sync cannot have seen.
            async with await _connect(master.broker_addr) as conn:
                resp = await conn.request(cpp_send("AnchorLate", b"late"), 10)
                assert resp.code == ResponseCode.SUCCESS, resp.remark
            # SlaveSynchronize: first after 3 s, then every 10 s; each table lands in
            # its config file (RocketMQ writes them with fastjson: unquoted int keys).
            config = rmq / "config"

            def synced(name: str) -> dict[str, Any]:
                path = config / name
                return fastjson.loads(path.read_bytes()) if path.exists() else {}

            def offsets_synced() -> bool:
                table = synced("consumerOffset.json").get("offsetTable", {})
                return bool(table.get("AnchorHa@AnchorCG", {}).get("0") == 42)

            await until("the RocketMQ slave's consumer offsets", offsets_synced, 30)
            await until(
                "the RocketMQ slave's delay offsets",
                lambda: synced("delayOffset.json").get("offsetTable", {}).get("1") == 1,
                30,
            )
            groups = synced("subscriptionGroup.json")["subscriptionGroupTable"]
            assert groups["AnchorGroup"]["retryMaxTimes"] == 5
            # Topics come from the master's VIP port (listenPort - 2).
            await until(
                "the RocketMQ slave's topic table",
                lambda: "AnchorLate" in synced("topics.json").get("topicConfigTable", {}),
                30,
            )
        finally:
            rocketmq.stop()


async def test_rocklet_slave_follows_a_rocketmq_master(tmp_path: Path) -> None:
    rmq = tmp_path / "rmq-master"
    rocketmq = _rmq_up(rmq, mappedFileSizeCommitLog=str(SEGMENT))
    ns, broker = rocketmq.namesrv, rocketmq.broker_addr
    try:
        await _send(broker, 2000)
        slave = SlaveProcess(tmp_path / "s", ns, slave_props(mappedFileSizeCommitLog=str(SEGMENT)))
        try:
            await slave.start()
            await _send(broker, 2000, start=2000)
            ours = slave.store / "commitlog"

            def same() -> bool:
                files = sorted(p.name for p in ours.iterdir()) if ours.exists() else []
                if not files:
                    return False
                first = int(files[0])  # RocketMQ's master starts an empty slave here
                end = first + sum(p.stat().st_size for p in ours.iterdir())
                theirs = commitlog_bytes(rmq, end)[first:]
                mine = commitlog_bytes(slave.store, end - first)
                return mine.rstrip(b"\0") == theirs.rstrip(b"\0") and len(mine.rstrip(b"\0")) > 0

            await until("the Rocklet slave's commitlog matching", same, 60)
            got = sum([len(await bodies(slave.broker_addr, q, "AnchorHa")) for q in range(4)])
            assert got == 4000
            # The four tables, from RocketMQ's bodies. The delayed message is sent now,
            # so that its schedule record is in the slave's store (an empty slave gets
            # only the master's newest segment) and the level's offset is not clamped.
            await _metadata_on(broker)

            async def delay_synced() -> bool:
                theirs = (await _delay_offsets(broker)).get("1")
                return (
                    theirs is not None
                    and (await _delay_offsets(slave.broker_addr)).get("1") == theirs
                )

            await until("the delay offsets synced from RocketMQ", delay_synced, 40)
            # A RocketMQ master sends no reset stamps: its offsets are taken as putAll.
            assert await _committed(slave.broker_addr) == 42
            body = await _ask(slave.broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            table = SubscriptionGroupWrapper.from_json(body).subscription_group_table
            assert table["AnchorGroup"].retry_max_times == 5
        finally:
            await slave.close()
    finally:
        rocketmq.stop()
