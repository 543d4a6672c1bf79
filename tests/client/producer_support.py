"""Helpers for the SDK core tests: read what the broker stored, wait for it, add brokers."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from rocklet.broker.app import Broker
from rocklet.client.message import MessageExt
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.pull import PullMessageRequestHeader, PullSysFlag
from rocklet.protocol.message import decode_message, iter_messages
from rocklet.transport.dial import open_connection
from tests.cluster import Cluster, small_broker_config

__all__ = ["long_poll", "second_broker", "stored"]

#: Generous: other helpers run their suites on the same two cores.
WAIT_S = 10.0


def stored(broker: Broker, topic: str, queue_id: int) -> list[MessageExt]:
    """Every record the broker's store holds for one queue, in queue order."""
    store = broker.ctx.store
    result = store.get_messages(topic, queue_id, 0, 100_000, max_bytes=1 << 30)
    return [MessageExt.from_stored(decode_message(buf)) for buf in result.buffers]


def stored_all(broker: Broker, topic: str, queues: int = 16) -> list[MessageExt]:
    """Every record of the first ``queues`` queues of a topic."""
    return [m for q in range(queues) for m in stored(broker, topic, q)]


async def long_poll(
    broker_port: int, topic: str, queue_id: int, offset: int = 0, *, group: str = "CG_TEST_POLL"
) -> list[MessageExt]:
    """PULL_MESSAGE with long polling: returns once the queue has a record at ``offset``.

    The broker holds the pull until a message arrives, so this waits on the broker's
    answer rather than on a timer.
    """
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=32,
        sys_flag=int(PullSysFlag.SUBSCRIPTION | PullSysFlag.SUSPEND),
        subscription="*",
        suspend_timeout_millis=int(WAIT_S * 1000),
    )
    cmd = RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=header.to_ext_fields())
    async with await open_connection("127.0.0.1", broker_port) as conn:
        answer = await conn.request(cmd, WAIT_S + 5)
    assert answer.code == ResponseCode.SUCCESS, (answer.code, answer.remark)
    return [MessageExt.from_stored(m) for m in iter_messages(answer.body)]


@asynccontextmanager
async def second_broker(
    cluster: Cluster, store: Path, name: str = "broker-b"
) -> AsyncIterator[Broker]:
    """Another broker group registered with the cluster's name server."""
    config = small_broker_config(store, cluster.namesrv_addr)
    config = dataclasses.replace(config, broker_name=name)
    broker = await Broker.start(config, host="127.0.0.1")
    try:
        yield broker
    finally:
        await broker.stop()
