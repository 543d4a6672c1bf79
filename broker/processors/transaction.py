"""Transaction processor: END_TRANSACTION (37).

Follows RocketMQ 4.9's ``EndTransactionProcessor`` (docs/protocol.md). The
half message is looked up by ``commitLogOffset`` and checked against the request
(producer group, queue offset, commit-log offset, as ``checkPrepareMessage`` does).

- COMMIT (8): the half is stored again on its REAL_TOPIC / REAL_QID with the transaction
  bits of its sysFlag set to COMMIT and ``preparedTransactionOffset`` set to its
  commit-log offset; body, flag, hosts, born time and every property (REAL_TOPIC,
  REAL_QID and TRAN_MSG included, as 4.9.4 stores them) are kept. Then an op record
  marks the half as resolved.
- ROLLBACK (12): only the op record.
- UNKNOWN (0): nothing; a later check-back asks again (:mod:`rocklet.broker.transaction_check`).

Under SYNC_FLUSH a COMMIT is answered once the committed copy is on disk, and only
then is the op record written: a sync that times out or fails is answered
FLUSH_DISK_TIMEOUT and leaves the half unresolved, so the check-back asks the producer
again (RocketMQ 4.9.4 answers SUCCESS and resolves the half anyway). Under SYNC_MASTER
the committed copy then waits for a slave (``slaveTimeout``); without one or on a
timeout the answer is SUCCESS and the half is resolved, as 4.9.4 answers
FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE.

Every request is answered SUCCESS unless it failed. The C++ client sends
END_TRANSACTION without the oneway bit (§1.4) and drops the answer; Java marks it
oneway, so the connection sends nothing. RocketMQ answers UNKNOWN with nothing at all.
"""

from __future__ import annotations

import logging
from typing import Final

import structlog

from rocklet.broker.config_writer import ConfigWriteError
from rocklet.broker.identity import BrokerIdentity
from rocklet.broker.processors.refusal import Refused
from rocklet.broker.put_wait import PutWait
from rocklet.broker.status_codes import PUT_STATUS_TO_RESPONSE
from rocklet.broker.topics import TopicConfigManager
from rocklet.broker.transaction_check import make_op_message, pack_peer_host
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.headers.transaction import EndTransactionRequestHeader, TransactionType
from rocklet.protocol.message import TRANSACTION_MASK, StoredMessage, SysFlag, decode_message
from rocklet.protocol.names import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rocklet.protocol.properties import Prop
from rocklet.store.message_store import MessageStore
from rocklet.store.results import MessageToStore, PutResult
from rocklet.transport import ProcessorRegistry, RequestContext
from rocklet.transport.clock import Clock

__all__ = ["EndTransactionProcessor", "register"]

log = structlog.get_logger(__name__)
#: The stdlib logger ``log`` writes through: asked first whether a debug line is wanted.
_std_log = logging.getLogger(__name__)

_NOT_FOUND: Final = "Find prepared transaction message failed"


