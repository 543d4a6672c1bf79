"""The producer: send, batch, oneway, orderly, request-reply.

A :class:`Producer` belongs to a producer group and shares a
:class:`~rocklet.client.instance.ClientInstance` (connections, routes, heartbeat) with the other
producers and consumers of the process. What a send does, following RocketMQ 4.9's
``DefaultMQProducerImpl.sendDefaultImpl``:

1. Validate the message and stamp a UNIQ_KEY (:class:`~rocklet.client.message.UniqKeyGenerator`).
2. Compress a body over ``compress_over`` bytes with zlib and set sysFlag bit 0.
3. Pick a queue: round-robin over the topic's writable queues, skipping brokers the
   :class:`~rocklet.client.fault.LatencyFaultTolerance` says were slow or failing lately.
4. Send SEND_MESSAGE_V2 (310; SEND_BATCH_MESSAGE 320 for a batch) to that broker's
   master. Many concurrent sends share the one connection (pipelining): each is one
   request with its own opaque, so throughput is bound by CPU, not round trips.
5. On a transport failure or a retriable broker error, try again (up to
   ``retry_times`` more) on another broker, within the overall ``send_timeout_ms``.

Sends are safe to run concurrently from many tasks of the producer's event loop.
"""

from __future__ import annotations

import asyncio
import enum
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Self

from rocklet.client import request_reply
from rocklet.client.arguments import closed_while_waiting, wrong_loop
from rocklet.client.errors import (
    BrokerError,
    ClientStateError,
    InvalidMessageError,
    NoRouteError,
    TopicNotExistError,
    TransportError,
)
from rocklet.client.fault import LatencyFaultTolerance
from rocklet.client.instance import ClientInstance, get_instance
from rocklet.client.message import (
    Message,
    MessageExt,
    SendResult,
    UniqKeyGenerator,
    send_properties,
    validate_message,
)
from rocklet.client.producer_config import ProducerConfig
from rocklet.client.request_reply import REPLY_MESSAGE_FLAG
from rocklet.client.send_wire import (
    BATCH_PROPERTIES,
    EncodedBatch,
    check_encoded_batch,
    encode_batch,
    read_send_result,
    reserve_uniq_keys,
    send_command,
    send_failure,
)
from rocklet.client.trace import SendTracer, new_dispatcher
from rocklet.client.trace_dispatch import TraceDispatcher
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.codes import RequestCode, SerializeType
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import SysFlag, java_string_hash
from rocklet.protocol.properties import Prop
from rocklet.transport.clock import SYSTEM_CLOCK, Clock
from rocklet.transport.logs import get_logger

__all__ = ["MessageQueueSelector", "Producer", "ProducerConfig", "ProducerStatus", "hash_selector"]

_log = get_logger(__name__)

#: Picks the queue for an orderly send: ``(queues, message, sharding_key) -> queue``.
MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


class ProducerStatus(enum.Enum):
    """Lifecycle of a producer."""

    CREATED = "created"
    RUNNING = "running"
    CLOSED = "closed"


def hash_selector(queues: Sequence[MessageQueue], _msg: Message, key: Any) -> MessageQueue:
    """Java's ``SelectMessageQueueByHash``: ``abs(key.hashCode() % len(queues))``.

    Strings hash as Java's ``String.hashCode``, so a Python and a Java producer put the
    same sharding key on the same queue.
    """
    if isinstance(key, bool) or not isinstance(key, int):
        h = java_string_hash(key if isinstance(key, str) else str(key))
    elif -(2**31) <= key < 2**31:
        h = key  # Integer.hashCode
    else:
        v = key & 0xFFFFFFFFFFFFFFFF
        h = (v ^ (v >> 32)) & 0xFFFFFFFF  # Long.hashCode
        h = h - 2**32 if h >= 2**31 else h
    return queues[abs(h) % len(queues)]


