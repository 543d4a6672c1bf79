"""Rocklet's asyncio RocketMQ client SDK: pure Python, no native library.

Producers, consumers and the admin client share one client instance per process
(connections, routes, heartbeats). Everything is asyncio-native; :mod:`rocklet.client.sync`
offers the same names as blocking calls.

Example::

    from rocklet.client import Message, Producer

    async with Producer("my-group", "127.0.0.1:9876") as producer:
        result = await producer.send(Message("orders", b"hello", tags="TagA"))

Errors are in :mod:`rocklet.client.errors`: one class per broker response code (with a
``retriable`` flag), and connection errors apart.
"""

from __future__ import annotations

from rocklet.client.admin import Admin
from rocklet.client.consume_result import ConsumeResult
from rocklet.client.lite_pull_consumer import LitePullConsumer
from rocklet.client.message import Message, MessageExt, SendResult, SendStatus
from rocklet.client.producer import Producer, hash_selector
from rocklet.client.pull_consumer import PullConsumer
from rocklet.client.push_consumer import PushConsumer
from rocklet.client.selector import MessageSelector
from rocklet.client.tls import tls_context
from rocklet.client.transaction import (
    LocalTransactionState,
    TransactionProducer,
    TransactionSendResult,
)
from rocklet.protocol.acl import Credentials
from rocklet.protocol.bodies.queue import MessageQueue

__all__ = [
    "Admin",
    "ConsumeResult",
    "Credentials",
    "LitePullConsumer",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageQueue",
    "MessageSelector",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "SendResult",
    "SendStatus",
    "TransactionProducer",
    "TransactionSendResult",
    "hash_selector",
    "tls_context",
]
