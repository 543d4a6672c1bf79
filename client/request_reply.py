"""Request-reply (RocketMQ 4.6+ ``DefaultMQProducer.request`` / ``MessageUtil``).

The requester sends an ordinary message with three extra properties (docs/protocol.md):
``CORRELATION_ID`` (a fresh UUID), ``REPLY_TO_CLIENT`` (its client id) and ``TTL`` (the
timeout, ms). The broker stamps ``CLUSTER`` on it. A consumer handles it
and the responder sends a reply message to ``<CLUSTER>_REPLY_TOPIC`` with
``MSG_TYPE=reply`` and the same three properties, using SEND_REPLY_MESSAGE_V2 (325).
The broker pushes that reply to the requester's connection as
PUSH_REPLY_MESSAGE_TO_CLIENT (326), where the client instance completes the future
waiting under that correlation id.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, TypeAlias

from rocklet.client.errors import InvalidMessageError, RequestReplyTimeoutError
from rocklet.client.message import Message, MessageExt
from rocklet.client.replies import ReplyWaiters
from rocklet.protocol.properties import Prop

__all__ = [
    "REPLY_MESSAGE_FLAG",
    "REPLY_TOPIC_SUFFIX",
    "SendWithProperties",
    "make_reply",
    "request",
]

#: Sends a message with extra system properties
#: (:meth:`~rocklet.client.producer.Producer.send_with_properties`).
SendWithProperties: TypeAlias = Callable[[Message, Mapping[str, str]], Awaitable[object]]

#: ``MixAll.REPLY_MESSAGE_FLAG``: the MSG_TYPE of a reply.
REPLY_MESSAGE_FLAG: Final = "reply"
#: ``MixAll.REPLY_TOPIC_POSTFIX``: a cluster's reply topic is ``<cluster>_REPLY_TOPIC``.
REPLY_TOPIC_SUFFIX: Final = "_REPLY_TOPIC"


async def request(
    send: SendWithProperties,
    replies: ReplyWaiters,
    client_id: str,
    msg: Message,
    timeout_ms: int,
) -> MessageExt:
    """Send ``msg`` as a request and wait for its reply.

    Args:
        send: Sends the request (a running producer's ``send_with_properties``).
        replies: Where the reply arrives (the producer's client instance's).
        client_id: That client instance's id, where the broker pushes the reply.
        msg: The request.
        timeout_ms: Longest wait, the send included.

    Returns:
        The reply.

    Raises:
        RequestReplyTimeoutError: No reply within ``timeout_ms``.
        BrokerError, TransportError, NoRouteError: The request could not be sent.
    """
    if timeout_ms <= 0:
        raise ValueError(f"timeout_ms must be positive, got {timeout_ms}")
    correlation_id = str(uuid.uuid4())
    extra = {
        Prop.CORRELATION_ID: correlation_id,
        Prop.REPLY_TO_CLIENT: client_id,
        Prop.TTL: str(timeout_ms),
    }
    # Register before sending: the reply can arrive before the send's own answer.
    reply = replies.expect(correlation_id)
    timeout = asyncio.timeout(timeout_ms / 1000)
    try:
        async with timeout:
            await send(msg, extra)
            return await reply
    except TimeoutError:
        if timeout.expired():
            raise RequestReplyTimeoutError(correlation_id, timeout_ms) from None
        raise  # the send's own timeout, with its details
    finally:
        replies.discard(correlation_id)
        if not reply.done():
            reply.cancel()


def make_reply(request_msg: MessageExt, body: bytes) -> Message:
    """Build the reply to a consumed request (``MessageUtil.createReplyMessage``).

    Args:
        request_msg: The request as consumed (with the broker's CLUSTER property).
        body: The reply payload.

    Returns:
        The reply message, ready for :meth:`Producer.send`.

    Raises:
        InvalidMessageError: ``request_msg`` lacks CLUSTER or REPLY_TO_CLIENT.
    """
    props = request_msg.properties
    cluster = props.get(Prop.CLUSTER)
    reply_to = props.get(Prop.REPLY_TO_CLIENT)
    if not cluster or not reply_to:
        raise InvalidMessageError(
            "not a request message: properties CLUSTER and REPLY_TO_CLIENT are required"
        )
    reply_props = {
        Prop.MSG_TYPE: REPLY_MESSAGE_FLAG,
        Prop.CORRELATION_ID: props.get(Prop.CORRELATION_ID, ""),
        Prop.REPLY_TO_CLIENT: reply_to,
        Prop.TTL: props.get(Prop.TTL, ""),
    }
    return Message(cluster + REPLY_TOPIC_SUFFIX, body, properties=reply_props)