class Producer:
    """Sends messages to a topic's brokers.

    Use as an async context manager, or call :meth:`start` and :meth:`close`.

    Args:
        group: Producer group.
        namesrv: Name server address(es). Default: ``"127.0.0.1:9876"``.
        instance: Use this client instance (and its clock) instead of the shared one.
        **options: Further :class:`ProducerConfig` fields (``send_timeout_ms``,
            ``retry_times``, ``compress_over``, ``trace``...).
    """

    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        instance: ClientInstance | None = None,
        **options: Any,
    ) -> None:
        self.config = ProducerConfig(group, namesrv, **options)
        self._status = ProducerStatus.CREATED
        self._given_instance = instance
        self._instance: ClientInstance | None = None
        # The loop it was started on: its connections and tasks live there (_live).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clock: Clock = SYSTEM_CLOCK  # the instance's, once started
        self._ids: UniqKeyGenerator | None = None
        self._fault = LatencyFaultTolerance()
        self._round_robin: dict[str, int] = {}
        # RocketMQ's binary header (RocketMQSerializable) by default: brokers of both kinds
        # read it, and it is encoded and decoded by compiled code on both ends.
        self._stype = (
            SerializeType.MSGPACK if self.config.msgpack_headers else SerializeType.ROCKETMQ
        )
        self._timeout_s = self.config.send_timeout_ms / 1000
        # Message trace: None when off, so a send pays one attribute check for it.
        self._tracer: SendTracer | None = None
        if self.config.trace:
            dispatcher = new_dispatcher(Producer, self.config, "PRODUCE")
            self._tracer = SendTracer(group, dispatcher)

    # -- lifecycle ----------------------------------------------------------------

    @property
    def status(self) -> ProducerStatus:
        """Where the producer is in its lifecycle."""
        return self._status

    @property
    def trace_dispatcher(self) -> TraceDispatcher | None:
        """The message-trace dispatcher, or ``None`` when ``trace`` is off.

        Its counters ``sent``, ``failed`` and ``dropped`` tell how tracing goes
        (Java's ``getTraceDispatcher``).
        """
        return None if self._tracer is None else self._tracer.dispatcher

    @property
    def instance(self) -> ClientInstance:
        """The client instance (only while running).

        Raises:
            ClientStateError: The producer is not running.
        """
        if self._instance is None or self._status is not ProducerStatus.RUNNING:
            raise ClientStateError(f"producer {self.config.group!r} is {self._status.value}")
        return self._instance

    def _live(self) -> ClientInstance:
        """The instance, for a call made on the producer's own event loop.

        Every public coroutine checks this before it writes anything: a request
        written from another loop's thread would be sent (and stored) while its
        caller fails. One identity comparison per call.

        Raises:
            ClientStateError: The producer is not running, or the running loop is
                not the one it was started on.
        """
        instance = self._instance
        if instance is None or self._status is not ProducerStatus.RUNNING:
            raise ClientStateError(f"producer {self.config.group!r} is {self._status.value}")
        if _running_loop() is not self._loop:
            raise wrong_loop(f"producer {self.config.group!r}")
        return instance

    async def start(self) -> None:
        """Join the client instance and announce the group to the brokers; idempotent.

        Raises:
            ClientStateError: Closed, or the group already runs in this instance.
        """
        if self._status is ProducerStatus.RUNNING:
            return
        if self._status is ProducerStatus.CLOSED:
            raise ClientStateError("a closed producer cannot be started again")
        config = self.config
        instance = self._given_instance or get_instance(
            config.namesrv,
            config.instance_name,
            tls=config.tls,
            credentials=config.credentials,
        )
        try:
            await instance.start()
            instance.groups.register_producer(config.group, self)
        except BaseException:
            if self._given_instance is None:
                await instance.release()
            raise
        self._instance = instance
        self._loop = asyncio.get_running_loop()
        self._clock = instance.clock
        self._ids = UniqKeyGenerator(instance.client_ip, instance.clock.now_ms())
        self._status = ProducerStatus.RUNNING
        await instance.groups.send_heartbeat()
        if self._tracer is not None:
            await self._tracer.start(instance.clock, instance.client_ip)

    async def close(self) -> None:
        """Leave the group on the brokers and release the instance; idempotent.

        Sends still waiting (for a route, a connection or an answer) fail with
        :class:`ClientStateError` or a :class:`TransportError`, never with a
        cancellation their callers did not ask for.

        Raises:
            ClientStateError: Called from another event loop than the producer's.
        """
        if self._status is not ProducerStatus.RUNNING or self._instance is None:
            self._status = ProducerStatus.CLOSED
            return
        self._live()
        self._status = ProducerStatus.CLOSED
        if self._tracer is not None:
            await self._tracer.close()  # sends the traces still queued; never raises
        instance, self._instance = self._instance, None
        instance.groups.unregister_producer(self.config.group)
        try:
            await instance.groups.unregister_client(self.config.group, None)
        finally:
            if self._given_instance is None:
                await instance.release()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def check_transaction_state(self, msg: MessageExt, header: Any, broker_addr: str) -> None:
        """Plain producers have no transactions; the check-back is logged and ignored."""
        _log.warning("check-back for a non-transactional producer", group=self.config.group)

    # -- sending ------------------------------------------------------------------

    async def send(self, msg: Message | Sequence[Message]) -> SendResult:
        """Send one message, or a list of messages as one batch.

        Args:
            msg: A message, or messages of one topic without delay levels (a batch,
                stored as individual messages; the result's ``msg_id`` is their
                UNIQ_KEYs comma-joined).

        Returns:
            Where it was stored.

        Raises:
            InvalidMessageError: The message is rejected before sending.
            TypeError: ``msg`` is neither a Message nor a list of Messages, or a field
                of one has the wrong type.
            ClientStateError: Not running, closed while the send waited, or called
                from another event loop than the producer's.
            BrokerError: The broker refused it (after retries when retriable).
            TransportError: No broker could be reached in time.
            NoRouteError: No broker serves the topic.
        """
        if not isinstance(msg, Message):
            return await self._send_batch(msg)
        # send_with_properties(msg) without its extra coroutine frame: this is the path
        # of every single send.
        uniq, props, body, sys_flag = self._prepare(msg, None)
        code = RequestCode.SEND_MESSAGE_V2
        if msg.properties and msg.properties.get(Prop.MSG_TYPE) == REPLY_MESSAGE_FLAG:
            code = RequestCode.SEND_REPLY_MESSAGE_V2
        return await self._send(msg.topic, body, props, sys_flag, msg.flag, uniq, code)

    def reserve_uniq_keys(self, n: int) -> tuple[str, int]:
        """Reserve ``n`` UNIQ_KEYs for a batch body the caller encodes.

        Args:
            n: How many, at least 1.

        Returns:
            ``(prefix, first)``: the i-th key is ``send_wire.uniq_key(prefix, first + i)``;
            the producer's other sends never use them.

        Raises:
            ClientStateError: The producer is not running.
        """
        if self._ids is None or self._status is not ProducerStatus.RUNNING:
            raise ClientStateError(f"producer {self.config.group!r} is {self._status.value}")
        return reserve_uniq_keys(self._ids, n)

    async def send_encoded_batch(self, batch: EncodedBatch) -> SendResult:
        """Send a batch body encoded by the caller, as :meth:`send` sends a batch.

        For encoders that build many messages' items at once (the Spark sink builds
        them from Arrow columns); the keys in the body come from
        :meth:`reserve_uniq_keys`. Route, retries and result are :meth:`send`'s.

        Args:
            batch: The body, its topic and its messages' UNIQ_KEYs.

        Returns:
            Where it was stored (``msg_id``: ``batch.msg_ids``).

        Raises:
            InvalidMessageError: The topic or the body's size is not allowed.
            BrokerError, TransportError, NoRouteError: As :meth:`send`.
        """
        self._live().check_errors()
        check_encoded_batch(batch, self.config.max_message_size)
        return await self._send(
            batch.topic,
            batch.body,
            BATCH_PROPERTIES,
            0,
            0,
            batch.msg_ids,
            RequestCode.SEND_BATCH_MESSAGE,
        )

    async def send_with_properties(
        self, msg: Message, extra: Mapping[str, str] | None = None, *, sys_flag: int = 0
    ) -> SendResult:
        """Send one message with system properties and sysFlag bits the SDK adds.

        The building block of request-reply and transactions; applications use
        :meth:`send`.

        Args:
            msg: The message.
            extra: Properties added after the message's own (not validated).
            sys_flag: sysFlag bits to set (e.g. TRANSACTION_PREPARED).

        Returns:
            Where it was stored.

        Raises:
            InvalidMessageError, BrokerError, TransportError, NoRouteError: As :meth:`send`.
        """
        uniq, props, body, flags = self._prepare(msg, extra)
        code = RequestCode.SEND_MESSAGE_V2
        if msg.properties and msg.properties.get(Prop.MSG_TYPE) == REPLY_MESSAGE_FLAG:
            code = RequestCode.SEND_REPLY_MESSAGE_V2
        return await self._send(msg.topic, body, props, flags | sys_flag, msg.flag, uniq, code)

    async def send_oneway(self, msg: Message) -> None:
        """Send without waiting for the broker's answer (no result, no retry).

        Raises:
            InvalidMessageError: The message is rejected before sending.
            TransportError: The broker could not be reached.
            NoRouteError: No broker serves the topic.
        """
        _uniq, props, body, sys_flag = self._prepare(msg, None)
        try:
            queues = await self._queues(msg.topic)
            mq = self._select(msg.topic, queues, None)
            addr = await self._master(mq)
            guessed = self.instance.routes.routed_by_template(msg.topic)
            cmd = self._command(
                RequestCode.SEND_MESSAGE_V2,
                mq,
                body,
                props,
                sys_flag,
                msg.flag,
                batch=False,
                any_queue=guessed,
            )
            await self.instance.invoke_oneway(addr, cmd)
        except asyncio.CancelledError as exc:
            if (closed := self._closed_error()) is None:
                raise
            raise closed from exc

    async def send_orderly(
        self,
        msg: Message,
        sharding_key: Any,
        selector: MessageQueueSelector | None = None,
    ) -> SendResult:
        """Send to the queue chosen for ``sharding_key``: same key, same queue, in order.

        Retries stay on that queue (Java's ``sendSelectImpl``): moving would break
        the order.

        Args:
            msg: The message.
            sharding_key: Passed to the selector (e.g. an order id).
            selector: ``(queues, msg, key) -> queue``. Default: :func:`hash_selector`.

        Returns:
            Where it was stored.

        Raises:
            InvalidMessageError: The message or the selector's choice is rejected.
            BrokerError: The broker refused it.
            TransportError: The broker could not be reached in time.
            NoRouteError: No broker serves the topic.
        """
        uniq, props, body, sys_flag = self._prepare(msg, None)
        try:
            queues = await self._queues(msg.topic)
        except asyncio.CancelledError as exc:
            if (closed := self._closed_error()) is None:
                raise
            raise closed from exc
        mq = (selector or hash_selector)(queues, msg, sharding_key)
        if mq not in queues:
            raise InvalidMessageError(f"the selector chose {mq}, which is not a queue of the topic")
        return await self._send(
            msg.topic, body, props, sys_flag, msg.flag, uniq, RequestCode.SEND_MESSAGE_V2, mq
        )

    async def request(self, msg: Message, timeout_ms: int = 3000) -> MessageExt:
        """Send a request and wait for its reply (RocketMQ request-reply).

        The responder consumes the message and answers with :meth:`reply`.

        Args:
            msg: The request.
            timeout_ms: Longest wait for the reply, send included.

        Returns:
            The reply message.

        Raises:
            RequestReplyTimeoutError: No reply in time.
            BrokerError, TransportError, NoRouteError: The request could not be sent.
        """
        instance = self._live()
        return await request_reply.request(
            self.send_with_properties, instance.replies, instance.client_id, msg, timeout_ms
        )

    async def reply(self, request_msg: MessageExt, body: bytes) -> SendResult:
        """Answer a request message received by a consumer.

        Args:
            request_msg: The request as consumed.
            body: The reply payload.

        Returns:
            The send result (the broker pushes the reply to the requester).

        Raises:
            InvalidMessageError: ``request_msg`` is not a request (no CLUSTER or
                REPLY_TO_CLIENT property).
            BrokerError: The broker could not deliver the reply.
        """
        return await self.send(request_reply.make_reply(request_msg, body))

    # -- internals ----------------------------------------------------------------

    def _prepare(
        self, msg: Message, extra: Mapping[str, str] | None
    ) -> tuple[str, str, bytes, int]:
        self._live().check_errors()
        validate_message(msg, self.config.max_message_size)
        assert self._ids is not None
        uniq = self._ids.next()
        props = send_properties(msg, uniq, extra)
        body = msg.body
        sys_flag = 0
        if len(body) > self.config.compress_over:
            body = zlib.compress(body, self.config.compress_level)
            sys_flag = SysFlag.COMPRESSED
        return uniq, props, body, sys_flag

    async def _send_batch(self, msgs: Sequence[Message]) -> SendResult:
        if isinstance(msgs, str | bytes) or not isinstance(msgs, Sequence):
            raise TypeError(
                f"send takes a Message or a list of Messages, not {type(msgs).__name__}"
            )
        self._live().check_errors()
        assert self._ids is not None
        try:
            body, uniqs = encode_batch(msgs, self._ids, self.config.max_message_size)
        except AttributeError:
            # Something in the list that is no Message (the encoders read its fields).
            if all(isinstance(m, Message) for m in msgs):
                raise
            raise TypeError("send takes a Message or a list of Messages") from None
        return await self._send(
            msgs[0].topic,
            body,
            BATCH_PROPERTIES,
            0,
            0,
            ",".join(uniqs),
            RequestCode.SEND_BATCH_MESSAGE,
        )

    async def _queues(self, topic: str) -> list[MessageQueue]:
        routes = self.instance.routes
        queues = await routes.publish_queues(topic)
        if not queues:
            await routes.topic_route(topic, refresh=True)
            queues = await routes.publish_queues(topic)
            if not queues:
                raise NoRouteError(topic, "no writable queue (is the topic created?)")
        return queues

    def _select(
        self, topic: str, queues: Sequence[MessageQueue], avoid: str | None
    ) -> MessageQueue:
        position = self._round_robin.get(topic, 0)
        self._round_robin[topic] = position + 1
        if not self.config.latency_fault:
            if avoid is None:
                return queues[position % len(queues)]
            for i in range(len(queues)):
                mq = queues[(position + i) % len(queues)]
                if mq.broker_name != avoid:
                    return mq
            return queues[position % len(queues)]
        return self._fault.select(queues, position, self._clock.monotonic_ms() / 1000, avoid)

    async def _master(self, mq: MessageQueue) -> str:
        routes = self.instance.routes
        addr = routes.master_addr(mq.broker_name)
        if addr is None:
            await routes.topic_route(mq.topic, refresh=True)
            addr = routes.master_addr(mq.broker_name)
            if addr is None:
                raise NoRouteError(mq.topic, f"broker {mq.broker_name!r} has no master")
        return addr

    def _command(
        self,
        code: int,
        mq: MessageQueue,
        body: bytes,
        props: str,
        sys_flag: int,
        flag: int,
        *,
        batch: bool,
        any_queue: bool = False,
    ) -> RemotingCommand:
        born_ms = self._clock.now_ms()
        group, stype = self.config.group, self._stype
        return send_command(
            code, group, mq, body, props, sys_flag, flag, born_ms,
            batch=batch, any_queue=any_queue, serialize_type=stype,
        )  # fmt: skip

    async def _send(
        self,
        topic: str,
        body: bytes,
        props: str,
        sys_flag: int,
        flag: int,
        msg_id: str,
        code: int,
        fixed: MessageQueue | None = None,
    ) -> SendResult:
        try:
            instance = self.instance
            # The send budget is kept on the event loop's clock, the one the request
            # timeouts below run on; the injected clock times fault isolation.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self._timeout_s
            # The cached route answers without waiting; _queues also handles a topic
            # without writable queues yet.
            routes = instance.routes
            queues = await routes.publish_queues(topic) or await self._queues(topic)
            batch = code == RequestCode.SEND_BATCH_MESSAGE
            half = bool(sys_flag & _TRANSACTION_PREPARED)
            avoid: str | None = None
            failures: list[BaseException] = []
            for _attempt in range(1 + self.config.retry_times):
                mq = fixed or self._select(topic, queues, avoid)
                # Queues guessed from the TBW102 template: let the broker pick one it has
                # (not for half messages, whose answer may not name the queue: see below).
                guessed = fixed is None and not half and routes.routed_by_template(topic)
                started = loop.time()
                remaining = deadline - started
                if remaining <= 0:
                    break
                try:
                    addr = routes.master_addr(mq.broker_name) or await self._master(mq)
                    answer = await instance.invoke(
                        addr,
                        self._command(
                            code, mq, body, props, sys_flag, flag, batch=batch, any_queue=guessed
                        ),
                        remaining,
                    )
                    result = read_send_result(answer, mq, msg_id, addr, trust_queue_id=not half)
                except (TransportError, BrokerError, NoRouteError) as exc:
                    if isinstance(exc, BrokerError) and not exc.retriable:
                        raise  # about this message, not the broker: no isolation, no retry
                    now_s = self._clock.monotonic_ms() / 1000
                    self._fault.update(mq.broker_name, 0.0, now_s, failed=True)
                    failures.append(exc)
                    avoid = mq.broker_name
                    if isinstance(exc, TopicNotExistError):
                        # The broker lost the topic (or never had it): ask the name server.
                        await routes.topic_route(topic, refresh=True)
                        queues = await self._queues(topic)
                    _log.debug(
                        "send attempt failed", topic=topic, broker=mq.broker_name, error=str(exc)
                    )
                    continue
                latency_ms = (loop.time() - started) * 1000
                now_s = self._clock.monotonic_ms() / 1000
                self._fault.update(mq.broker_name, latency_ms, now_s, failed=False)
                if self._tracer is not None:
                    self._tracer.sent(topic, len(body), props, addr, result, latency_ms)
                return result
            raise send_failure(failures, code, self._timeout_s)
        except asyncio.CancelledError as exc:
            # Closing cancels the route fetches and connects this send may wait on.
            if (closed := self._closed_error()) is None:
                raise
            raise closed from exc

    def _closed_error(self) -> ClientStateError | None:
        """What to raise instead of a ``CancelledError`` the caller did not ask for."""
        return closed_while_waiting(
            "producer" if self._status is ProducerStatus.CLOSED else "client instance"
        )


#: The running loop (``_live`` compares it with the producer's on every call).
_running_loop: Final = asyncio.get_running_loop
# A plain int: ``int & SysFlag.X`` goes through IntFlag's Python-level operator.
_TRANSACTION_PREPARED: Final = int(SysFlag.TRANSACTION_PREPARED)
