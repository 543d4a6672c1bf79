"""Send processor: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320).

Follows RocketMQ 4.9's ``SendMessageProcessor`` and ``AbstractSendMessageProcessor``:
validate the topic and queue, auto-create the topic from its template, redirect a retry
message past its max reconsume times to the group's dead-letter queue, turn a
transaction's half message into RMQ_SYS_TRANS_HALF_TOPIC, add the CLUSTER property and
drop WAIT, store, and answer msgId / queueId / queueOffset. The C++ client's batch is
code 10 with ``batch="1"``; it is stored as its individual messages (docs/protocol.md),
unlike RocketMQ 4.9.4, which stores the blob as one message.

Under SYNC_FLUSH the answer waits for the group commit without blocking the event loop
and without a task: the send registers a callback in a FIFO that the flush thread's
progress drains (:mod:`rocklet.broker.put_wait`), and returns a deferred answer. A
sync that times out or fails is answered FLUSH_DISK_TIMEOUT with the reason in the
remark (the message is stored; the producer may retry and duplicate it). Under
SYNC_MASTER the answer then waits for a slave's acknowledgement, grouped the same way
(:mod:`rocklet.broker.ha.master`): SLAVE_NOT_AVAILABLE at once without a usable slave,
FLUSH_SLAVE_TIMEOUT after ``slaveTimeout``; both mean stored on the master. A message
with ``WAIT=false`` is answered once stored, waiting for neither
(:mod:`rocklet.broker.put_wait`). A slave answers every send SERVICE_NOT_AVAILABLE, as
RocketMQ's store refuses puts there.

A topic created by this send (or by a concurrent one, not yet on disk) is written to
``topics.json`` before the message is stored, so an acknowledged message never lives
in a topic the broker forgets in a crash. Sends to existing topics pay one test of an
empty dict for this.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Final, TypeVar

import structlog

from rocklet.broker.config_writer import ConfigWriteError
from rocklet.broker.groups import SubscriptionGroupManager
from rocklet.broker.ha.master import HAMaster
from rocklet.broker.identity import BrokerIdentity
from rocklet.broker.processors.refusal import Refused
from rocklet.broker.put_wait import PutWait, waits_for_store
from rocklet.broker.registration import RegistrationTracker
from rocklet.broker.status_codes import PUT_STATUS_TO_RESPONSE
from rocklet.broker.topics import TopicConfigManager
from rocklet.protocol.batch import decode_batch
from rocklet.protocol.bodies.route import Perm
from rocklet.protocol.bodies.topic import TopicConfig
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.headers.send import (
    SendMessageRequestHeader,
    parse_send_header,
    send_response_fields,
)
from rocklet.protocol.message import pack_host
from rocklet.protocol.names import (
    AUTO_CREATE_TOPIC,
    DLQ_PREFIX,
    RETRY_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    check_topic_name,
)
from rocklet.protocol.properties import Prop, decode_properties
from rocklet.store._raw_batch import RawBatch, offset_msg_ids, single_message_body
from rocklet.store.message_store import MessageStore
from rocklet.store.results import ZERO_HOST, MessageToStore, PutMessageStatus, PutResult
from rocklet.transport import ProcessorRegistry, RequestContext
from rocklet.transport.deferred import Deferred
from rocklet.transport.types import LATER, Later

__all__ = ["SLAVE_PUT_REFUSAL", "SendProcessor", "peer_host", "register"]

_new_tuple = tuple.__new__

#: A slave's answer to a send: SERVICE_NOT_AVAILABLE (14), as RocketMQ 4.9.4's store
#: refuses puts on a slave; its remark lists "messages are put to the slave" among
#: other causes, ours names the one that applies.
SLAVE_PUT_REFUSAL: Final = (
    "service not available now: messages are put to the slave; "
    "this broker is a slave (brokerRole=SLAVE) and takes no writes, send to its master"
)

log = structlog.get_logger(__name__)

#: Sends to these are refused (``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET``, and the
#: auto-create template).
_NOT_ALLOWED_SEND = frozenset(
    {SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, AUTO_CREATE_TOPIC}
)
#: ``MQVersion.V3_4_9``: from this version on the client's maxReconsumeTimes counts.
_V3_4_9 = 121
_TRANSACTION_TYPE = 0xC
#: Transaction types the store keeps out of every consume queue (half, rolled back).
_NOT_CONSUMABLE = frozenset({0x4, 0xC})
_NOT_CONSUMABLE_REMARK = (
    "sysFlag marks the message as a transaction half or rollback, which no consumer "
    "ever reads, but it is not a transaction message (no TRAN_MSG property)"
)
# Plain ints: ``int & Perm.WRITE`` would go through IntFlag's Python-level operator.
_WRITE = int(Perm.WRITE)
#: Where the packed BORNHOST of a connection's peer is kept (its attributes).
_BORN_HOST = "rocklet.send.born_host"
#: Topic names known to pass ``check_topic_name`` (a regular expression per send
#: otherwise); cleared when it reaches this size, so odd clients cannot grow it.
_CHECKED_TOPICS_MAX = 4096

#: What a stored send's answer is made from (its messages, or a raw batch's queue id).
_T = TypeVar("_T")


def peer_host(peer: tuple[str, int]) -> bytes:
    """Pack a peer address as a stored record's BORNHOST (IPv4 only, as clients read it)."""
    host, port = peer
    if host in ("::1", "localhost"):
        host = "127.0.0.1"
    try:
        return pack_host(host.removeprefix("::ffff:"), port)
    except ValueError:
        return ZERO_HOST


