"""Message trace in the SDK (Java's ``enableMsgTrace``): what traced clients record.

``Producer(..., trace=True)`` and ``PushConsumer(..., trace=True)`` (also
``TransactionProducer`` and the blocking facade's classes) write the trace records
that ``mqadmin queryMsgTraceById`` and ``rocklet admin queryMsgTraceById`` read, as
RocketMQ 4.9.4's hooks do (``SendMessageTraceHookImpl``,
``ConsumeMessageTraceHookImpl``, ``EndTransactionTraceHookImpl``):

* :class:`SendTracer`: a ``Pub`` record for each send the broker answered (a send
  that raised is not traced, as in Java), none for sends to the trace topic itself or
  when the broker's answer says tracing is off; a batch is one record, its msgIds
  comma-joined; and an ``EndTransaction`` record for each transaction end.
* :class:`ConsumeTracer`: for each batch handed to a push consumer's listener, a
  ``SubBefore`` record per message before the call and a ``SubAfter`` record per
  message after it, tied by a request id fresh for the batch; messages flagged
  ``TRACE_ON=false`` are left out.

The records go to a :class:`~rocklet.client.trace_dispatch.TraceDispatcher`, which
sends them to the trace topic in the background. Every hook runs on the event loop
and never raises into the send or the consume: a failure is logged.
"""

from __future__ import annotations

import itertools
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from rocklet.client.consume_result import ConsumeResult
from rocklet.client.message import MessageExt, SendResult, SendStatus, UniqKeyGenerator
from rocklet.client.trace_dispatch import MAX_BODY, TraceDispatcher, TraceSender
from rocklet.protocol.acl import Credentials
from rocklet.protocol.names import check_topic_name
from rocklet.protocol.properties import Prop, decode_properties
from rocklet.protocol.trace import (
    DEFAULT_TRACE_TOPIC,
    NULL_FIELD,
    ConsumeReturnType,
    TraceMessageType,
    TraceRecord,
)
from rocklet.transport.clock import SYSTEM_CLOCK, Clock
from rocklet.transport.logs import get_logger

__all__ = [
    "DEFAULT_REGION",
    "DEFAULT_TRACE_TOPIC",
    "TRACE_GROUP_PREFIX",
    "TRACE_INSTANCE_NAME",
    "ConsumeTracer",
    "SendTracer",
    "TracedBatch",
    "TracedConfig",
    "check_trace_topic",
    "new_dispatcher",
]

_log = get_logger(__name__)

#: The trace producers' groups: ``<prefix>-<group>-<PRODUCE|CONSUME>-<n>``.
TRACE_GROUP_PREFIX: Final = "_INNER_TRACE_PRODUCER"
#: Their client instance, apart from the application's (Java's TRACE_INSTANCE_NAME).
TRACE_INSTANCE_NAME: Final = "PID_CLIENT_INNER_TRACE_PRODUCER"
#: The region of a send whose answer names none (``MixAll.DEFAULT_TRACE_REGION_ID``).
DEFAULT_REGION: Final = "DefaultRegion"
#: Java's trace producer's send timeout.
_TRACE_SEND_TIMEOUT_MS: Final = 5000
#: Room left in a trace producer's group name for the traced group (names are at most
#: 255 characters).
_MAX_OWNER_GROUP: Final = 200
#: Java's DefaultMQProducer property that delays a message like a delay level.
_START_DELIVER_TIME: Final = "__STARTDELIVERTIME"
_sequence = itertools.count(1)

#: Makes a trace producer: ``(group, namesrv, **ProducerConfig options) -> sender``.
SenderFactory = Callable[..., TraceSender]


class TracedConfig(Protocol):
    """A traced client's settings, as its tracer reads them (``ProducerConfig``...)."""

    @property
    def group(self) -> str:
        """The client's group."""
        ...

    @property
    def namesrv(self) -> str:
        """Its name server address(es)."""
        ...

    @property
    def trace_topic(self) -> str | None:
        """Its trace topic, ``None`` for the default."""
        ...

    @property
    def tls(self) -> ssl.SSLContext | bool | None:
        """Its TLS setting."""
        ...

    @property
    def credentials(self) -> Credentials | None:
        """Its ACL account."""
        ...


def check_trace_topic(topic: str | None) -> None:
    """Refuse a ``trace_topic`` option that is not a valid topic name (``None``: default).

    Raises:
        ValueError: Why the name is not one.
    """
    if topic is not None and (reason := check_topic_name(topic)):
        raise ValueError(f"trace topic: {reason}")


