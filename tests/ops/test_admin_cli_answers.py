"""``rocklet admin`` answers that were wrong or unclear, against a real name server and broker.

- queryCq of an index outside the queue: one line naming the queue's indexes, exit 1,
  with and without ``--json`` (the broker answers SUCCESS without a body, as RocketMQ
  4.9.4's does, and the SDK raises :class:`~rocklet.client.admin.QueueIndexError`);
- a broker's address given as the name server: the same line ``rocklet produce`` prints;
- resetOffsetByTime ``-s now``: the time it stands for, not -1;
- queryMsgById: the broker's name, as queryMsgByUniqueKey prints it.

Verbs run in-process through :func:`rocklet.admin.run_admin_async`.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from rocklet.client.admin import Admin, QueueIndexError
from rocklet.client.message import Message
from rocklet.client.producer import Producer
from rocklet.client.pull_consumer import PullConsumer
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.admin import QueryConsumeQueueRequestHeader
from tests.cluster import running_cluster
from tests.ops.test_admin_cli import admin, admin_json

NOT_A_NAME_SERVER = (
    "is a broker, not a name server: give the name server's address (default port 9876) "
    "with -n or NAMESRV_ADDR"
)


async def test_query_cq_outside_the_queue_says_which_indexes_exist(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        addr = cluster.broker.addr
        code, _, err = await admin(
            cluster, "updateTopic", "-b", addr, "-t", "Cq", "-r", "1", "-w", "1"
        )
        assert code == 0, err
        async with Producer("CqPG", cluster.namesrv_addr) as producer:
            for i in range(3):
                await producer.send(Message("Cq", f"m{i}".encode()))

        for index in ("1000", "3", "-1"):  # past the end, the end itself, below the first
            for as_json in ([], ["--json"]):
                argv = ["queryCq", "-t", "Cq", "-q", "0", "-i", index, "-c", "2", *as_json]
                code, out, err = await admin(cluster, *argv)
                assert (code, out) == (1, ""), (argv, err)
                assert err == (
                    f"rocklet admin queryCq: index {index} of queue 0 of Cq does not exist "
                    "(the queue holds indexes 0 to 2)\n"
                ), argv

        # The broker's answer is RocketMQ 4.9.4's: SUCCESS, the remark, no body.
        async with Admin(cluster.namesrv_addr, instance_name="cq-test") as sdk:
            raw = await sdk._inst.invoke(
                addr,
                RemotingCommand(
                    RequestCode.QUERY_CONSUME_QUEUE,
                    ext_fields=QueryConsumeQueueRequestHeader("Cq", 0, 1000, 2).to_ext_fields(),
                ),
            )
            assert (raw.code, raw.remark, raw.body) == (
                ResponseCode.SUCCESS,
                "Index 1000 of 0@Cq is not exist!",
                b"",
            )
            with pytest.raises(QueueIndexError) as caught:
                await sdk.query_consume_queue(addr, "Cq", 0, 1000, 2)
            assert (caught.value.min_offset, caught.value.max_offset) == (0, 3)
            assert caught.value.remark == "Index 1000 of 0@Cq is not exist!"
            found = await sdk.query_consume_queue(addr, "Cq", 0, 1, 5)
            assert (found.min_queue_index, found.max_queue_index) == (0, 3)
            assert len(found.queue_data or ()) == 2

        cq = await admin_json(cluster, "queryCq", "-t", "Cq", "-q", "0", "-i", "2", "-c", "5")
        assert (cq["minQueueIndex"], cq["maxQueueIndex"], len(cq["queueData"])) == (0, 3, 1)


async def test_a_broker_given_as_the_name_server_is_named_so(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        broker = cluster.broker.addr
        for argv in (
            ["clusterList"],  # GET_BROKER_CLUSTER_INFO through the SDK's admin
            ["topicList"],
            ["topicList", "-c"],  # GET_TOPICS_BY_CLUSTER, sent by the tool itself
            ["updateKvConfig", "-s", "NS", "-k", "K", "-v", "V"],  # to each -n address
            ["wipeWritePerm", "-b", "broker-a"],
            ["topicRoute", "-t", "TBW102"],  # the route query produce makes
        ):
            code, out, err = await admin(None, *argv, "-n", broker)
            assert (code, out) == (1, ""), (argv, err)
            assert err == f"rocklet admin {argv[0]}: {broker} {NOT_A_NAME_SERVER}\n", argv
        # The real name server still answers as before.
        (row,) = await admin_json(cluster, "clusterList")
        assert row["brokerName"] == "broker-a"


async def test_reset_offset_by_time_now_prints_the_time_it_stands_for(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        addr = cluster.broker.addr
        code, _, _ = await admin(
            cluster, "updateTopic", "-b", addr, "-t", "Now", "-r", "1", "-w", "1"
        )
        assert code == 0
        async with Producer("NowPG", cluster.namesrv_addr) as producer:
            for i in range(3):
                await producer.send(Message("Now", f"m{i}".encode()))
        mq = MessageQueue("Now", "broker-a", 0)
        async with PullConsumer("NowG", cluster.namesrv_addr) as consumer:
            await consumer.pull(mq, 0, 1)  # learns the route
            await consumer.commit(mq, 1)

        before = int(time.time() * 1000)
        code, out, err = await admin(
            cluster, "resetOffsetByTime", "-g", "NowG", "-t", "Now", "-s", "now"
        )
        after = int(time.time() * 1000)
        assert code == 0, err
        first = out.splitlines()[0]
        found = re.search(r"timestamp\(string\)\[now\], timestamp\(long\)\[(-?\d+)\]$", first)
        assert found is not None, first
        assert before <= int(found.group(1)) <= after, first
        assert cluster.broker.ctx.offsets.query("NowG", "Now", 0) == 3  # "now": the end

        before = int(time.time() * 1000)
        reset = await admin_json(cluster, "resetOffsetByTime", "-g", "NowG", "-t", "Now", "-s", "0")
        assert reset["timestamp"] == 0  # an explicit time is shown as given
        assert cluster.broker.ctx.offsets.query("NowG", "Now", 0) == 0
        reset = await admin_json(
            cluster, "resetOffsetByTime", "-g", "NowG", "-t", "Now", "-s", "now"
        )
        assert before <= reset["timestamp"] <= int(time.time() * 1000)


async def test_query_msg_by_id_names_the_broker(tmp_path: Path) -> None:
    async with running_cluster(tmp_path) as cluster:
        async with Producer("IdPG", cluster.namesrv_addr) as producer:
            sent = await producer.send(Message("Ids", b"hello"))
        code, out, err = await admin(cluster, "queryMsgById", "-i", sent.offset_msg_id)
        assert code == 0, err
        by_id = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines()[1:])
        code, out, err = await admin(cluster, "queryMsgByUniqueKey", "-i", sent.msg_id, "-t", "Ids")
        assert code == 0, err
        by_key = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines()[1:])
        assert by_id["Broker Name"] == by_key["Broker Name"] == "broker-a"
        (found,) = await admin_json(cluster, "queryMsgById", "-i", sent.offset_msg_id)
        assert found["brokerName"] == "broker-a"
        assert json.dumps(found["offsetMsgId"]) == json.dumps(sent.offset_msg_id)