class EndTransactionProcessor:
    """Serves END_TRANSACTION. Event loop only.

    Args:
        store: The message store (the half is read; the committed copy and the op
            record are stored).
        topics: Topic configs (the op topic is created).
        clock: Time source (the op record's born time).
        identity: Whether this broker is a master, and its record host field.
        put_wait: What the put waits for before the answer (SYNC_FLUSH, SYNC_MASTER).
    """

    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        clock: Clock,
        identity: BrokerIdentity,
        put_wait: PutWait,
    ) -> None:
        self._put_wait = put_wait
        self._store = store
        self._topics = topics
        self._clock = clock
        self._is_master = identity.is_master
        self._store_host = identity.store_host

    async def process(self, rctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """Commit, roll back or leave pending the half message the request names."""
        header = EndTransactionRequestHeader.from_ext_fields(cmd.ext_fields)
        if not self._is_master:
            return cmd.make_response(
                ResponseCode.SLAVE_NOT_AVAILABLE, remark="end transaction is forbidden on a slave"
            )
        kind = header.transaction_type
        # A producer's own commit is the everyday case (one per transactional message):
        # logged at debug, as RocketMQ logs only check-back answers, rollbacks and
        # "unknown" endings.
        routine = kind is TransactionType.COMMIT and not header.from_transaction_check
        if not routine or _std_log.isEnabledFor(logging.DEBUG):  # no event built when unseen
            (log.debug if routine else log.info)(
                "end transaction",
                peer=rctx.peer_address,
                kind=kind.name if kind is not None else header.commit_or_rollback,
                from_check=header.from_transaction_check,
                msg_id=header.msg_id,
                remark=_loggable(cmd.remark),
            )
        if kind is None:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"unknown commitOrRollback {header.commit_or_rollback}",
            )
        if kind is TransactionType.NOT_TYPE:
            return cmd.make_response(ResponseCode.SUCCESS)
        try:
            half = self._find_half(header)
            if kind is TransactionType.COMMIT:
                code, problem = await self._put_wait.settle(self._deliver(half, header))
                if code is ResponseCode.FLUSH_DISK_TIMEOUT:
                    # No op record: the half stays unresolved and is checked back, so
                    # the producer commits it again (a duplicate at worst, never a loss).
                    raise Refused(ResponseCode.FLUSH_DISK_TIMEOUT, problem or "")
                if code is not ResponseCode.SUCCESS:
                    # EndTransactionProcessor.sendFinalMessage: SUCCESS and resolved; the
                    # copy is on the master, and a check-back would only duplicate it.
                    log.warning("committed copy not acknowledged by a slave", status=code.name)
            self._resolve(half)
            if self._topics.unsaved:
                await self._topics.saved(TRANS_OP_HALF_TOPIC)
        except Refused as refused:
            return refused.answer(cmd)
        except ConfigWriteError as exc:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        return cmd.make_response(ResponseCode.SUCCESS)

    def _find_half(self, header: EndTransactionRequestHeader) -> StoredMessage:
        view = self._store.read_record(header.commit_log_offset)
        if view is None:
            raise Refused(ResponseCode.SYSTEM_ERROR, _NOT_FOUND)
        try:
            half = decode_message(view)
        except MessageFormatError:
            # The offset points inside a record, not at one.
            raise Refused(ResponseCode.SYSTEM_ERROR, _NOT_FOUND) from None
        finally:
            view.release()
        if half.topic != TRANS_HALF_TOPIC or Prop.REAL_TOPIC not in half.properties:
            raise Refused(ResponseCode.SYSTEM_ERROR, _NOT_FOUND)
        # checkPrepareMessage: the request must name this very half message.
        if half.properties.get(Prop.PGROUP) != header.producer_group:
            raise Refused(ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        if half.queue_offset != header.tran_state_table_offset:
            raise Refused(ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
        if half.physical_offset != header.commit_log_offset:
            raise Refused(ResponseCode.SYSTEM_ERROR, "The commit log offset wrong")
        return half

    def _deliver(self, half: StoredMessage, header: EndTransactionRequestHeader) -> PutResult:
        """Store the committed message on its real topic (``endMessageTransaction``)."""
        props = half.properties
        real_topic = props[Prop.REAL_TOPIC]
        try:
            real_qid = int(props[Prop.REAL_QID])
        except (KeyError, ValueError):
            raise Refused(ResponseCode.SYSTEM_ERROR, _NOT_FOUND) from None
        final = MessageToStore(
            topic=real_topic,
            queue_id=real_qid,
            body=half.body,
            properties=props,
            flag=half.flag,
            sys_flag=(half.sys_flag & ~TRANSACTION_MASK) | SysFlag.TRANSACTION_COMMIT,
            born_timestamp=half.born_timestamp,
            born_host=pack_peer_host(half.born_host),
            store_host=pack_peer_host(half.store_host),
            reconsume_times=half.reconsume_times,
            prepared_transaction_offset=header.commit_log_offset,
        )
        result = self._store.put_message(final)
        if not result.ok:
            raise Refused(
                PUT_STATUS_TO_RESPONSE[result.status],
                f"storing the committed message failed: {result.status.value}",
            )
        return result

    def _resolve(self, half: StoredMessage) -> None:
        """Write the op record that tells the check-back this half is done."""
        self._topics.create_system_topic(TRANS_OP_HALF_TOPIC, 1)
        op = make_op_message(
            half.queue_id, half.queue_offset, self._store_host, self._clock.now_ms()
        )
        result = self._store.put_message(op)
        if not result.ok:
            # The outcome stands (a committed message is already stored); without its op
            # record the half is only checked back once more.
            log.error("writing the transaction op record failed", status=result.status.value)


def _loggable(remark: str | None) -> str | None:
    """The request's remark as a log line can carry it.

    The remark is the one request text no typed header checks (free text, never
    interpreted); bytes that are not UTF-8 or lone surrogates in it are shown as
    escapes, so a strict log stream does not fail on them.
    """
    if remark is None or remark.isascii():
        return remark
    return remark.encode("utf-8", "backslashreplace").decode()


def register(registry: ProcessorRegistry, processor: EndTransactionProcessor) -> None:
    """Register END_TRANSACTION (eager: an ASYNC_FLUSH commit answers without a task)."""
    registry.register(RequestCode.END_TRANSACTION, processor.process, eager=True)