def new_dispatcher(make_sender: SenderFactory, config: TracedConfig, kind: str) -> TraceDispatcher:
    """A dispatcher with its own trace producer, for one traced client.

    The trace producer shares the client's name servers, TLS and credentials, not its
    client instance.

    Args:
        make_sender: Builds the trace producer: the
            :class:`~rocklet.client.producer.Producer` class, passed in because the
            producer module imports this one (importing it back would be a cycle).
        config: The traced client's settings.
        kind: ``"PRODUCE"`` or ``"CONSUME"``.

    Returns:
        The dispatcher, not started.
    """
    owner = config.group[:_MAX_OWNER_GROUP]
    sender = make_sender(
        f"{TRACE_GROUP_PREFIX}-{owner}-{kind}-{next(_sequence)}",
        config.namesrv,
        instance_name=TRACE_INSTANCE_NAME,
        send_timeout_ms=_TRACE_SEND_TIMEOUT_MS,
        max_message_size=MAX_BODY,
        tls=config.tls,
        credentials=config.credentials,
    )
    return TraceDispatcher(sender, config.trace_topic or DEFAULT_TRACE_TOPIC)


class _Tracer:
    """What both tracers share: the group, the dispatcher, the clock, an id source."""

    def __init__(self, group: str, dispatcher: TraceDispatcher) -> None:
        self.group = group
        self.dispatcher = dispatcher
        self.topic = dispatcher.topic
        self._clock: Clock = SYSTEM_CLOCK
        self._ids = UniqKeyGenerator()

    async def start(self, clock: Clock, client_ip: str) -> None:
        """Start sending traces; records are timed by ``clock`` (the client instance's).

        Never raises: tracing must not stop the client (the dispatcher logs).
        """
        self._clock = clock
        self._ids = UniqKeyGenerator(client_ip, clock.now_ms())
        await self.dispatcher.start()

    async def close(self) -> None:
        """Send what is queued (bounded by a timeout) and stop; never raises."""
        await self.dispatcher.close()


class SendTracer(_Tracer):
    """A producer's ``Pub`` and ``EndTransaction`` records."""

    def sent(
        self,
        topic: str,
        body_length: int,
        props: str,
        store_host: str,
        result: SendResult,
        cost_ms: float,
    ) -> None:
        """Record a send the broker answered.

        Args:
            topic: The message's topic.
            body_length: The body's length as sent (compressed, or the batch body).
            props: The properties text it was sent with.
            store_host: The broker address it went to.
            result: The send's result.
            cost_ms: How long the (successful) attempt took.
        """
        if topic.startswith(self.topic) or not result.trace_on:
            return
        try:
            fields = decode_properties(props)
            msg_type = TraceMessageType.NORMAL
            if fields.get(Prop.TRAN_MSG) == "true":
                msg_type = TraceMessageType.TRANS_HALF
            if Prop.DELAY in fields or _START_DELIVER_TIME in fields:
                msg_type = TraceMessageType.DELAY
            cost = int(cost_ms)
            record = TraceRecord(
                "Pub",
                result.msg_id,
                group=self.group,
                timestamp=self._clock.now_ms() - cost,
                cost_ms=cost,
                success=result.status is SendStatus.SEND_OK,
                topic=topic,
                tags=fields.get(Prop.TAGS, NULL_FIELD),
                keys=fields.get(Prop.KEYS, NULL_FIELD),
                store_host=store_host,
                offset_msg_id=result.offset_msg_id,
                region=result.region_id or DEFAULT_REGION,
                body_length=body_length,
                msg_type=int(msg_type),
            )
            self.dispatcher.append((record,))
        except Exception as exc:  # a trace must never fail the send
            _log.warning("send not traced", topic=topic, error=repr(exc))

    def ended(
        self,
        topic: str,
        msg_id: str,
        properties: Mapping[str, str] | None,
        *,
        store_host: str,
        state: str,
        transaction_id: str,
        from_check: bool,
    ) -> None:
        """Record a transaction end (sent to ``store_host``, answered or not).

        Args:
            topic: The message's topic.
            msg_id: Its client msgId.
            properties: Its tags, keys and region as properties (``TAGS``, ``KEYS``,
                ``MSG_REGION``), when known.
            store_host: The broker the end goes to.
            state: ``COMMIT_MESSAGE``, ``ROLLBACK_MESSAGE`` or ``UNKNOW``.
            transaction_id: The transaction's id.
            from_check: Whether it answers a broker's check-back.
        """
        if topic.startswith(self.topic):
            return
        props = properties or {}
        record = TraceRecord(
            "EndTransaction",
            msg_id,
            group=self.group,
            timestamp=self._clock.now_ms(),
            topic=topic,
            tags=props.get(Prop.TAGS) or NULL_FIELD,
            keys=props.get(Prop.KEYS) or NULL_FIELD,
            store_host=store_host,
            region=props.get(Prop.MSG_REGION) or DEFAULT_REGION,
            msg_type=int(TraceMessageType.TRANS_COMMIT),
            transaction_id=transaction_id,
            transaction_state=state,
            from_transaction_check=from_check,
        )
        self.dispatcher.append((record,))


