"""Admin requests against a real broker, with the frames mqadmin / the admin API send.

Each answer is parsed with the body classes Java's tools use (TopicConfigSerializeWrapper,
TopicStatsTable, ConsumeStats, GroupList, KVTable, ConsumerConnection, ...), so a shape
mistake fails here. Offsets are committed the way consumers commit them
(UPDATE_CONSUMER_OFFSET), and clients register the way they do (HEART_BEAT).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from rocklet.protocol import fastjson
from rocklet.protocol.bodies.cluster import GroupList, KVTable
from rocklet.protocol.bodies.consumer import ResetOffsetBody
from rocklet.protocol.bodies.heartbeat import (
    MessageModel,
)
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.route import TopicRouteData
from rocklet.protocol.bodies.running import (
    ConsumerConnection,
    ConsumerRunningInfo,
    ProcessQueueInfo,
)
from rocklet.protocol.bodies.stats import ConsumeStats, TopicStatsTable
from rocklet.protocol.bodies.subscription_group import (
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from rocklet.protocol.bodies.topic import TopicConfigSerializeWrapper
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.properties import encode_properties
from rocklet.transport.connection import Connection, HandlerResult
from rocklet.transport.dial import open_connection
from tests.broker.wire_clients import commit_offset, consumer_heartbeat
from tests.cluster import Cluster, running_cluster

BROKER = "broker-a"


def admin(code: RequestCode, body: bytes = b"", **ext: str) -> RemotingCommand:
    return RemotingCommand(code, ext_fields=ext, body=body)


def send(
    topic: str, queue_id: int, body: bytes, *, tag: str = "T", keys: str = ""
) -> RemotingCommand:
    props = {"TAGS": tag} | ({"KEYS": keys} if keys else {})
    ext = {
        "producerGroup": "PG",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": str(queue_id),
        "sysFlag": "0",
        "bornTimestamp": "1700000000000",
        "flag": "0",
        "properties": encode_properties(props).decode(),
    }
    return RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields=ext, body=body)


def create_topic(topic: str, read: int, write: int, perm: int = 6) -> RemotingCommand:
    return admin(
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        topic=topic,
        defaultTopic="TBW102",
        readQueueNums=str(read),
        writeQueueNums=str(write),
        perm=str(perm),
        topicFilterType="SINGLE_TAG",
        topicSysFlag="0",
        order="false",
    )


async def ok(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    answer = await conn.request(cmd, 5)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return answer


async def all_topics(conn: Connection) -> dict[str, tuple[int, int, int]]:
    answer = await ok(conn, admin(RequestCode.GET_ALL_TOPIC_CONFIG))
    table = TopicConfigSerializeWrapper.from_json(answer.body).topic_config_table
    return {n: (c.read_queue_nums, c.write_queue_nums, c.perm) for n, c in table.items()}


async def test_create_route_update_and_delete_topic(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
    ):
        registered = asyncio.create_task(cluster.broker.next_registration())
        await ok(conn, create_topic("AdminT", 3, 2))
        # The change re-registers the broker at once: the name server routes the topic.
        await asyncio.wait_for(registered, 5)
        async with await open_connection("127.0.0.1", cluster.namesrv.port) as ns:
            route = await ok(ns, admin(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="AdminT"))
        (queues,) = TopicRouteData.from_json(route.body).queue_datas
        assert (queues.broker_name, queues.read_queue_nums, queues.write_queue_nums) == (
            BROKER,
            3,
            2,
        )
        assert (await all_topics(conn))["AdminT"] == (3, 2, 6)
        await ok(conn, create_topic("AdminT", 4, 4, perm=4))  # update in place
        assert (await all_topics(conn))["AdminT"] == (4, 4, 4)

        for name, perm in (("bad name!", 6), ("SCHEDULE_TOPIC_XXXX", 6), ("rmq_sys_x", 6)):
            refused = await conn.request(create_topic(name, 1, 1, perm), 5)
            assert refused.code == ResponseCode.SYSTEM_ERROR and refused.remark, name
        conflict = await conn.request(create_topic("DefaultCluster", 1, 1), 5)
        assert conflict.remark == "The topic[DefaultCluster] is conflict with system topic."
        bad_perm = await conn.request(create_topic("Perm", 1, 1, perm=16), 5)
        assert bad_perm.code == ResponseCode.SYSTEM_ERROR

        await ok(conn, commit_offset("G1", "AdminT", 0, 0))
        assert cluster.broker.ctx.offsets.groups_of("AdminT") == ["G1"]
        await ok(conn, admin(RequestCode.DELETE_TOPIC_IN_BROKER, topic="AdminT"))
        assert "AdminT" not in await all_topics(conn)
        assert cluster.broker.ctx.offsets.groups_of("AdminT") == []
        gone = await conn.request(admin(RequestCode.GET_TOPIC_STATS_INFO, topic="AdminT"), 5)
        assert gone.code == ResponseCode.TOPIC_NOT_EXIST
        system = await conn.request(admin(RequestCode.DELETE_TOPIC_IN_BROKER, topic="TBW102"), 5)
        assert system.code == ResponseCode.SYSTEM_ERROR
        assert "TBW102" in await all_topics(conn)


@asynccontextmanager
async def cpp_consumer(
    cluster: Cluster, group: str, topic: str, client_id: str
) -> AsyncIterator[asyncio.Queue[RemotingCommand]]:
    """A C++-flavoured push consumer connection; yields what the broker sends it.

    It answers GET_CONSUMER_RUNNING_INFO with a running-info body, as clients do.
    """
    seen: asyncio.Queue[RemotingCommand] = asyncio.Queue()
    info = ConsumerRunningInfo(
        properties={"consumeType": "CONSUME_PASSIVELY"},
        mq_table={MessageQueue(topic, BROKER, 0): ProcessQueueInfo(commit_offset=3)},
    )

    async def handler(_conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        if cmd.code != RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:  # sent when it joins
            await seen.put(cmd)
        if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            return cmd.make_response(ResponseCode.SUCCESS, body=info.to_json())
        return None

    async with await open_connection("127.0.0.1", cluster.broker.port, handler=handler) as conn:
        cmd = consumer_heartbeat(client_id, group, topic, language="CPP")
        assert (await conn.request(cmd, 5)).code == ResponseCode.SUCCESS
        yield seen


async def test_stats_lag_offsets_and_reset(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
    ):
        for queue_id, count in ((0, 5), (1, 3)):
            for i in range(count):
                await ok(conn, send("Lag", queue_id, f"{queue_id}-{i}".encode()))
        await ok(conn, commit_offset("LagG", "Lag", 0, 3))

        stats = await ok(conn, admin(RequestCode.GET_TOPIC_STATS_INFO, topic="Lag"))
        ranges = TopicStatsTable.from_json(stats.body).offset_table
        assert len(ranges) == 4
        q0, q1, q2 = (ranges[MessageQueue("Lag", BROKER, q)] for q in range(3))
        assert (q0.min_offset, q0.max_offset, q1.max_offset, q2.max_offset) == (0, 5, 3, 0)
        assert q0.last_update_timestamp > 0 and q2.last_update_timestamp == 0

        for topic in ({"consumerGroup": "LagG", "topic": "Lag"}, {"consumerGroup": "LagG"}):
            ask = RemotingCommand(RequestCode.GET_CONSUME_STATS, ext_fields=topic)
            answer = await ok(conn, ask)
            consume = ConsumeStats.from_json(answer.body)
            lag0 = consume.offset_table[MessageQueue("Lag", BROKER, 0)]
            lag1 = consume.offset_table[MessageQueue("Lag", BROKER, 1)]
            assert (lag0.broker_offset, lag0.consumer_offset) == (5, 3)
            assert 0 < lag0.last_timestamp <= q0.last_update_timestamp
            assert (lag1.broker_offset, lag1.consumer_offset, lag1.last_timestamp) == (3, 0, 0)
            assert consume.total_diff == 2 + 3 and consume.consume_tps == 0

        who = await ok(conn, admin(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, topic="Lag"))
        assert GroupList.from_json(who.body).group_list == ("LagG",)
        offsets = await ok(conn, admin(RequestCode.GET_ALL_CONSUMER_OFFSET))
        assert b'"Lag@LagG":{0:3}' in offsets.body  # fastjson's unquoted queue ids
        assert fastjson.loads(offsets.body)["offsetTable"]["Lag@LagG"] == {"0": 3}

        async with cpp_consumer(cluster, "LagG", "Lag", "cpp-1") as seen:
            # Not forced and to the end: offsets only move backwards, so q0 stays at 3.
            # Sent in Java's name: the C++ member is still told in the list form it reads.
            back = await ok(conn, reset("Lag", "LagG", -1, force=False))
            answered = ResetOffsetBody.from_json(back.body).offset_table  # Java's map form
            assert answered == {
                MessageQueue("Lag", BROKER, q): o for q, o in enumerate((3, 3, 0, 0))
            }
            assert cluster.broker.ctx.offsets.offsets_of("LagG", "Lag") == {0: 3, 1: 3, 2: 0, 3: 0}
            notice = await asyncio.wait_for(seen.get(), 5)
            assert notice.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET
            entries = json.loads(notice.body)["offsetTable"]  # the C++ client's list form
            assert {(e["queueId"], e["offset"]) for e in entries} == {
                (0, 3),
                (1, 3),
                (2, 0),
                (3, 0),
            }

            await ok(conn, reset("Lag", "LagG", 0, force=True))
            assert cluster.broker.ctx.offsets.offsets_of("LagG", "Lag") == {0: 0, 1: 0, 2: 0, 3: 0}
            notice = await asyncio.wait_for(seen.get(), 5)
            assert notice.ext_fields["group"] == "LagG" and notice.ext_fields["topic"] == "Lag"
        unknown = await conn.request(reset("Lag", "NoSuchGroup", 0, force=True), 5)
        assert unknown.code == ResponseCode.SYSTEM_ERROR


def reset(topic: str, group: str, timestamp: int, *, force: bool) -> RemotingCommand:
    return admin(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        topic=topic,
        group=group,
        timestamp=str(timestamp),
        isForce="true" if force else "false",
    )


async def test_connections_and_relayed_running_info(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
        cpp_consumer(cluster, "RunG", "RunT", "cpp-run") as seen,
    ):
        listed = await ok(
            conn, admin(RequestCode.GET_CONSUMER_CONNECTION_LIST, consumerGroup="RunG")
        )
        connection = ConsumerConnection.from_json(listed.body)
        (member,) = connection.connection_set
        assert (member.client_id, member.language) == ("cpp-run", "CPP")
        assert member.client_addr.startswith("127.0.0.1:")
        assert "RunT" in connection.subscription_table
        assert connection.message_model is MessageModel.CLUSTERING
        offline = await conn.request(
            admin(RequestCode.GET_CONSUMER_CONNECTION_LIST, consumerGroup="Nobody"), 5
        )
        assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
        producers = await conn.request(
            admin(RequestCode.GET_PRODUCER_CONNECTION_LIST, producerGroup="Nobody"), 5
        )
        assert producers.code == ResponseCode.SYSTEM_ERROR

        ask = admin(
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            consumerGroup="RunG",
            clientId="cpp-run",
            jstackEnable="false",
        )
        relayed = await ok(conn, ask)
        info = ConsumerRunningInfo.from_json(relayed.body)
        assert info.properties == {"consumeType": "CONSUME_PASSIVELY"}
        assert info.mq_table[MessageQueue("RunT", BROKER, 0)].commit_offset == 3
        forwarded = await asyncio.wait_for(seen.get(), 5)
        assert forwarded.code == RequestCode.GET_CONSUMER_RUNNING_INFO
        assert forwarded.ext_fields["clientId"] == "cpp-run"

        ask_missing = admin(
            RequestCode.GET_CONSUMER_RUNNING_INFO, consumerGroup="RunG", clientId="gone"
        )
        missing = await conn.request(ask_missing, 5)
        assert missing.code == ResponseCode.SYSTEM_ERROR
        assert missing.remark == "The Consumer <RunG> <gone> not online"


async def test_subscription_groups(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
    ):
        config = SubscriptionGroupConfig("SG1", retry_max_times=3, consume_broadcast_enable=False)
        await ok(conn, admin(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, config.to_json()))
        listed = await ok(conn, admin(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        table = SubscriptionGroupWrapper.from_json(listed.body).subscription_group_table
        assert table["SG1"] == config and "CID_RMQ_SYS_TRANS" in table
        bad = await conn.request(admin(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, b"{"), 5)
        assert bad.code == ResponseCode.SYSTEM_ERROR

        for group in ("SG1", "SG2"):
            await ok(conn, commit_offset(group, "T", 0, 7))
        await ok(
            conn, admin(RequestCode.DELETE_SUBSCRIPTIONGROUP, groupName="SG1", removeOffset="true")
        )
        await ok(
            conn, admin(RequestCode.DELETE_SUBSCRIPTIONGROUP, groupName="SG2", removeOffset="false")
        )
        listed = await ok(conn, admin(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        table = SubscriptionGroupWrapper.from_json(listed.body).subscription_group_table
        assert "SG1" not in table and "SG2" not in table
        offsets = cluster.broker.ctx.offsets
        assert offsets.topics_of("SG1") == [] and offsets.offsets_of("SG2", "T") == {0: 7}


async def test_runtime_info_broker_config_and_delay_offsets(tmp_path: Path) -> None:
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
    ):
        await ok(conn, send("Rt", 0, b"before the restart"))
    async with (
        running_cluster(tmp_path) as cluster,
        await open_connection("127.0.0.1", cluster.broker.port) as conn,
    ):
        for i in range(2):
            await ok(conn, send("Rt", 0, b"x" * (i + 1)))
        answer = await ok(conn, admin(RequestCode.GET_BROKER_RUNTIME_INFO))
        table = KVTable.from_json(answer.body).table
        store = cluster.broker.ctx.store
        assert table["brokerVersionDesc"] == "V4_9_4" and table["brokerVersion"] == "401"
        assert table["msgPutTotalTodayNow"] == "2"  # since this boot
        assert table["commitLogMaxOffset"] == str(store.commitlog_max_offset())
        assert table["commitLogMinOffset"] == "0"
        assert table["runtime"].startswith("[ 0 days, 0 hours, ")
        assert int(table["earliestMessageTimeStamp"]) > 0
        # Only levels delayed delivery has an offset for are listed (none here).
        assert not [k for k in table if k.startswith("scheduleMessageOffset_")]
        assert len([float(t) for t in table["putTps"].split()]) == 3  # clusterList parses this
        assert 0.0 <= float(table["commitLogDiskRatio"]) <= 1.0
        assert table["diskFull"] == "false" and "diskFullReason" not in table
        assert table["diskSpaceLevel"] == store.disk.state.level.name

        config = await ok(conn, admin(RequestCode.GET_BROKER_CONFIG))
        lines = config.body.decode().splitlines()
        assert "brokerClusterName=DefaultCluster" in lines and "brokerName=broker-a" in lines
        assert "transactionTimeOut=6000" in lines and "flushDiskType=ASYNC_FLUSH" in lines
        assert json.loads(config.ext_fields["version"])["counter"] == 0

        same = admin(RequestCode.UPDATE_BROKER_CONFIG, b"brokerClusterName=DefaultCluster\n")
        await ok(conn, same)
        # Applied and saved like RocketMQ (tests/broker/test_broker_config_admin.py);
        # a value that does not parse is refused, naming the key.
        change = admin(RequestCode.UPDATE_BROKER_CONFIG, b"autoCreateTopicEnable=maybe\n")
        refused = await conn.request(change, 5)
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert "autoCreateTopicEnable" in (refused.remark or "")

        delay = await ok(conn, admin(RequestCode.GET_ALL_DELAY_OFFSET))
        assert delay.body == b'{"offsetTable":{}}'
