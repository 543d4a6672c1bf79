"""The name server over real sockets: registration, routes, expiry, KV config."""

from __future__ import annotations

import asyncio
import json
import zlib

import pytest

from rocklet.broker.config import NamesrvConfig
from rocklet.broker.namesrv import NamesrvServer
from rocklet.protocol import RemotingCommand, RequestCode, ResponseCode
from rocklet.protocol.bodies.register import RegisterBrokerBody
from rocklet.protocol.bodies.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from rocklet.transport.clock import ManualClock
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection

TIMEOUT = 5.0
MASTER = "10.0.0.5:10911"
SLAVE = "10.0.0.6:10911"


def topics(*configs: TopicConfig, counter: int = 1) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        {c.topic_name: c for c in configs}, DataVersion(counter, 1_700_000_000_000)
    )


def register_cmd(
    *,
    table: TopicConfigSerializeWrapper,
    addr: str = MASTER,
    broker_id: int = 0,
    name: str = "broker-a",
    cluster: str = "DefaultCluster",
    compressed: bool = False,
    crc: int | None = None,
) -> RemotingCommand:
    body_obj = RegisterBrokerBody(table)
    body = body_obj.encode_compressed() if compressed else body_obj.to_json()
    return RemotingCommand(
        code=RequestCode.REGISTER_BROKER,
        ext_fields={
            "brokerName": name,
            "brokerAddr": addr,
            "clusterName": cluster,
            "haServerAddr": addr.replace("10911", "10912"),
            "brokerId": str(broker_id),
            "compressed": "true" if compressed else "false",
            "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc),
        },
        body=body,
    )


def route_cmd(topic: str, version: int = 401) -> RemotingCommand:
    return RemotingCommand(
        code=RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic}, version=version
    )


async def call(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    return await conn.request(cmd, TIMEOUT)


@pytest.mark.parametrize("compressed", [False, True])
async def test_register_then_route_has_the_exact_java_shape(
    conn: Connection, compressed: bool
) -> None:
    table = topics(TopicConfig("TopicA", 4, 4, 6), TopicConfig("TopicB", 8, 2, 4))
    answer = await call(conn, register_cmd(table=table, compressed=compressed))
    assert answer.code == ResponseCode.SUCCESS
    assert dict(answer.ext_fields) == {}  # a master gets no HA/master address
    route = await call(conn, route_cmd("TopicA"))
    assert route.code == ResponseCode.SUCCESS
    assert route.body == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.5:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":'
        b'"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
    )
    queue = json.loads(route.body)["queueDatas"][0]
    assert all(type(queue[k]) is int for k in ("perm", "readQueueNums", "writeQueueNums"))
    other = json.loads((await call(conn, route_cmd("TopicB"))).body)["queueDatas"][0]
    assert (other["readQueueNums"], other["writeQueueNums"], other["perm"]) == (8, 2, 4)


async def test_unknown_topic_is_17_with_javas_remark(conn: Connection) -> None:
    answer = await call(conn, route_cmd("Nope"))
    assert answer.code == ResponseCode.TOPIC_NOT_EXIST
    assert answer.remark == (
        "No topic route info in name server for the topic: Nope"
        "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
    )
    assert answer.body == b""


async def test_crc_mismatch_is_refused(conn: Connection) -> None:
    answer = await call(conn, register_cmd(table=topics(TopicConfig("T", 4, 4, 6)), crc=12345))
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    assert (await call(conn, route_cmd("T"))).code == ResponseCode.TOPIC_NOT_EXIST


async def test_missing_header_field_is_system_error(conn: Connection) -> None:
    answer = await call(conn, RemotingCommand(code=RequestCode.REGISTER_BROKER))
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark is not None and "<brokerName> is null" in answer.remark


async def test_slave_gets_master_addresses_and_does_not_build_queues(conn: Connection) -> None:
    await call(conn, register_cmd(table=topics(TopicConfig("T", 4, 4, 6))))
    slave = await call(
        conn,
        register_cmd(table=topics(TopicConfig("OnlyOnSlave", 4, 4, 6)), addr=SLAVE, broker_id=1),
    )
    assert slave.code == ResponseCode.SUCCESS
    assert dict(slave.ext_fields) == {"haServerAddr": "10.0.0.5:10912", "masterAddr": MASTER}
    assert (await call(conn, route_cmd("OnlyOnSlave"))).code == ResponseCode.TOPIC_NOT_EXIST
    route = json.loads((await call(conn, route_cmd("T"))).body)
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": MASTER, "1": SLAVE}