@dataclass(frozen=True, slots=True)
class TracedBatch:
    """A batch whose ``SubBefore`` records were written, waiting for its ``SubAfter``.

    Attributes:
        request_id: Ties the batch's records together.
        before: The ``SubBefore`` records (messages flagged not to trace left out).
        size: How many messages the listener got (the cost is shared among them).
    """

    request_id: str
    before: tuple[TraceRecord, ...]
    size: int


class ConsumeTracer(_Tracer):
    """A push consumer's ``SubBefore`` and ``SubAfter`` records.

    Args:
        group: The consumer group.
        dispatcher: Where the records go.
        consume_timeout_ms: A listener call longer than this ends ``TIME_OUT``.
    """

    def __init__(self, group: str, dispatcher: TraceDispatcher, consume_timeout_ms: int) -> None:
        super().__init__(group, dispatcher)
        self._timeout_ns = consume_timeout_ms * 1_000_000

    def before(self, msgs: Sequence[MessageExt]) -> TracedBatch | None:
        """Record a batch about to be handed to the listener.

        Returns:
            What :meth:`after` needs, or ``None`` when nothing of the batch is traced.
        """
        try:
            now = self._clock.now_ms()
            request_id = self._ids.next()
            records = tuple(
                TraceRecord(
                    "SubBefore",
                    msg.msg_id,
                    group=self.group,
                    timestamp=now,
                    # The broker's region when it stored one (RocketMQ's broker stores
                    # none by default: Java then writes "null").
                    region=msg.properties.get(Prop.MSG_REGION) or NULL_FIELD,
                    request_id=request_id,
                    retry_times=msg.reconsume_times,
                    keys=msg.properties.get(Prop.KEYS) or NULL_FIELD,
                )
                for msg in msgs
                if msg.properties.get(Prop.TRACE_ON) != "false"
            )
            if not records:
                return None
            self.dispatcher.append(records)
            return TracedBatch(request_id, records, len(msgs))
        except Exception as exc:  # a trace must never fail the consume
            _log.warning("consume not traced", error=repr(exc))
            return None

    def after(self, batch: TracedBatch, result: object, raised: bool, elapsed_ns: int) -> None:
        """Record how the listener ended.

        Args:
            batch: What :meth:`before` returned.
            result: What the listener returned (anything, when it misbehaved).
            raised: Whether it raised instead.
            elapsed_ns: How long it ran.
        """
        try:
            self.dispatcher.append(self._after_records(batch, result, raised, elapsed_ns))
        except Exception as exc:  # a trace must never fail the consume
            _log.warning("consume result not traced", error=repr(exc))

    def _after_records(
        self, batch: TracedBatch, result: object, raised: bool, elapsed_ns: int
    ) -> tuple[TraceRecord, ...]:
        if raised:
            code = ConsumeReturnType.EXCEPTION
        elif not isinstance(result, ConsumeResult):
            code = ConsumeReturnType.RETURN_NULL
        elif elapsed_ns >= self._timeout_ns:
            code = ConsumeReturnType.TIME_OUT
        elif result is ConsumeResult.SUCCESS:
            code = ConsumeReturnType.SUCCESS
        else:
            code = ConsumeReturnType.FAILED
        success = not raised and result is ConsumeResult.SUCCESS
        cost = elapsed_ns // 1_000_000 // batch.size  # Java shares it among the messages
        now = self._clock.now_ms()
        return tuple(
            TraceRecord(
                "SubAfter",
                before.msg_id,
                group=self.group,
                timestamp=now,
                cost_ms=cost,
                success=success,
                keys=before.keys,
                request_id=batch.request_id,
                context_code=int(code),
            )
            for before in batch.before
        )
