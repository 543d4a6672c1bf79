"""Producer settings: one frozen object, validated once when it is made.

:class:`ProducerConfig` holds a :class:`~rocklet.client.producer.Producer`'s settings
(RocketMQ's ``DefaultMQProducer`` setters, with its defaults). The producer builds it
from its keyword arguments and exposes it as ``producer.config``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from rocklet.client.message import MAX_MESSAGE_SIZE
from rocklet.client.trace import check_trace_topic
from rocklet.protocol.acl import Credentials
from rocklet.protocol.names import check_group_name

__all__ = ["ProducerConfig"]


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """Producer settings, validated once.

    Attributes:
        group: Producer group (transaction check-backs go to the group).
        namesrv: Name server address(es), ``;``-separated.
        send_timeout_ms: Budget for one send, retries included. Default: 3000.
        retry_times: Further attempts after a failed one, on other brokers. Default: 2.
        compress_over: Bodies longer than this many bytes are zlib-compressed.
            Default: 4096 (RocketMQ's ``compressMsgBodyOverHowmuch``).
        compress_level: zlib level. Default: 5 (RocketMQ's).
        max_message_size: Largest body (or batch body) accepted. Default: 4 MiB.
        instance_name: Client instance to share. Default: ``"DEFAULT"``.
        latency_fault: Avoid brokers that were slow or failing lately. Default: on.
        msgpack_headers: Serialize send headers as msgpack (Rocklet brokers only; a
            RocketMQ broker cannot read it). Kept for compatibility: the default,
            RocketMQ's binary header, is cheaper at both ends. Default: off.
        tls: TLS to name servers and brokers: ``True`` (verified against the
            system's CAs) or an :class:`ssl.SSLContext`
            (:func:`rocklet.client.tls_context`). Default: plain TCP.
        credentials: Sign requests with this ACL account
            (:class:`~rocklet.protocol.acl.Credentials`). Default: unsigned.
        trace: Message trace (Java's ``enableMsgTrace``): send a trace record of each
            send (and transaction end) to the trace topic, in the background, for
            ``queryMsgTraceById``. Default: off.
        trace_topic: Where traces go (Java's ``customizedTraceTopic``). Default:
            ``RMQ_SYS_TRACE_TOPIC``, which a broker with ``traceTopicEnable=true``
            creates.
    """

    group: str
    namesrv: str = "127.0.0.1:9876"
    send_timeout_ms: int = 3000
    retry_times: int = 2
    compress_over: int = 4096
    compress_level: int = 5
    max_message_size: int = MAX_MESSAGE_SIZE
    instance_name: str = "DEFAULT"
    latency_fault: bool = True
    msgpack_headers: bool = False
    tls: ssl.SSLContext | bool | None = None
    credentials: Credentials | None = None
    trace: bool = False
    trace_topic: str | None = None

    def __post_init__(self) -> None:
        if (reason := check_group_name(self.group)) is not None:
            raise ValueError(f"producer group: {reason}")
        check_trace_topic(self.trace_topic)
        if self.send_timeout_ms <= 0 or self.retry_times < 0 or self.max_message_size <= 0:
            raise ValueError(f"invalid producer config {self!r}")
        if not -1 <= self.compress_level <= 9:
            raise ValueError(f"zlib level {self.compress_level} out of range")