async def test_cluster_info_and_topic_lists(conn: Connection) -> None:
    await call(conn, register_cmd(table=topics(TopicConfig("T1", 4, 4, 6))))
    await call(
        conn,
        register_cmd(
            table=topics(TopicConfig("T2", 2, 2, 6)),
            addr="10.0.0.7:10911",
            name="broker-b",
            cluster="Other",
        ),
    )
    info = await call(conn, RemotingCommand(code=RequestCode.GET_BROKER_CLUSTER_INFO))
    assert json.loads(info.body) == {
        "brokerAddrTable": {
            "broker-a": {
                "brokerAddrs": {"0": MASTER},
                "brokerName": "broker-a",
                "cluster": "DefaultCluster",
            },
            "broker-b": {
                "brokerAddrs": {"0": "10.0.0.7:10911"},
                "brokerName": "broker-b",
                "cluster": "Other",
            },
        },
        "clusterAddrTable": {"DefaultCluster": ["broker-a"], "Other": ["broker-b"]},
    }
    all_topics = await call(
        conn, RemotingCommand(code=RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    )
    assert all_topics.body == b'{"topicList":["T1","T2"]}'
    by_cluster = await call(
        conn,
        RemotingCommand(code=RequestCode.GET_TOPICS_BY_CLUSTER, ext_fields={"cluster": "Other"}),
    )
    assert json.loads(by_cluster.body) == {"topicList": ["T2"]}


async def test_silent_broker_expires_on_scan_and_its_connection_closes(
    namesrv: NamesrvServer, clock: ManualClock
) -> None:
    broker = await open_connection("127.0.0.1", namesrv.port)
    await call(broker, register_cmd(table=topics(TopicConfig("T", 4, 4, 6))))
    clock.advance(120_000)
    assert namesrv.scan_once() == 0  # exactly 120 s is still alive (Java: strictly older)
    clock.advance(1)
    assert namesrv.scan_once() == 1
    await asyncio.wait_for(broker.wait_closed(), TIMEOUT)
    async with await open_connection("127.0.0.1", namesrv.port) as client:
        assert (await call(client, route_cmd("T"))).code == ResponseCode.TOPIC_NOT_EXIST
    await broker.close()


async def test_reregistration_keeps_a_broker_alive(
    namesrv: NamesrvServer, conn: Connection, clock: ManualClock
) -> None:
    cmd = register_cmd(table=topics(TopicConfig("T", 4, 4, 6)))
    await call(conn, cmd)
    clock.advance(100_000)
    await call(conn, cmd)
    clock.advance(100_000)
    assert namesrv.scan_once() == 0
    assert (await call(conn, route_cmd("T"))).code == ResponseCode.SUCCESS


async def test_broker_connection_close_drops_its_routes(namesrv: NamesrvServer) -> None:
    broker = await open_connection("127.0.0.1", namesrv.port)
    await call(broker, register_cmd(table=topics(TopicConfig("T", 4, 4, 6))))
    (server_side,) = namesrv.connections
    await broker.close()
    await asyncio.wait_for(server_side.wait_closed(), TIMEOUT)
    async with await open_connection("127.0.0.1", namesrv.port) as client:
        assert (await call(client, route_cmd("T"))).code == ResponseCode.TOPIC_NOT_EXIST
        info = await call(client, RemotingCommand(code=RequestCode.GET_BROKER_CLUSTER_INFO))
    assert json.loads(info.body) == {"brokerAddrTable": {}, "clusterAddrTable": {}}


async def test_unregister_drops_the_broker(conn: Connection) -> None:
    await call(conn, register_cmd(table=topics(TopicConfig("T", 4, 4, 6))))
    answer = await call(
        conn,
        RemotingCommand(
            code=RequestCode.UNREGISTER_BROKER,
            ext_fields={
                "brokerName": "broker-a",
                "brokerAddr": MASTER,
                "clusterName": "DefaultCluster",
                "brokerId": "0",
            },
        ),
    )
    assert answer.code == ResponseCode.SUCCESS
    assert (await call(conn, route_cmd("T"))).code == ResponseCode.TOPIC_NOT_EXIST


async def test_delete_topic(conn: Connection) -> None:
    await call(
        conn, register_cmd(table=topics(TopicConfig("T", 4, 4, 6), TopicConfig("U", 1, 1, 6)))
    )
    answer = await call(
        conn, RemotingCommand(code=RequestCode.DELETE_TOPIC_IN_NAMESRV, ext_fields={"topic": "T"})
    )
    assert answer.code == ResponseCode.SUCCESS
    assert (await call(conn, route_cmd("T"))).code == ResponseCode.TOPIC_NOT_EXIST
    assert (await call(conn, route_cmd("U"))).code == ResponseCode.SUCCESS


async def test_kv_config_round_trip(conn: Connection) -> None:
    def kv(code: int, **fields: str) -> RemotingCommand:
        return RemotingCommand(code=code, ext_fields=fields)

    put = await call(conn, kv(RequestCode.PUT_KV_CONFIG, namespace="NS", key="k", value="v"))
    assert put.code == ResponseCode.SUCCESS
    got = await call(conn, kv(RequestCode.GET_KV_CONFIG, namespace="NS", key="k"))
    assert (got.code, dict(got.ext_fields)) == (ResponseCode.SUCCESS, {"value": "v"})
    listed = await call(conn, kv(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="NS"))
    assert listed.body == b'{"table":{"k":"v"}}'
    await call(conn, kv(RequestCode.DELETE_KV_CONFIG, namespace="NS", key="k"))
    missing = await call(conn, kv(RequestCode.GET_KV_CONFIG, namespace="NS", key="k"))
    assert (missing.code, missing.remark) == (
        ResponseCode.QUERY_NOT_FOUND,
        "No config item, Namespace: NS Key: k",
    )
    empty = await call(conn, kv(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="NS"))
    assert empty.code == ResponseCode.QUERY_NOT_FOUND


async def test_order_topic_conf_is_returned_to_brokers(conn: Connection) -> None:
    await call(
        conn,
        RemotingCommand(
            code=RequestCode.PUT_KV_CONFIG,
            ext_fields={"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"},
        ),
    )
    answer = await call(conn, register_cmd(table=topics(TopicConfig("T", 4, 4, 6))))
    assert answer.body == b'{"table":{"T":"broker-a:4"}}'


async def test_old_clients_can_get_fastjson_unquoted_keys(clock: ManualClock) -> None:
    config = NamesrvConfig(unquoted_route_keys_for_old_clients=True)
    server = await NamesrvServer.start("127.0.0.1", 0, config=config, clock=clock)
    try:
        async with await open_connection("127.0.0.1", server.port) as c:
            await call(c, register_cmd(table=topics(TopicConfig("T", 4, 4, 6))))
            old = await call(c, route_cmd("T", version=63))
            new = await call(c, route_cmd("T", version=401))
    finally:
        await server.stop()
    assert b'"brokerAddrs":{0:"10.0.0.5:10911"}' in old.body
    assert b'"brokerAddrs":{"0":"10.0.0.5:10911"}' in new.body


async def test_query_data_version_reports_changes_and_keeps_the_broker_alive(
    namesrv: NamesrvServer, conn: Connection, clock: ManualClock
) -> None:
    table = topics(TopicConfig("T", 4, 4, 6), counter=7)
    await call(conn, register_cmd(table=table))

    def query(version: DataVersion) -> RemotingCommand:
        return RemotingCommand(
            code=RequestCode.QUERY_DATA_VERSION,
            ext_fields={
                "brokerName": "broker-a",
                "brokerAddr": MASTER,
                "clusterName": "DefaultCluster",
                "brokerId": "0",
            },
            body=version.to_json(),
        )

    clock.advance(100_000)
    same = await call(conn, query(table.data_version))
    assert (same.code, dict(same.ext_fields)) == (ResponseCode.SUCCESS, {"changed": "false"})
    assert DataVersion.from_json(same.body) == table.data_version
    newer = await call(conn, query(DataVersion(8, 1)))
    assert dict(newer.ext_fields) == {"changed": "true"}
    clock.advance(100_000)
    assert namesrv.scan_once() == 0  # the query refreshed its last-update time
