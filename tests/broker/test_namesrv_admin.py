"""The name server's admin requests over real sockets: write perms (205 / 327) and its
configuration (319 / 318), as RocketMQ 4.9.4's ``DefaultRequestProcessor`` serves them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocklet.broker.config import NamesrvConfig, load_namesrv_config, parse_properties
from rocklet.broker.namesrv import NamesrvServer
from rocklet.broker.namesrv.configuration import NO_EFFECT_DEFAULTS
from rocklet.broker.rocketmq_keys import ROCKETMQ_NAMESRV_KEYS
from rocklet.client.instance import ClientInstance
from rocklet.protocol import RemotingCommand, RequestCode, ResponseCode
from rocklet.protocol.bodies.topic import TopicConfig
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.broker.acl_helpers import ADMIN, PRODUCER, acl_document, raw_request, write_acl
from tests.broker.test_namesrv import call, register_cmd, route_cmd, topics
from tests.cluster import running_cluster
from tests.compat.harness import create_topic

MASTER_B = "10.0.0.7:10911"


def loaded(conf: Path) -> NamesrvConfig:
    """``conf`` as ``rocklet namesrv -c`` loads it, ``user.home`` beside it (not ~)."""
    return load_namesrv_config(conf, home=conf.parent / "home")


def wipe_cmd(broker: str) -> RemotingCommand:
    return RemotingCommand(RequestCode.WIPE_WRITE_PERM_OF_BROKER, ext_fields={"brokerName": broker})


def add_cmd(broker: str) -> RemotingCommand:
    return RemotingCommand(RequestCode.ADD_WRITE_PERM_OF_BROKER, ext_fields={"brokerName": broker})


def get_config_cmd() -> RemotingCommand:
    return RemotingCommand(RequestCode.GET_NAMESRV_CONFIG)


def update_cmd(text: str) -> RemotingCommand:
    return RemotingCommand(RequestCode.UPDATE_NAMESRV_CONFIG, body=text.encode())


async def perms(conn: Connection, topic: str) -> dict[str, int]:
    route = await call(conn, route_cmd(topic))
    assert route.code == ResponseCode.SUCCESS, route.remark
    return {q["brokerName"]: q["perm"] for q in json.loads(route.body)["queueDatas"]}


async def shown_config(conn: Connection) -> dict[str, str]:
    answer = await call(conn, get_config_cmd())
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return parse_properties(answer.body.decode())


# --- WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER ------------------------------------


async def test_wipe_then_add_write_perm_of_one_broker_group(conn: Connection) -> None:
    # broker-a: read-write, read-only and inherit|read|write topics; broker-b shares T1.
    table_a = topics(
        TopicConfig("T1", 4, 4, 6), TopicConfig("T2", 4, 4, 4), TopicConfig("T3", 2, 2, 7)
    )
    assert (await call(conn, register_cmd(table=table_a))).code == ResponseCode.SUCCESS
    table_b = topics(TopicConfig("T1", 4, 4, 6))
    registered = await call(conn, register_cmd(table=table_b, addr=MASTER_B, name="broker-b"))
    assert registered.code == ResponseCode.SUCCESS

    wiped = await call(conn, wipe_cmd("broker-a"))
    assert (wiped.code, wiped.remark) == (ResponseCode.SUCCESS, None)
    # Every topic the group serves counts, writable or not (operateWritePermOfBroker).
    assert dict(wiped.ext_fields) == {"wipeTopicCount": "3"}
    assert await perms(conn, "T1") == {"broker-a": 4, "broker-b": 6}
    assert await perms(conn, "T2") == {"broker-a": 4}
    assert await perms(conn, "T3") == {"broker-a": 5}  # only WRITE goes

    added = await call(conn, add_cmd("broker-a"))
    assert (added.code, added.remark) == (ResponseCode.SUCCESS, None)
    assert dict(added.ext_fields) == {"addTopicCount": "3"}
    # Java sets exactly READ|WRITE: the read-only topic becomes writable, INHERIT goes.
    assert await perms(conn, "T1") == {"broker-a": 6, "broker-b": 6}
    assert await perms(conn, "T2") == {"broker-a": 6}
    assert await perms(conn, "T3") == {"broker-a": 6}

    for cmd, field in (
        (wipe_cmd("nobody"), "wipeTopicCount"),
        (add_cmd("nobody"), "addTopicCount"),
    ):
        answer = await call(conn, cmd)
        assert (answer.code, dict(answer.ext_fields)) == (ResponseCode.SUCCESS, {field: "0"})


async def test_a_wiped_broker_stays_wiped_until_its_topic_table_changes(conn: Connection) -> None:
    # RouteInfoManager.registerBroker rebuilds queue data only for a new data version
    # (or a first registration): the 30 s re-registrations keep the wipe.
    table = topics(TopicConfig("T1", 4, 4, 6), counter=1)
    assert (await call(conn, register_cmd(table=table))).code == ResponseCode.SUCCESS
    await call(conn, wipe_cmd("broker-a"))
    assert (await call(conn, register_cmd(table=table))).code == ResponseCode.SUCCESS
    assert await perms(conn, "T1") == {"broker-a": 4}

    changed = topics(TopicConfig("T1", 4, 4, 6), TopicConfig("T2", 4, 4, 6), counter=2)
    assert (await call(conn, register_cmd(table=changed))).code == ResponseCode.SUCCESS
    assert await perms(conn, "T1") == {"broker-a": 6}
    assert await perms(conn, "T2") == {"broker-a": 6}


async def test_a_real_brokers_new_topic_gives_its_perms_back(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path / "store") as cluster,
        await open_connection("127.0.0.1", cluster.namesrv.port) as conn,
    ):
        await create_topic(cluster.broker.addr, "Kept", 4)
        wiped = await call(conn, wipe_cmd("broker-a"))
        assert int(wiped.ext_fields["wipeTopicCount"]) >= 2  # Kept, TBW102, ...
        assert await perms(conn, "Kept") == {"broker-a": 4}
        # A new topic is a new data version: the broker re-registers its whole table,
        # and the name server rebuilds every queue data from it.
        await create_topic(cluster.broker.addr, "Fresh", 4)
        assert await perms(conn, "Kept") == {"broker-a": 6}
        assert await perms(conn, "Fresh") == {"broker-a": 6}


# --- GET_NAMESRV_CONFIG ------------------------------------------------------------------------


async def test_get_config_has_rocketmqs_keys_with_rocklets_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROCKETMQ_HOME", "/opt/rocketmq")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    conf = tmp_path / "namesrv.properties"
    conf.write_text(
        "# test\nlistenPort=0\nserverSocketSndBufSize=65536\nproductEnvName=test\n"
        "someOtherKey=kept\ntls.server.keyPassword=s3cret\n"
    )
    server = await NamesrvServer.start("127.0.0.1", 0, config=loaded(conf))
    try:
        async with await open_connection("127.0.0.1", server.port) as conn:
            answer = await call(conn, get_config_cmd())
            shown = parse_properties(answer.body.decode())
    finally:
        await server.stop()
    assert answer.code == ResponseCode.SUCCESS and answer.remark is None
    # The 20 keys 4.9.4 prints (NamesrvConfig + NettyServerConfig), all there.
    assert shown.keys() >= ROCKETMQ_NAMESRV_KEYS
    assert len(ROCKETMQ_NAMESRV_KEYS) == 20
    assert {k: shown[k] for k in NO_EFFECT_DEFAULTS if k != "productEnvName"} == {
        k: v for k, v in NO_EFFECT_DEFAULTS.items() if k != "productEnvName"
    }
    assert shown["productEnvName"] == "test"  # the file's value, as Java shows it
    assert shown["listenPort"] == str(server.port)  # the bound port, not 0
    assert shown["configStorePath"] == str(conf)
    assert shown["kvConfigPath"] == str(tmp_path / "home" / "namesrv" / "kvConfig.json")
    assert shown["rocketmqHome"] == "/opt/rocketmq"
    assert (shown["orderMessageEnable"], shown["serverSocketSndBufSize"]) == ("false", "65536")
    # Rocklet's own settings and the file's other keys too; a key password never.
    assert (shown["listenHost"], shown["aclEnable"], shown["someOtherKey"]) == (
        "127.0.0.1",
        "false",
        "kept",
    )
    assert "tls.server.keyPassword" not in shown
    assert b"s3cret" not in answer.body
    # MixAll.properties2String's form: key=value lines.
    assert answer.body.decode().endswith("\n")
    assert all("=" in line for line in answer.body.decode().splitlines())


# --- UPDATE_NAMESRV_CONFIG ---------------------------------------------------------------------


async def test_update_applies_order_message_enable_at_once_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    conf = tmp_path / "namesrv.properties"
    original = "# the operator's comment\nlistenHost=127.0.0.1\norderMessageEnable=false\n"
    conf.write_text(original)
    conf.chmod(0o640)
    server = await NamesrvServer.start("127.0.0.1", 0, config=loaded(conf))
    try:
        async with await open_connection("127.0.0.1", server.port) as conn:
            await call(conn, register_cmd(table=topics(TopicConfig("Ordered", 4, 4, 6))))
            put = RemotingCommand(
                RequestCode.PUT_KV_CONFIG,
                ext_fields={"namespace": "ORDER_TOPIC_CONFIG", "key": "Ordered", "value": "b:4"},
            )
            assert (await call(conn, put)).code == ResponseCode.SUCCESS
            route = json.loads((await call(conn, route_cmd("Ordered"))).body)
            assert "orderTopicConf" not in route

            updated = await call(conn, update_cmd("orderMessageEnable=true\n"))
            assert (updated.code, updated.remark) == (ResponseCode.SUCCESS, None)
            route = json.loads((await call(conn, route_cmd("Ordered"))).body)
            assert route["orderTopicConf"] == "b:4"  # live, as Java reads the field per request
            assert (await shown_config(conn))["orderMessageEnable"] == "true"
            assert server.config.order_message_enable
    finally:
        await server.stop()
    # Written where RocketMQ writes (configStorePath = the -c file): the line replaced in
    # place, the rest kept; the previous text in FILE.bak, the mode kept.
    assert conf.read_text() == original.replace("=false", "=true")
    assert (tmp_path / "namesrv.properties.bak").read_text() == original
    assert conf.stat().st_mode & 0o777 == 0o640
    assert not (tmp_path / "namesrv.properties.tmp").exists()

    restarted = await NamesrvServer.start("127.0.0.1", 0, config=loaded(conf))
    try:
        assert restarted.config.order_message_enable
        async with await open_connection("127.0.0.1", restarted.port) as conn:
            assert (await shown_config(conn))["orderMessageEnable"] == "true"
    finally:
        await restarted.stop()


async def test_restart_only_and_no_effect_keys_are_shown_and_saved(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenHost=127.0.0.1\n")
    server = await NamesrvServer.start("127.0.0.1", 0, config=loaded(conf))
    try:
        async with await open_connection("127.0.0.1", server.port) as conn:
            body = "listenPort=19876\nserverWorkerThreads=16\nclusterTest=TRUE\nnoSuchKey=1\n"
            answer = await call(conn, update_cmd(body))
            assert answer.code == ResponseCode.SUCCESS
            assert answer.remark == (
                "takes effect after a restart: listenPort; "
                "no effect in Rocklet: clusterTest, serverWorkerThreads; "
                "unknown, ignored: noSuchKey"
            )
            shown = await shown_config(conn)
            # Shown as set (Java shows its fields), while the server keeps its port.
            assert (shown["listenPort"], shown["serverWorkerThreads"]) == ("19876", "16")
            assert shown["clusterTest"] == "true"
            assert "noSuchKey" not in shown
            assert server.config.listen_port == 0
            assert (await call(conn, route_cmd("T"))).code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        await server.stop()
    saved = parse_properties(conf.read_text())
    assert saved == {
        "listenHost": "127.0.0.1",
        "listenPort": "19876",
        "serverWorkerThreads": "16",
        "clusterTest": "true",
    }
    assert loaded(conf).listen_port == 19876


async def test_refused_updates_change_nothing(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenHost=127.0.0.1\n")
    server = await NamesrvServer.start("127.0.0.1", 0, config=loaded(conf))
    try:
        async with await open_connection("127.0.0.1", server.port) as conn:
            before = await shown_config(conn)
            # RocketMQ 4.9.7's answer (CVE-2023-37582); Rocklet's own paths likewise.
            for key in ("configStorePath", "kvConfigPath", "aclFile", "tls.server.certPath"):
                answer = await call(conn, update_cmd(f"orderMessageEnable=true\n{key}=/tmp/x\n"))
                assert (answer.code, answer.remark) == (
                    ResponseCode.NO_PERMISSION,
                    "Can not update config path",
                ), key
            for body, named in (
                ("orderMessageEnable=true\nlistenPort=abc\n", "listenPort"),
                ("listenPort=70000\n", "listenPort"),
                ("orderMessageEnable=maybe\n", "orderMessageEnable"),
                ("serverWorkerThreads=many\n", "serverWorkerThreads"),
            ):
                answer = await call(conn, update_cmd(body))
                assert answer.code == ResponseCode.SYSTEM_ERROR, body
                assert named in (answer.remark or ""), answer.remark
            # Nothing applicable: nothing written (as Java, the body alone is no change).
            for body in ("", "# only a comment\n", "noSuchKey=1\n"):
                answer = await call(conn, update_cmd(body))
                assert answer.code == ResponseCode.SUCCESS, body
            assert await shown_config(conn) == before
            assert not server.config.order_message_enable
    finally:
        await server.stop()
    assert conf.read_text() == "listenHost=127.0.0.1\n"
    assert not (tmp_path / "namesrv.properties.bak").exists()


async def test_a_file_that_cannot_be_written_leaves_the_config_as_it_was(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    config = NamesrvConfig(config_file=blocker / "namesrv.properties")
    server = await NamesrvServer.start("127.0.0.1", 0, config=config)
    try:
        async with await open_connection("127.0.0.1", server.port) as conn:
            answer = await call(conn, update_cmd("orderMessageEnable=true\n"))
            assert answer.code == ResponseCode.SYSTEM_ERROR
            assert "not changed: cannot save" in (answer.remark or "")
            assert (await shown_config(conn))["orderMessageEnable"] == "false"
            assert not server.config.order_message_enable
    finally:
        await server.stop()


async def test_without_a_config_file_updates_stay_in_memory(
    namesrv: NamesrvServer, conn: Connection
) -> None:
    assert "configStorePath" not in await shown_config(conn)
    answer = await call(conn, update_cmd("orderMessageEnable=true\n"))
    assert answer.code == ResponseCode.SUCCESS
    assert answer.remark == "not saved: the name server was started without a config file"
    assert namesrv.config.order_message_enable


# --- with the name server's ACL on (Rocklet only) ------------------------------------------------


async def test_acl_guards_the_config_and_write_perm_requests(tmp_path: Path) -> None:
    acl_file = tmp_path / "ns" / "plain_acl.yml"
    write_acl(acl_file, acl_document())
    conf = tmp_path / "namesrv.properties"
    conf.write_text(f"aclEnable=true\naclFile={acl_file}\n")
    server = await NamesrvServer.start("127.0.0.1", 0, config=loaded(conf))
    addr = f"127.0.0.1:{server.port}"
    update = RequestCode.UPDATE_NAMESRV_CONFIG
    body = b"orderMessageEnable=true\n"
    try:
        async with ClientInstance(addr) as stranger:
            for code in (update, RequestCode.GET_NAMESRV_CONFIG):
                refused = await raw_request(stranger, addr, code, body=body)
                assert refused.code == ResponseCode.SYSTEM_ERROR, code
                assert "No accessKey is configured" in (refused.remark or "")
        async with ClientInstance(addr, credentials=PRODUCER) as not_admin:
            refused = await raw_request(not_admin, addr, update, body=body)
            assert "Need admin permission for request code=318" in (refused.remark or "")
            wipe = await raw_request(
                not_admin, addr, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "b"}
            )
            assert "Need admin permission for request code=205" in (wipe.remark or "")
            # Reading the configuration needs a valid account, not an admin one.
            shown = await raw_request(not_admin, addr, RequestCode.GET_NAMESRV_CONFIG)
            assert shown.code == ResponseCode.SUCCESS
            assert parse_properties(shown.body.decode())["aclEnable"] == "true"
            assert not server.config.order_message_enable
        async with ClientInstance(addr, credentials=ADMIN) as admin:
            done = await raw_request(admin, addr, update, body=body)
            assert done.code == ResponseCode.SUCCESS, done.remark
            assert server.config.order_message_enable
            added = await raw_request(
                admin, addr, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "b"}
            )
            assert dict(added.ext_fields) == {"addTopicCount": "0"}
    finally:
        await server.stop()
    assert parse_properties(conf.read_text())["orderMessageEnable"] == "true"
