"""The broker's flow-control keys: parsed, checked, and sends over capacity answered busy."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rocklet.broker.config import BrokerConfig, ConfigError, NamesrvConfig
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.message import iter_messages
from rocklet.store.config import FlushDiskType
from rocklet.transport.flow import OVERLOAD_REMARK
from tests.broker.test_send_pull import cpp_send, pull
from tests.cluster import running_cluster
from tests.transport.test_server import RawClient


def test_the_keys_parse_and_become_the_servers_limits() -> None:
    config = BrokerConfig.from_properties(
        {
            "sendThreadPoolQueueCapacity": "7",
            "pullThreadPoolQueueCapacity": "9",
            "maxRequestsInFlightPerConnection": "32",
            "maxRequestsPerReadTurn": "16",
            "serverSocketRcvBufSize": "131072",
        }
    )
    limits = config.flow_limits()
    assert limits.max_in_flight_per_connection == 32 and limits.requests_per_turn == 16
    assert limits.shed_limits[RequestCode.SEND_MESSAGE_V2] == 7
    assert limits.shed_limits[RequestCode.CONSUMER_SEND_MSG_BACK] == 7
    assert limits.shed_limits[RequestCode.PULL_MESSAGE] == 9
    assert limits.shed_limits[RequestCode.END_TRANSACTION] == 100_000  # RocketMQ's default
    assert RequestCode.HEART_BEAT not in limits.shed_limits  # never shed
    assert config.server_socket_rcv_buf_size == 131072 and config.extra == {}
    namesrv = NamesrvConfig.from_properties({"maxRequestsPerReadTurn": "8"})
    assert namesrv.flow_limits().requests_per_turn == 8
    assert namesrv.flow_limits().shed_limits == {}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sendThreadPoolQueueCapacity", "0"),
        ("maxRequestsInFlightPerConnection", "-1"),
        ("serverSocketSndBufSize", "-5"),
    ],
)
def test_nonsense_values_are_refused_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        BrokerConfig.from_properties({key: value})


async def test_sends_over_the_send_pool_capacity_are_answered_busy_and_not_stored(
    tmp_path: Path,
) -> None:
    # SYNC_FLUSH: each send is handled until its group commit, so one read of pipelined
    # sends puts them all in flight at once.
    async with running_cluster(
        tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, send_thread_pool_queue_capacity=4
    ) as cluster:
        client = await RawClient.connect(cluster.broker.port)
        sends = [cpp_send("Busy", f"m{i}".encode()) for i in range(20)]
        client.send(*(dataclasses.replace(cmd, opaque=i) for i, cmd in enumerate(sends)))
        answers = [await client.read() for _ in range(20)]
        busy = [a for a in answers if a.code == ResponseCode.SYSTEM_BUSY]
        stored = [a for a in answers if a.code == ResponseCode.SUCCESS]
        assert busy and stored and len(busy) + len(stored) == 20
        assert all(a.remark == OVERLOAD_REMARK for a in busy)
        # A busy send was never run: only the others are in the queue.
        client.send(dataclasses.replace(pull("Busy", 0, 0), opaque=99))
        pulled = await client.read()
        assert pulled.code == ResponseCode.SUCCESS
        assert len(list(iter_messages(pulled.body))) == len(stored)
        await client.close()
