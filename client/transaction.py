"""Transactional messages (RocketMQ's ``TransactionMQProducer``).

Two-phase send, docs/protocol.md:

1. The *half message* is sent with ``TRAN_MSG=true``, ``PGROUP=<group>`` and sysFlag
   TRANSACTION_PREPARED; the broker keeps it in ``RMQ_SYS_TRANS_HALF_TOPIC``, invisible
   to consumers.
2. The local transaction runs (an ``async def`` or a plain function, which runs in a
   worker thread so a blocking database call does not stall the event loop).
3. END_TRANSACTION (37) goes to the broker that stored the half message, with commit
   (8), rollback (12) or unknown (0). The half message is identified by its commitlog
   offset, read from the offset msgId the send returned, and its queue offset. Java
   sends it oneway; we wait for the broker's answer to a commit or rollback, so when
   ``send_in_transaction`` returns the outcome is applied (or a refusal was logged).
   "Unknown" stays oneway: a RocketMQ broker does not answer it.

When the outcome stays unknown (the local transaction said so, raised, or the
END_TRANSACTION was lost), the broker later asks the producer group with
CHECK_TRANSACTION_STATE (39); the check listener answers and the producer sends
END_TRANSACTION with ``fromTransactionCheck=true`` to the broker that asked.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from rocklet.client.errors import BrokerError, InvalidMessageError, TransportError
from rocklet.client.message import Message, MessageExt, SendResult, SendStatus
from rocklet.client.producer import Producer
from rocklet.protocol.bodies.cluster import ClusterInfo
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.transaction import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    TransactionType,
)
from rocklet.protocol.message import SysFlag
from rocklet.protocol.message_id import parse_offset_msg_id
from rocklet.protocol.names import AUTO_CREATE_TOPIC
from rocklet.protocol.properties import Prop
from rocklet.transport.logs import get_logger

__all__ = [
    "CheckListener",
    "HalfMessage",
    "LocalTransaction",
    "LocalTransactionState",
    "TransactionProducer",
    "TransactionSendResult",
]

_log = get_logger(__name__)


class LocalTransactionState(enum.Enum):
    """What became of the local transaction (``LocalTransactionState.java``)."""

    COMMIT = "COMMIT_MESSAGE"  #: deliver the message
    ROLLBACK = "ROLLBACK_MESSAGE"  #: discard it
    UNKNOWN = "UNKNOW"  #: not decided yet: the broker will check back later

    @property
    def wire(self) -> TransactionType:
        """The ``commitOrRollback`` value sent in END_TRANSACTION."""
        return _WIRE[self]


_WIRE = {
    LocalTransactionState.COMMIT: TransactionType.COMMIT,
    LocalTransactionState.ROLLBACK: TransactionType.ROLLBACK,
    LocalTransactionState.UNKNOWN: TransactionType.NOT_TYPE,
}

_State: TypeAlias = LocalTransactionState | Awaitable[LocalTransactionState]
#: Runs the local transaction for a half message: ``(msg, arg) -> state``.
LocalTransaction: TypeAlias = Callable[[Message, Any], _State]
#: Answers a check-back about a half message: ``(msg) -> state``.
CheckListener: TypeAlias = Callable[[MessageExt], _State]


@dataclass(frozen=True, slots=True)
class TransactionSendResult:
    """A transactional send: where the half message went and what was decided.

    Attributes:
        send_result: The half message's send result.
        local_state: The local transaction's outcome, as sent to the broker.
    """

    send_result: SendResult
    local_state: LocalTransactionState


@dataclass(frozen=True, slots=True)
class HalfMessage:
    """What END_TRANSACTION needs to name a stored half message (picklable, small).

    Attributes:
        topic: The message's own topic (its route leads to the broker).
        broker_name: The broker group that stored the half message.
        commit_log_offset: Where the half message is in that broker's commitlog.
        queue_offset: Its offset in the half topic's queue (``tranStateTableOffset``).
        msg_id: Its UNIQ_KEY; the committed message keeps it.
    """

    topic: str
    broker_name: str
    commit_log_offset: int
    queue_offset: int
    msg_id: str

    @classmethod
    def of(cls, topic: str, result: SendResult) -> HalfMessage:
        """The handle of a half message from its send result."""
        return cls(
            topic,
            result.message_queue.broker_name,
            parse_offset_msg_id(result.offset_msg_id).offset,
            result.queue_offset,
            result.msg_id,
        )


class TransactionProducer(Producer):
    """A producer whose messages are delivered only if a local transaction commits.

    Args:
        group: Producer group; the broker sends check-backs to any member of it.
        namesrv: Name server address(es).
        check_listener: Answers check-backs about undecided half messages; an
            ``async def`` or a plain function (run in a worker thread). If it raises
            (or returns something else than a state), the failure is logged with its
            traceback, the broker is answered UNKNOWN and asks again later (Java's
            ``checkLocalTransaction`` contract), and ``on_error`` gets the exception.
        on_error: Called, on the event loop, with each failure of ``check_listener``
            (and of answering a check-back). It is this producer's own channel: such
            failures never surface in another producer's or consumer's calls, nor in
            this producer's sends. Default: None (logged only).
        **options: Further :class:`~rocklet.client.producer.ProducerConfig` fields.

    Raises:
        TypeError: ``check_listener`` or ``on_error`` is not callable.
    """

    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        check_listener: CheckListener,
        on_error: Callable[[BaseException], object] | None = None,
        **options: Any,
    ) -> None:
        if not callable(check_listener):
            raise TypeError(f"check_listener must be callable, not {check_listener!r}")
        if on_error is not None and not callable(on_error):
            raise TypeError(f"on_error must be callable, not {on_error!r}")
        super().__init__(group, namesrv, **options)
        self._check_listener = check_listener
        self._on_error = on_error

    async def start(self) -> None:
        """Start, and make every broker a check-back may come from know this group.

        Heartbeats go to the brokers the client's routes name. A producer started only
        to answer check-backs (a restarted one that sends nothing) knew none, and the
        brokers found no live member of its group to ask, while each failed attempt
        counted towards ``transactionCheckMax``. As Java's producer does, it reads the
        auto-create template topic's route, which names every broker that allows
        auto-creation; without it, the route of each cluster's own topic (brokers
        register one per cluster, ``clusterTopicEnable``).

        Raises:
            ClientStateError: Closed, or the group already runs in this instance.
        """
        await super().start()
        instance = self._live()
        try:
            if await instance.topic_route(AUTO_CREATE_TOPIC) is None:
                answer = await instance.invoke_namesrv(
                    RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO)
                )
                if answer.code == ResponseCode.SUCCESS:
                    for cluster in ClusterInfo.from_json(answer.body).cluster_addr_table:
                        await instance.topic_route(cluster)
        except (TransportError, BrokerError) as exc:
            _log.warning(
                "cannot list the brokers to announce the group to; check-backs reach it "
                "once it sends",
                group=self.config.group,
                error=str(exc),
            )
            return
        await instance.groups.send_heartbeat()

    async def send_in_transaction(
        self, msg: Message, local_transaction: LocalTransaction, arg: Any = None
    ) -> TransactionSendResult:
        """Send a half message, run the local transaction, and commit or roll back.

        Args:
            msg: The message (a delay level is not allowed, as in RocketMQ).
            local_transaction: ``(msg, arg) -> LocalTransactionState``; ``async def``
                or plain (run in a worker thread). An exception counts as UNKNOWN,
                so the broker will check back.
            arg: Passed to ``local_transaction``.

        Returns:
            The half message's send result and the state sent to the broker.

        Raises:
            InvalidMessageError, BrokerError, TransportError, NoRouteError: The half
                message could not be sent (the local transaction did not run).
        """
        result = await self.send_half(msg)
        remark: str | None = None
        if result.status is not SendStatus.SEND_OK:
            # DefaultMQProducerImpl.sendMessageInTransaction: not durable => roll back.
            state = LocalTransactionState.ROLLBACK
        else:
            try:
                state = await _call(local_transaction, msg, arg)
            except Exception as exc:
                _log.warning("local transaction failed; state unknown", error=repr(exc))
                state, remark = LocalTransactionState.UNKNOWN, f"{type(exc).__name__}: {exc}"
        await self._end_after_send(msg, result, state, remark)
        return TransactionSendResult(result, state)

    async def send_half(self, msg: Message) -> SendResult:
        """Send a half message and leave the decision for later (:meth:`end`).

        For a two-phase commit whose decision is made elsewhere, e.g. by a
        coordinator that collects :class:`HalfMessage` handles from many producers.
        Until it is ended, the broker checks back with the producer group.

        Args:
            msg: The message (a delay level is not allowed, as in RocketMQ).

        Returns:
            The half message's send result (:meth:`HalfMessage.of` makes its handle).

        Raises:
            InvalidMessageError, BrokerError, TransportError, NoRouteError: As
                :meth:`send_in_transaction`.
        """
        if msg.delay_level:
            raise InvalidMessageError("a transactional message cannot be delayed")
        extra = {Prop.TRAN_MSG: "true", Prop.PGROUP: self.config.group}
        return await self.send_with_properties(msg, extra, sys_flag=SysFlag.TRANSACTION_PREPARED)

    async def end(self, half: HalfMessage, state: LocalTransactionState) -> bool:
        """End a half message this producer group sent: commit or roll it back.

        A half message must be ended once: RocketMQ commits a half message again each
        time it is told to, so a retry after an unclear outcome can duplicate it.

        Args:
            half: The handle.
            state: COMMIT or ROLLBACK.

        Returns:
            Whether the broker answered that it applied the outcome (False: it was not
            reached or refused; the half message stays and is checked back).
        """
        if state is LocalTransactionState.UNKNOWN:
            raise ValueError("end() takes COMMIT or ROLLBACK")
        instance = self._live()
        addr = instance.routes.master_addr(half.broker_name)
        if addr is None:
            await instance.topic_route(half.topic, refresh=True)
            addr = instance.routes.master_addr(half.broker_name)
        if addr is None:
            _log.warning("no master to end the transaction", broker=half.broker_name)
            return False
        header = EndTransactionRequestHeader(
            producer_group=self.config.group,
            tran_state_table_offset=half.queue_offset,
            commit_log_offset=half.commit_log_offset,
            commit_or_rollback=state.wire,
            msg_id=half.msg_id,
            from_transaction_check=False,
            transaction_id=half.msg_id,
        )
        return await self._end(addr, header, None, state=state, topic=half.topic)

    async def _end_after_send(
        self, msg: Message, result: SendResult, state: LocalTransactionState, remark: str | None
    ) -> None:
        addr = self.instance.routes.master_addr(result.message_queue.broker_name)
        if addr is None:
            _log.warning("no master to end the transaction; the broker will check back")
            return
        offset = parse_offset_msg_id(result.offset_msg_id).offset
        header = EndTransactionRequestHeader(
            producer_group=self.config.group,
            tran_state_table_offset=result.queue_offset,
            commit_log_offset=offset,
            commit_or_rollback=state.wire,
            msg_id=result.msg_id,
            from_transaction_check=False,
            transaction_id=result.transaction_id or result.msg_id,
        )
        props = {Prop.TAGS: msg.tags or "", Prop.KEYS: " ".join(msg.key_list)}
        await self._end(addr, header, remark, state=state, topic=msg.topic, props=props)

    async def check_transaction_state(
        self, msg: MessageExt, header: CheckTransactionStateRequestHeader, broker_addr: str
    ) -> None:
        """Answer a broker's CHECK_TRANSACTION_STATE with END_TRANSACTION.

        A listener that raises answers "unknown" (the broker asks again later), as
        Java treats an exception in ``checkLocalTransaction``. Its failure is the
        application's, not the client instance's: it is logged and handed to this
        producer's ``on_error`` only, never to the instance's error channel, whose
        failures the next call of every producer and consumer sharing the instance
        would raise. Nothing here raises (the dispatcher would report it there).
        """
        try:
            await self._answer_check(msg, header, broker_addr)
        except Exception as exc:
            self._check_failed(exc, "answering a transaction check-back failed")

    async def _answer_check(
        self, msg: MessageExt, header: CheckTransactionStateRequestHeader, broker_addr: str
    ) -> None:
        remark: str | None = None
        try:
            state = await _call(self._check_listener, msg)
        except Exception as exc:
            self._check_failed(exc, "transaction check listener failed; answering UNKNOWN")
            state, remark = LocalTransactionState.UNKNOWN, f"{type(exc).__name__}: {exc}"
        uniq = msg.properties.get(Prop.UNIQ_KEY) or header.msg_id or msg.msg_id
        end = EndTransactionRequestHeader(
            producer_group=self.config.group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=state.wire,
            msg_id=uniq,
            from_transaction_check=True,
            transaction_id=header.transaction_id or uniq,
        )
        await self._end(
            broker_addr, end, remark, state=state, topic=msg.topic, props=msg.properties
        )

    def _check_failed(self, exc: Exception, event: str) -> None:
        """Log a check-back failure with its traceback and hand it to ``on_error``."""
        _log.error(event, group=self.config.group, exc_info=exc)
        if self._on_error is not None:
            try:
                self._on_error(exc)
            except Exception:
                _log.exception("on_error failed", group=self.config.group)

    async def _end(
        self,
        addr: str,
        header: EndTransactionRequestHeader,
        remark: str | None,
        *,
        state: LocalTransactionState,
        topic: str,
        props: Mapping[str, str] | None = None,
    ) -> bool:
        """Send END_TRANSACTION; True when a commit or rollback was answered SUCCESS.

        With message trace on, each end sent is traced first (``state``, and the
        message's ``topic`` and tags and keys in ``props`` when known), as Java's
        end-transaction hook does for every end, oneway or not.
        """
        if self._tracer is not None:
            self._tracer.ended(
                topic,
                header.msg_id,
                props,
                store_host=addr,
                state=state.value,
                transaction_id=header.transaction_id or header.msg_id,
                from_check=header.from_transaction_check,
            )
        cmd = RemotingCommand(
            RequestCode.END_TRANSACTION, remark=remark, ext_fields=header.to_ext_fields()
        )
        instance = self.instance
        try:
            if header.commit_or_rollback == TransactionType.NOT_TYPE:
                # RocketMQ's EndTransactionProcessor answers nothing for "unknown".
                await instance.invoke_oneway(addr, cmd)
                return False
            # Java sends every END_TRANSACTION oneway; waiting for the answer to a
            # commit or rollback (which the broker does send) tells us it was applied.
            answer = await instance.invoke(addr, cmd)
        except TransportError as exc:
            # Not fatal: the half message stays, and the broker will check back.
            _log.warning("END_TRANSACTION not delivered", broker=addr, error=str(exc))
            return False
        if answer.code != ResponseCode.SUCCESS:
            _log.warning(
                "END_TRANSACTION refused; the broker will check back",
                broker=addr,
                code=answer.code,
                remark=answer.remark,
            )
            return False
        return True


async def _call(fn: Callable[..., _State], *args: Any) -> LocalTransactionState:
    if inspect.iscoroutinefunction(fn):
        state = await fn(*args)
    else:
        state = await asyncio.to_thread(fn, *args)
        if inspect.isawaitable(state):
            state = await state
    if not isinstance(state, LocalTransactionState):
        raise TypeError(f"a transaction callable returned {state!r}, not LocalTransactionState")
    return state