class SendProcessor:
    """Serves the send codes. Event loop only.

    Args:
        store: The message store.
        topics: Topic configs (auto-created from the template, retry and system topics).
        groups: Subscription group configs (a retry message's group).
        identity: This broker's name, permissions and record host field.
        sync_flush: ``flushDiskType`` is SYNC_FLUSH: answer once the put is durable.
        reject_transactions: ``rejectTransactionMessage``.
        max_message_size: ``maxMessageSize``, named in the remark of a refused put.
        replicas: The master's HA service, or ``None`` (no replication: a slave, or
            a broker built without one).
        sync_master: ``brokerRole=SYNC_MASTER``: answer once a slave has the message.
        put_wait: What a put waits for (``syncFlushTimeout``, ``slaveTimeout``), shared
            with the other processors that store on a client's behalf.
        registration: Which topic table the name servers have: a topic a send
            creates is registered before that send is answered.
        register_timeout_ms: ``registerBrokerTimeoutMills``: the longest a send waits
            for that registration (a name server that does not answer delays the first
            send to a new topic by this much, never fails it).
    """

    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        identity: BrokerIdentity,
        sync_flush: bool,
        reject_transactions: bool,
        max_message_size: int,
        put_wait: PutWait,
        replicas: HAMaster | None = None,
        sync_master: bool = False,
        registration: RegistrationTracker | None = None,
        register_timeout_ms: int = 6000,
    ) -> None:
        self._store = store
        self._registration = RegistrationTracker.done() if registration is None else registration
        self._register_timeout_s = register_timeout_ms / 1000
        self._replicas = replicas
        self._put_wait = put_wait
        # Under ASYNC_FLUSH without SYNC_MASTER nothing waits: one test per send.
        self._waits = sync_flush or (sync_master and replicas is not None)
        self._is_slave = not identity.is_master
        self._topics = topics
        self._groups = groups
        self._broker_name = identity.broker_name
        self._cluster = identity.cluster_name
        self._identity = identity  # its permission may change (UPDATE_BROKER_CONFIG)
        self._store_host = identity.store_host
        self._store_host_hex = identity.store_host.hex().upper()
        self._reject_transactions = reject_transactions
        self._max_message_size = max_message_size
        self._checked_topics: set[str] = set()
        self._cluster_property = (Prop.CLUSTER, identity.cluster_name)

    def process_now(
        self, rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand | Deferred | Later:
        """Store the message(s) of a send request and answer where they went.

        The usual send, with no coroutine: the server calls it first and calls
        :meth:`process` only when this returns ``LATER`` (a topic or group this send
        relies on was just created and is not on disk yet; nothing was stored). A send
        that must wait for the disk or a slave is answered later: this returns a
        :class:`Deferred` that the waits' progress answers
        (:class:`~rocklet.broker.put_wait.PutWait`).
        """
        header = parse_send_header(cmd)
        stored = self._raw_put(rctx, cmd, header)
        if stored is not None:
            return stored
        try:
            config = self._check(header)
            queue_id = self._queue_id(header, config)
            msgs = self._messages(header, cmd, queue_id, self._born_host(rctx), cmd.version)
        except Refused as refused:
            return refused.answer(cmd)
        if self._topics.unsaved or self._groups.unsaved:
            return LATER
        return self._after_put(cmd, header, self._store.put_messages(msgs), self._answer, msgs)

    async def process(
        self, rctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand | Deferred:
        """:meth:`process_now`, once the topics and groups changed so far are on disk.

        A topic or group this send relies on was just created (perhaps by this very
        send): it is on disk before a message is stored in it, and the name servers
        have it before the send is answered (RocketMQ registers an auto-created topic
        after answering, so a client's immediate route lookup can miss it). Nothing
        was stored when :meth:`process_now` said ``LATER``, so it simply runs again.
        """
        while (answer := self.process_now(rctx, cmd)) is LATER:
            problem = await self._metadata_saved()
            if problem is not None:
                return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=problem)
            await self._registration.wait_for(
                self._topics.data_version.counter, self._register_timeout_s
            )
        return answer

    def _after_put(
        self,
        cmd: RemotingCommand,
        header: SendMessageRequestHeader,
        result: PutResult,
        answer_with: Callable[
            [RemotingCommand, _T, PutResult, ResponseCode, str | None], RemotingCommand
        ],
        stored: _T,
    ) -> RemotingCommand | Deferred:
        """Answer a put: refused, at once, or once the disk or a slave has it.

        ``answer_with(cmd, stored, result, code, remark)`` makes the answer (no closure
        per send: this is the hot path).
        """
        if result.status is not PutMessageStatus.PUT_OK:
            refused_code, why = self._refusal(result)
            return cmd.make_response(refused_code, remark=why)
        if self._waits:
            deferred = Deferred(cmd)

            def answer(code: ResponseCode, remark: str | None) -> None:
                deferred.answer(answer_with(cmd, stored, result, code, remark))

            outcome = self._put_wait.begin(result, waits_for_store(header.properties), answer)
            if outcome is None:
                return deferred
            return answer_with(cmd, stored, result, *outcome)
        if self._replicas is not None and self._replicas.has_slaves:
            self._replicas.notify()
        return answer_with(cmd, stored, result, ResponseCode.SUCCESS, None)

    def _answer(
        self,
        cmd: RemotingCommand,
        msgs: list[MessageToStore],
        result: PutResult,
        code: ResponseCode,
        remark: str | None,
    ) -> RemotingCommand:
        """The answer to a stored send: where its messages went."""
        first = msgs[0]
        # A half message is stored in the half topic's queue 0, but the producer is told
        # the queue it asked for, as RocketMQ answers (it ends the transaction there).
        queue_id = (
            int(first.properties[Prop.REAL_QID])
            if first.topic == TRANS_HALF_TOPIC
            else first.queue_id
        )
        # make_offset_msg_id's text, with the host's half formatted once (commitlog
        # offsets are never negative).
        offsets = result.record_offsets
        host = self._store_host_hex
        if len(offsets) == 1:
            msg_id = f"{host}{offsets[0]:016X}"
        else:
            msg_id = ",".join([f"{host}{offset:016X}" for offset in offsets])
        fields = send_response_fields(msg_id, queue_id, result.queue_offset)
        return cmd.make_response(code, remark=remark, ext_fields=fields)

    def _born_host(self, rctx: RequestContext) -> bytes:
        # Packed once per connection: the peer does not change.
        attributes = rctx.connection.attributes
        host = attributes.get(_BORN_HOST)
        if not isinstance(host, bytes):
            host = attributes[_BORN_HOST] = peer_host(rctx.peer)
        return host

    # -- checks ------------------------------------------------------------------------
    def _check(self, header: SendMessageRequestHeader) -> TopicConfig:
        if self._is_slave:
            # DefaultMessageStore refuses puts on a slave; SendMessageProcessor's answer.
            raise Refused(ResponseCode.SERVICE_NOT_AVAILABLE, SLAVE_PUT_REFUSAL)
        if not self._identity.writable:
            raise Refused(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self._broker_name}] sending message is forbidden",
            )
        topic = header.topic
        if topic not in self._checked_topics:
            problem = check_topic_name(topic)
            if problem is not None:
                raise Refused(ResponseCode.SYSTEM_ERROR, problem)
            if len(self._checked_topics) >= _CHECKED_TOPICS_MAX:
                self._checked_topics.clear()
            self._checked_topics.add(topic)
        if topic in _NOT_ALLOWED_SEND:
            raise Refused(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        topics = self._topics
        config = topics.find(topic)
        if config is None:
            if topic.startswith(RETRY_PREFIX):
                config = topics.create_system_topic(topic, 1)
            else:
                config = topics.create_for_send(
                    topic, header.default_topic, header.default_topic_queue_nums
                )
        if config is None:
            raise Refused(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        # int.__and__: perm may be a Perm flag, whose own & runs Python code per send.
        if not int.__and__(config.perm, _WRITE):
            raise Refused(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
            )
        return config

    def _queue_id(self, header: SendMessageRequestHeader, config: TopicConfig) -> int:
        queue_id = header.queue_id
        limit = max(config.write_queue_nums, config.read_queue_nums)
        if queue_id >= limit:
            raise Refused(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, {config.topic_name} Producer: "
                f"queue count {limit}",
            )
        if queue_id < 0:
            queue_id = random.randrange(max(1, config.write_queue_nums))
        return queue_id

    # -- building the messages -----------------------------------------------------
    def _messages(
        self,
        header: SendMessageRequestHeader,
        cmd: RemotingCommand,
        queue_id: int,
        born_host: bytes,
        version: int,
    ) -> list[MessageToStore]:
        topic = header.topic
        if header.batch:
            return self._batch(header, cmd.body, queue_id, born_host)
        props, wait = self._properties(header.properties or "")
        if header.sys_flag & _TRANSACTION_TYPE in _NOT_CONSUMABLE and (
            props.get(Prop.TRAN_MSG) != "true"
        ):
            # RocketMQ stores it and answers SUCCESS: an acknowledged message no
            # consumer will ever see.
            raise Refused(ResponseCode.MESSAGE_ILLEGAL, _NOT_CONSUMABLE_REMARK)
        delay = props.get(Prop.DELAY)
        if delay is not None and not _is_java_int(delay):
            # RocketMQ's getDelayTimeLevel throws on it (SYSTEM_ERROR); the store would
            # deliver at once what the producer asked to delay.
            raise Refused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the DELAY property must be a delay level (an integer), got {delay[:32]!a}",
            )
        reconsume = header.reconsume_times
        if topic.startswith(RETRY_PREFIX):
            topic, queue_id = self._retry_or_dlq(topic, queue_id, reconsume, header, version)
        sys_flag = header.sys_flag
        if props.get(Prop.TRAN_MSG) == "true":
            if self._reject_transactions:
                raise Refused(
                    ResponseCode.NO_PERMISSION,
                    f"the broker[{self._broker_name}] sending transaction message is forbidden",
                )
            # A half message waits in the half topic until END_TRANSACTION commits it
            # (TransactionalMessageBridge.parseHalfMessageInner).
            props[Prop.REAL_TOPIC] = topic
            props[Prop.REAL_QID] = str(queue_id)
            topic, queue_id = TRANS_HALF_TOPIC, 0
            sys_flag &= ~_TRANSACTION_TYPE
            self._topics.create_system_topic(TRANS_HALF_TOPIC, 1)
            keep_wait = True
        else:
            keep_wait = delay is not None and int(delay) > 0
        if wait is not None and keep_wait:
            # RocketMQ leaves WAIT out of what it stores, except where its store writes
            # the properties again: delayed and half messages keep it.
            props[Prop.WAIT] = wait
        return [
            MessageToStore(
                topic,
                queue_id,
                cmd.body,
                props,
                header.flag,
                sys_flag,
                header.born_timestamp,
                born_host,
                self._store_host,
                reconsume,
            )
        ]

    def _raw_put(
        self, rctx: RequestContext, cmd: RemotingCommand, header: SendMessageRequestHeader
    ) -> RemotingCommand | Deferred | None:
        """Store the usual batch, or the usual single send, straight from its bytes.

        No object per message: a batch body is stored as it came, and a plain single
        send (not to a retry topic, not transactional) as a batch of one.

        Returns:
            The answer, or ``None`` when the send takes the per-message path
            (:meth:`MessageStore.put_raw_batch` says which; a topic not yet on disk does
            too), which then decides exactly as before.
        """
        if not header.batch and (
            header.sys_flag & _TRANSACTION_TYPE or header.topic.startswith(RETRY_PREFIX)
        ):
            return None  # the per-message path's own rules
        try:
            config = self._check(header)
            queue_id = self._queue_id(header, config)
            if header.batch:
                self._batch_refusal(header, cmd.body)
        except Refused as refused:
            return refused.answer(cmd)
        if self._topics.unsaved or self._groups.unsaved:
            return None
        if header.batch:
            body = cmd.body
        else:
            single = single_message_body(cmd.body, header.properties or "", header.flag)
            if single is None:
                return None
            body = single
        # RawBatch(...) through tuple.__new__: the NamedTuple's own __new__ is a Python
        # function, one frame more per send.
        raw = _new_tuple(RawBatch, (
            header.topic, queue_id, body, header.sys_flag, header.born_timestamp,
            self._born_host(rctx), self._store_host, header.reconsume_times, Prop.WAIT,
            self._cluster_property,
        ))  # fmt: skip
        result = self._store.put_raw_batch(raw)
        if result is None:
            return None
        return self._after_put(cmd, header, result, self._raw_answer, queue_id)

    def _raw_answer(
        self,
        cmd: RemotingCommand,
        queue_id: int,
        result: PutResult,
        code: ResponseCode,
        remark: str | None,
    ) -> RemotingCommand:
        """:meth:`_answer` for messages stored from their bytes."""
        msg_id = offset_msg_ids(self._store_host_hex, result.record_offsets)
        fields = send_response_fields(msg_id, queue_id, result.queue_offset)
        return cmd.make_response(code, remark=remark, ext_fields=fields)

    def _batch_refusal(self, header: SendMessageRequestHeader, body: bytes) -> None:
        """Refuse what no batch may be, before its body is read."""
        if header.topic.startswith(RETRY_PREFIX):
            raise Refused(
                ResponseCode.MESSAGE_ILLEGAL, "batch request does not support retry group"
            )
        if header.sys_flag & _TRANSACTION_TYPE in _NOT_CONSUMABLE:
            raise Refused(ResponseCode.MESSAGE_ILLEGAL, _NOT_CONSUMABLE_REMARK)
        if len(body) > self._max_message_size:
            # DefaultMessageStore.checkMessages: the whole batch within maxMessageSize.
            raise Refused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the batch body is {len(body)} bytes, more than the max message size "
                f"({self._max_message_size} bytes)",
            )

    def _batch(
        self, header: SendMessageRequestHeader, body: bytes, queue_id: int, born_host: bytes
    ) -> list[MessageToStore]:
        self._batch_refusal(header, body)
        try:
            items = decode_batch(body)
        except MessageFormatError as exc:
            raise Refused(ResponseCode.MESSAGE_ILLEGAL, f"bad batch body: {exc}") from None
        topic, sys_flag = header.topic, header.sys_flag
        born_timestamp, reconsume = header.born_timestamp, header.reconsume_times
        store_host = self._store_host
        properties = self._properties
        out = []
        for flag, item_body, raw_props in items:
            props, _wait = properties(raw_props)  # batches are never delayed: WAIT goes
            if Prop.DELAY in props:
                raise Refused(ResponseCode.MESSAGE_ILLEGAL, "batch message does not support delay")
            out.append(
                MessageToStore(
                    topic,
                    queue_id,
                    item_body,
                    props,
                    flag,
                    sys_flag,
                    born_timestamp,
                    born_host,
                    store_host,
                    reconsume,
                )
            )
        return out

    def _properties(self, raw: str | bytes) -> tuple[dict[str, str], str | None]:
        """The properties to store, and the client's WAIT (left out of them)."""
        props = decode_properties(raw)
        wait = props.pop(Prop.WAIT, None)  # a client-side flag, mostly not stored
        props[Prop.CLUSTER] = self._cluster  # request-reply needs it (§3.8)
        return props, wait

    def _retry_or_dlq(
        self,
        topic: str,
        queue_id: int,
        reconsume: int,
        header: SendMessageRequestHeader,
        version: int,
    ) -> tuple[str, int]:
        """A retry-topic message past its max reconsume times goes to the DLQ."""
        group = topic.removeprefix(RETRY_PREFIX)
        config = self._groups.find(group)
        if config is None:
            raise Refused(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        max_times = config.retry_max_times
        if version >= _V3_4_9 and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        if reconsume <= max_times:
            return topic, queue_id
        dlq = f"{DLQ_PREFIX}{group}"
        self._topics.create_system_topic(dlq, 1)
        return dlq, 0

    def _refusal(self, result: PutResult) -> tuple[ResponseCode, str]:
        """The answer to a put the store did not accept."""
        code = PUT_STATUS_TO_RESPONSE[result.status]
        if result.status is PutMessageStatus.MESSAGE_ILLEGAL:
            return code, (
                "the message is illegal, maybe the body is over the max message size "
                f"({self._max_message_size} bytes) or the topic too long"
            )
        if result.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED:
            return code, "the message properties are longer than 32767 bytes"
        if result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
            full = self._store.disk.reason()
            if full:
                # RocketMQ's remark names the disk usage too ("the broker's disk is full
                # [CL: ...]"); ours says which path and what makes sends resume.
                return code, f"service not available now: {full}"
            return code, "service not available now: the message store has been shut down"
        if result.status is PutMessageStatus.CREATE_MAPPED_FILE_FAILED:
            return code, "create mapped file failed, server is busy or broken."
        return code, f"store refused the message: {result.status.value}"

    async def _metadata_saved(self) -> str | None:
        """Wait until every topic and group changed so far is on disk.

        Returns:
            ``None``, or why they could not be saved.
        """
        try:
            await self._topics.saved(*self._topics.unsaved)
            await self._groups.saved(*self._groups.unsaved)
        except ConfigWriteError as exc:
            return f"{exc}; the message was not stored"
        return None


def register(registry: ProcessorRegistry, processor: SendProcessor) -> None:
    """Register the send codes (eager: an ASYNC_FLUSH send answers without a task)."""
    for code in (
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
    ):
        registry.register(code, processor.process, now=processor.process_now)


def _is_java_int(text: str) -> bool:
    """Whether ``Integer.parseInt`` reads ``text`` (an optional sign, ASCII digits)."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    return digits.isascii() and digits.isdigit() and int(text) in range(-(2**31), 2**31)


def queues_of(messages: Sequence[MessageToStore]) -> set[tuple[str, int]]:
    """Return the (topic, queue) pairs of messages (for tests and metrics)."""
    return {(m.topic, m.queue_id) for m in messages}
