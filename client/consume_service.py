"""Consume services: hand pulled messages to the listener, concurrently or in order.

Two services, one module each, share what is here:

* :class:`~rocklet.client.consume_concurrently.ConcurrentConsumeService`
  (``ConsumeMessageConcurrentlyService``): any queue, any order, on a fixed number of
  workers; failed messages are sent back to the broker for a later retry.
* :class:`~rocklet.client.consume_orderly.OrderlyConsumeService`
  (``ConsumeMessageOrderlyService``): each queue strictly in offset order; failed
  batches are retried in place, then dead-lettered.

Both send messages back with CONSUMER_SEND_MSG_BACK (:func:`make_send_back`).
Listeners, and how they are called, live in :mod:`rocklet.client.listeners`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, TypeAlias

from rocklet.client.brokers import BrokerInvoker
from rocklet.client.errors import error_for_code
from rocklet.client.message import MessageExt
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader

__all__ = [
    "BROKER_DELAY_LEVEL",
    "DLQ_DELAY_LEVEL",
    "Consumed",
    "SendBack",
    "make_send_back",
]

#: Sends one message back to the broker at a delay level; raises on failure.
SendBack: TypeAlias = Callable[[MessageExt, int], Awaitable[None]]
#: Called after a queue's messages were consumed (flow control may resume pulling).
Consumed: TypeAlias = Callable[[MessageQueue], None]

#: Delay level meaning "straight to the dead-letter queue" in CONSUMER_SEND_MSG_BACK.
DLQ_DELAY_LEVEL: Final = -1
#: Delay level the broker turns into 3 + reconsume times.
BROKER_DELAY_LEVEL: Final = 0


def make_send_back(invoker: BrokerInvoker, group: str, max_reconsume_times: int) -> SendBack:
    """Build the CONSUMER_SEND_MSG_BACK sender of a consumer group.

    The request goes to the master of the broker the message came from, or to its
    store host when no route names that broker (what the C++ client always uses).

    Args:
        invoker: Sends requests.
        group: The consumer group.
        max_reconsume_times: Sent as ``maxReconsumeTimes`` (the broker then decides
            when the message goes to the dead-letter queue).

    Returns:
        ``async send_back(msg, delay_level)``, raising ``BrokerError`` or
        ``TransportError`` on failure.
    """

    async def send_back(msg: MessageExt, delay_level: int) -> None:
        addr = invoker.routes.master_addr(msg.broker_name) or msg.store_addr
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=group,
            delay_level=delay_level,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.topic,
            max_reconsume_times=max_reconsume_times,
        )
        cmd = RemotingCommand(RequestCode.CONSUMER_SEND_MSG_BACK, ext_fields=header.to_ext_fields())
        answer = await invoker.invoke(addr, cmd)
        if answer.code != ResponseCode.SUCCESS:
            raise error_for_code(answer.code, answer.remark, addr=addr)

    return send_back
