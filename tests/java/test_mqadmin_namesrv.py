"""The real 4.9.4 ``mqadmin`` on the name server: wipeWritePerm, addWritePerm,
getNamesrvConfig, updateNamesrvConfig, against ``rocklet namesrv -c FILE`` and, as the
other parameter, RocketMQ's ``NamesrvStartup -c FILE``, with the same assertions.

Only name servers run (no broker: a RocketMQ broker takes 15-20 s to boot): the test
registers a broker group itself, on a connection it keeps open, so both systems route
the same three topics. The verbs run in one ``mqadmin`` JVM (:class:`MqAdmin`).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest

from rocklet.benchsuite.procs import LOOPBACK, ServerProcess, free_port
from rocklet.broker.config import parse_properties
from rocklet.broker.namesrv.configuration import NO_EFFECT_DEFAULTS
from rocklet.broker.rocketmq_keys import ROCKETMQ_NAMESRV_KEYS
from rocklet.protocol import RemotingCommand, RequestCode, ResponseCode
from rocklet.protocol.bodies.topic import TopicConfig
from rocklet.transport.dial import open_connection
from tests.broker.test_namesrv import register_cmd, topics
from tests.compat.harness import route_of
from tests.java.javatier import RELEASE, JavaDriver, release, tier_marks
from tests.java.mqadmin import MqAdmin

pytestmark = tier_marks(180)

BROKER: Final = "broker-ns"
#: The group's topics and their perms: two writable, one read-only.
TOPIC_PERMS: Final = {"NsPermRw1": 6, "NsPermRw2": 6, "NsPermRo": 4}
_BOOT_TIMEOUT_S: Final = 60.0
_REQUEST_TIMEOUT_S: Final = 10.0


@dataclass
class NameServer:
    """One name server process on a ``-c`` file of its own, restartable.

    Attributes:
        system: ``"rocklet"`` or ``"rocketmq"``.
        work: Its directory: the file, the log, ``user.home`` (``home/``).
    """

    system: str
    work: Path
    port: int = field(default_factory=free_port)
    proc: ServerProcess | None = None

    @property
    def conf(self) -> Path:
        return self.work / "namesrv.properties"

    @property
    def home(self) -> Path:
        return self.work / "home"

    @property
    def addr(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        tmp = self.work / "tmp"  # where a permissive-TLS server writes its key pair
        tmp.mkdir(exist_ok=True)
        env = {**os.environ, "ROCKETMQ_HOME": str(RELEASE), "HOME": str(self.home)}
        if self.system == "rocklet":
            argv = [sys.executable, "-m", "rocklet", "namesrv", "-c", str(self.conf)]
        else:
            argv = release().java_argv(
                "256m",
                "org.apache.rocketmq.namesrv.NamesrvStartup",
                "-c",
                str(self.conf),
                props=(f"-Duser.home={self.home}", f"-Djava.io.tmpdir={tmp}"),
            )
        log = self.work / f"namesrv-{self.system}.out"
        self.proc = ServerProcess(f"{self.system} name server", argv, log, env=env, cwd=self.work)
        self.proc.require_ports([self.port], _BOOT_TIMEOUT_S)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            # Both write the file before answering an update: no graceful stop needed.
            proc.stop(5.0 if self.system == "rocklet" else 0.0)


@pytest.fixture(scope="module")
def admin(java_driver: JavaDriver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MqAdmin]:
    """One ``mqadmin`` JVM for the module; every verb names its ``-n``."""
    with MqAdmin(java_driver, tmp_path_factory.mktemp("mqadmin-ns"), "unused") as tool:
        yield tool


async def mqadmin(admin: MqAdmin, ns: NameServer, verb: str, *args: str) -> str:
    return await asyncio.to_thread(admin.run_raw, verb, "-n", ns.addr, *args)


def printed_config(output: str, ns: NameServer) -> dict[str, str]:
    """``getNamesrvConfig``'s table (``%-50s=  %s``) under its one name server's banner."""
    lines = output.splitlines()
    assert lines[0] == f"============{ns.addr}============", output
    rows = [line.partition("=  ") for line in lines[1:]]
    assert all(sep for _, sep, _ in rows), output
    return {key.strip(): value for key, _, value in rows}


def expected_config(ns: NameServer, order_message_enable: str) -> dict[str, str]:
    """What 4.9.4 prints for a name server started on ``-c FILE`` with ``listenPort``."""
    return {
        **NO_EFFECT_DEFAULTS,
        "listenPort": str(ns.port),
        "serverSocketSndBufSize": "0",
        "serverSocketRcvBufSize": "0",
        "writeBufferHighWaterMark": "0",
        "configStorePath": str(ns.conf),
        "kvConfigPath": str(ns.home / "namesrv" / "kvConfig.json"),
        "rocketmqHome": str(RELEASE),
        "orderMessageEnable": order_message_enable,
    }


@asynccontextmanager
async def registered_broker(ns: NameServer) -> AsyncIterator[None]:
    """The broker group ``BROKER`` with :data:`TOPIC_PERMS`, while its connection lives."""
    table = topics(*(TopicConfig(t, 4, 4, perm) for t, perm in TOPIC_PERMS.items()))
    async with await open_connection(LOOPBACK, ns.port) as conn:
        cmd = register_cmd(table=table, addr="127.0.0.1:10991", name=BROKER)
        answer = await conn.request(cmd, _REQUEST_TIMEOUT_S)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        yield


async def route_perms(ns: NameServer) -> dict[str, int]:
    perms = {}
    for topic in TOPIC_PERMS:
        route = await route_of(ns.addr, topic)
        assert route is not None, topic
        (queue,) = route.queue_datas
        perms[topic] = int(queue.perm)
    return perms


@pytest.mark.parametrize("system", ["rocklet", "rocketmq"])
async def test_write_perms_and_config_through_mqadmin(
    system: str, admin: MqAdmin, tmp_path: Path
) -> None:
    ns = NameServer(system, tmp_path)
    lines = f"listenPort={ns.port}\n"
    ns.conf.write_text(lines + "listenHost=127.0.0.1\n" if system == "rocklet" else lines)
    await asyncio.to_thread(ns.start)
    try:
        async with registered_broker(ns):
            wiped = await mqadmin(admin, ns, "wipeWritePerm", "-b", BROKER)
            assert wiped == f"wipe write perm of broker[{BROKER}] in name server[{ns.addr}] OK, 3\n"
            assert await route_perms(ns) == {"NsPermRw1": 4, "NsPermRw2": 4, "NsPermRo": 4}
            added = await mqadmin(admin, ns, "addWritePerm", "-b", BROKER)
            assert added == f"add write perm of broker[{BROKER}] in name server[{ns.addr}] OK, 3\n"
            # READ|WRITE for all: the read-only topic too.
            assert await route_perms(ns) == dict.fromkeys(TOPIC_PERMS, 6)
            nobody = await mqadmin(admin, ns, "wipeWritePerm", "-b", "nobody")
            assert nobody.endswith(f"in name server[{ns.addr}] OK, 0\n"), nobody

            shown = printed_config(await mqadmin(admin, ns, "getNamesrvConfig"), ns)
            assert {k: shown.get(k) for k in ROCKETMQ_NAMESRV_KEYS} == expected_config(ns, "false")

            updated = await mqadmin(
                admin, ns, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"
            )
            assert updated == (
                f"update name server config success![{ns.addr}]\norderMessageEnable : true\n"
            )
            # Live: the next route carries the topic's ORDER_TOPIC_CONFIG.
            put = RemotingCommand(
                RequestCode.PUT_KV_CONFIG,
                ext_fields={"namespace": "ORDER_TOPIC_CONFIG", "key": "NsPermRo", "value": "b:4"},
            )
            async with await open_connection(LOOPBACK, ns.port) as conn:
                assert (await conn.request(put, _REQUEST_TIMEOUT_S)).code == ResponseCode.SUCCESS
            route = await route_of(ns.addr, "NsPermRo")
            assert route is not None and route.order_topic_conf == "b:4"
        # Written to configStorePath, the -c file, and read again at the next start.
        assert parse_properties(ns.conf.read_text())["orderMessageEnable"] == "true"
        ns.stop()
        await asyncio.to_thread(ns.start)
        shown = printed_config(await mqadmin(admin, ns, "getNamesrvConfig"), ns)
        assert {k: shown.get(k) for k in ROCKETMQ_NAMESRV_KEYS} == expected_config(ns, "true")

        # 4.9.4 lets anyone move configStorePath, so the next update writes any file
        # (CVE-2023-37582); Rocklet refuses it as RocketMQ 4.9.7 does.
        elsewhere = tmp_path / "elsewhere.properties"
        moved = await mqadmin(
            admin, ns, "updateNamesrvConfig", "-k", "configStorePath", "-v", str(elsewhere)
        )
        if system == "rocklet":
            assert "UpdateNamesrvConfigCommand command failed" in moved, moved
            assert "CODE: 16  DESC: Can not update config path" in moved, moved
            assert not elsewhere.exists()
        else:
            assert moved.startswith(f"update name server config success![{ns.addr}]"), moved
            assert elsewhere.exists()
    finally:
        ns.stop()


async def kv_value(ns: NameServer, namespace: str, key: str) -> str | None:
    """GET_KV_CONFIG on ``ns``: the value, or ``None`` (QUERY_NOT_FOUND)."""
    get = RemotingCommand(
        RequestCode.GET_KV_CONFIG, ext_fields={"namespace": namespace, "key": key}
    )
    async with await open_connection(LOOPBACK, ns.port) as conn:
        answer = await conn.request(get, _REQUEST_TIMEOUT_S)
    if answer.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return answer.ext_fields["value"]


async def test_the_kv_table_moves_between_rocketmq_and_rocklet_in_kv_config_json(
    admin: MqAdmin, tmp_path: Path
) -> None:
    """Each system's name server reads what the other wrote to ``~/namesrv/kvConfig.json``."""
    order = "ORDER_TOPIC_CONFIG"

    async def started(system: str) -> NameServer:
        ns = NameServer(system, tmp_path)  # the same work dir: the same user.home
        extra = "listenHost=127.0.0.1\n" if system == "rocklet" else ""
        ns.conf.write_text(f"listenPort={ns.port}\n{extra}")
        await asyncio.to_thread(ns.start)
        return ns

    rocketmq = await started("rocketmq")
    try:
        await mqadmin(admin, rocketmq, "updateOrderConf", "-t", "KvOrd", "-m", "put", "-v", "b:4")
        await mqadmin(admin, rocketmq, "updateKvConfig", "-s", "KvNs", "-k", "gone", "-v", "1")
        assert await kv_value(rocketmq, "KvNs", "gone") == "1"
    finally:
        rocketmq.stop()
    rocklet = await started("rocklet")
    try:
        assert await kv_value(rocklet, order, "KvOrd") == "b:4"
        assert await kv_value(rocklet, "KvNs", "gone") == "1"
        await mqadmin(admin, rocklet, "updateKvConfig", "-s", "KvNs", "-k", "new", "-v", "2")
        await mqadmin(admin, rocklet, "deleteKvConfig", "-s", "KvNs", "-k", "gone")
    finally:
        rocklet.stop()
    rocketmq = await started("rocketmq")
    try:
        assert await kv_value(rocketmq, order, "KvOrd") == "b:4"
        assert await kv_value(rocketmq, "KvNs", "new") == "2"
        assert await kv_value(rocketmq, "KvNs", "gone") is None
    finally:
        rocketmq.stop()
