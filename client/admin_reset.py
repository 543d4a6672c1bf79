"""Resetting a group's offsets on one broker while none of its consumers is online.

A broker answers INVOKE_BROKER_TO_RESET_OFFSET with CONSUMER_NOT_ONLINE when nobody of
the group is connected, and changes nothing. ``mqadmin resetOffsetByTime`` then does
the work itself (``DefaultMQAdminExtImpl.resetOffsetByTimestampOld``), and so does
:meth:`rocklet.client.admin.Admin.reset_offset_by_time` through :func:`reset_offline`:

1. GET_CONSUME_STATS for the group: its committed offset on each queue of the topic
   (a group that never committed on this broker starts from each queue's min offset,
   GET_TOPIC_STATS_INFO);
2. per queue, the target: SEARCH_OFFSET_BY_TIMESTAMP, or GET_MAX_OFFSET for ``-1``;
3. UPDATE_CONSUMER_OFFSET to the target when ``force`` or when it moves backwards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.stats import ConsumeStats, OffsetWrapper, TopicStatsTable
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.admin import GetTopicStatsInfoRequestHeader
from rocklet.protocol.headers.base import Header
from rocklet.protocol.headers.consumer import (
    GetConsumeStatsRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)

__all__ = ["BrokerCall", "reset_offline"]

#: ``(addr, code, header) -> answer``; raises for a non-success answer.
BrokerCall = Callable[[str, int, Header], Awaitable[RemotingCommand]]


async def reset_offline(
    call: BrokerCall,
    addr: str,
    group: str,
    topic: str,
    timestamp_ms: int,
    *,
    force: bool,
) -> dict[MessageQueue, int]:
    """Commit a group's offsets on one broker to the first message stored at a time.

    Args:
        call: Sends one request to a broker.
        addr: The broker.
        group: Consumer group.
        topic: Topic.
        timestamp_ms: Store time; ``-1`` means the end of each queue.
        force: Also move offsets forward.

    Returns:
        Each queue's offset afterwards (the old one where it was kept).

    Raises:
        BrokerError: A broker refused one of the requests.
    """
    answer = await call(addr, RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader(group))
    progress = {
        mq: w
        for mq, w in ConsumeStats.from_json(answer.body).offset_table.items()
        if mq.topic == topic
    }
    if not progress:
        stats = await call(
            addr, RequestCode.GET_TOPIC_STATS_INFO, GetTopicStatsInfoRequestHeader(topic)
        )
        progress = {
            mq: OffsetWrapper(o.max_offset, o.min_offset, 0)
            for mq, o in TopicStatsTable.from_json(stats.body).offset_table.items()
        }
    table: dict[MessageQueue, int] = {}
    for mq, wrapper in sorted(progress.items()):
        if timestamp_ms == -1:
            got = await call(
                addr, RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic, mq.queue_id)
            )
            target = GetMaxOffsetResponseHeader.from_ext_fields(got.ext_fields).offset
        else:
            ask = SearchOffsetRequestHeader(topic, mq.queue_id, timestamp_ms)
            got = await call(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ask)
            target = SearchOffsetResponseHeader.from_ext_fields(got.ext_fields).offset
        table[mq] = wrapper.consumer_offset
        if force or target <= wrapper.consumer_offset:
            commit = UpdateConsumerOffsetRequestHeader(group, topic, mq.queue_id, target)
            await call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, commit)
            table[mq] = target
    return table
