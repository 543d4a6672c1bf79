"""Transaction check-back: ask producers about half messages nobody resolved.

RocketMQ 4.9's ``TransactionalMessageServiceImpl.check`` (run by
``TransactionalMessageCheckService`` every ``transactionCheckInterval``), rebuilt on our
store:

- Half messages wait in ``RMQ_SYS_TRANS_HALF_TOPIC``; END_TRANSACTION resolves one by
  writing an *op* record to ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (same queue id) whose body is
  the half's queue offset as decimal text and whose tag is ``d``
  (``TransactionalMessageBridge.addRemoveTagInTransactionOp``).
- How far each queue has been examined is kept in the consumer offset table under the
  system group ``CID_RMQ_SYS_TRANS``, for the half queue and for the op queue alike, so
  it survives restarts exactly as RocketMQ's does.
- A round walks the half queue from its check offset. Halves with an op record are done.
  A half younger than ``transactionTimeOut`` (or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``)
  stops the walk: everything after it is younger still. An older one is put back at the
  end of the half queue with ``TRANSACTION_CHECK_TIMES`` + 1, and the copy is sent to one
  live channel of its producer group (``PGROUP``) as a oneway CHECK_TRANSACTION_STATE
  (docs/protocol.md); the producer answers with END_TRANSACTION naming the
  copy. A half checked ``transactionCheckMax`` times, or older than the store's file
  reservation time, is discarded: moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` (4.9.4's
  ``DefaultTransactionalMessageCheckListener.resolveDiscardMsg``), never delivered.
- The walk ends at the half queue's end as it was when the round began, so copies put
  back during the round wait for the next one (RocketMQ compares store times instead).
- The check offset of a queue moves past the halves a walk put back or discarded only
  once those copies are on disk (SYNC_FLUSH; RocketMQ's puts wait for the flush too) and
  the discard topic is saved; otherwise the next round walks them again.

Deviations: all op records from the op check offset on are read at once (RocketMQ reads
32 at a time and reads more on demand), and a half younger than a custom
``CHECK_IMMUNITY_TIME_IN_SECONDS`` stops the walk instead of being re-queued with
``TRAN_PREPARED_QUEUE_OFFSET``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import structlog

from rocklet.broker.clients import ClientManager
from rocklet.broker.config_writer import ConfigWriteError
from rocklet.broker.flush_wait import wait_flushed
from rocklet.broker.offsets import ConsumerOffsetManager
from rocklet.broker.topics import TopicConfigManager
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import MessageFormatError
from rocklet.protocol.headers.transaction import CheckTransactionStateRequestHeader
from rocklet.protocol.message import StoredMessage, decode_message, encode_message, pack_host
from rocklet.protocol.message_id import make_offset_msg_id
from rocklet.protocol.names import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rocklet.protocol.properties import Prop
from rocklet.store.message_store import MessageStore
from rocklet.store.results import ZERO_HOST, MessageToStore, PutResult
from rocklet.transport.clock import Clock
from rocklet.transport.errors import RemotingError

__all__ = [
    "CHECK_MAX_TIME_TOPIC",
    "REMOVE_TAG",
    "TRANS_SYS_GROUP",
    "TransactionCheckService",
    "make_op_message",
    "pack_peer_host",
    "read_queue",
]

log = structlog.get_logger(__name__)

#: ``MixAll.CID_SYS_RMQ_TRANS``: the group whose offsets track the check progress.
TRANS_SYS_GROUP: Final = "CID_RMQ_SYS_TRANS"
#: ``TransactionalMessageUtil.REMOVETAG``: the tag of an op record.
REMOVE_TAG: Final = "d"
#: ``TopicValidator.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC``: where discarded halves go.
CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
#: How long a oneway check may wait for a congested producer connection.
_SEND_TIMEOUT_S: Final = 3.0
_READ_BATCH: Final = 32


def pack_peer_host(host: tuple[str, int]) -> bytes:
    """Pack a decoded record's ``(ip, port)`` host back into its 8-byte field.

    Args:
        host: As :class:`~rocklet.protocol.message.StoredMessage` gives it.

    Returns:
        The field, or zeros when it is not IPv4 (our store never writes IPv6 hosts).
    """
    try:
        return pack_host(*host)
    except ValueError:
        return ZERO_HOST


def make_op_message(
    half_queue_id: int, half_queue_offset: int, store_host: bytes, now_ms: int
) -> MessageToStore:
    """The op record that marks a half message as resolved (committed or rolled back).

    Args:
        half_queue_id: The half's queue id (the op goes to the same queue id).
        half_queue_offset: The half's queue offset; the body is its decimal text.
        store_host: This broker's 8-byte host field (born and store host alike).
        now_ms: Born time.

    Returns:
        The message to store in ``RMQ_SYS_TRANS_OP_HALF_TOPIC``.
    """
    return MessageToStore(
        topic=TRANS_OP_HALF_TOPIC,
        queue_id=half_queue_id,
        body=str(half_queue_offset).encode(),
        properties={Prop.TAGS: REMOVE_TAG},
        born_timestamp=now_ms,
        born_host=store_host,
        store_host=store_host,
    )


def read_queue(
    store: MessageStore, topic: str, queue_id: int, start: int, end: int
) -> Iterator[tuple[int, StoredMessage]]:
    """Yield ``(queue offset, message)`` for queue offsets in ``[start, end)``.

    Records are decoded batch by batch and the store's views released at once, so a
    caller may put messages between items. Offsets no longer stored are skipped;
    records that do not decode are logged and skipped.
    """
    offset = start
    while offset < end:
        got = store.get_messages(topic, queue_id, offset, min(_READ_BATCH, end - offset))
        if not got.buffers:
            if got.next_begin_offset <= offset:
                return
            offset = got.next_begin_offset
            continue
        batch: list[tuple[int, StoredMessage]] = []
        for qoff, buf in zip(got.queue_offsets, got.buffers, strict=True):
            try:
                batch.append((qoff, decode_message(buf)))
            except MessageFormatError as exc:
                log.warning("skipping undecodable record", topic=topic, offset=qoff, error=str(exc))
        offset = got.queue_offsets[-1] + 1
        del got
        yield from batch


@dataclass(slots=True)
class _OpScan:
    """Op records read for one round: which halves are resolved."""

    #: Half queue offset -> op queue offset, for halves at or after the check offset.
    removed: dict[int, int]
    #: Op queue offsets whose half is behind the check offset (nothing left to do).
    done: list[int]


class TransactionCheckService:
    """Checks back unresolved half messages. Event loop only.

    Args:
        store: The message store.
        topics: Topic configs (the half topic's queues; the discard topic is created).
        offsets: Offset table holding the check progress.
        clients: Producer channels by group.
        clock: Time source for the loop.
        store_host: This broker's 8-byte host field.
        timeout_ms: ``transactionTimeOut``: a half younger than this is not checked.
        check_max: ``transactionCheckMax``: checks before a half is discarded.
        interval_ms: ``transactionCheckInterval``: time between rounds of :meth:`run`.
        reserved_ms: The store's file reservation time; older halves are discarded.
        sync_flush_timeout_ms: ``syncFlushTimeout``: under SYNC_FLUSH the longest wait
            for the copies a round stored before its progress is recorded.
    """

    def __init__(
        self,
        *,
        store: MessageStore,
        topics: TopicConfigManager,
        offsets: ConsumerOffsetManager,
        clients: ClientManager,
        clock: Clock,
        store_host: bytes,
        timeout_ms: int,
        check_max: int,
        interval_ms: int,
        reserved_ms: int,
        sync_flush_timeout_ms: int,
    ) -> None:
        self._sync_timeout_s = sync_flush_timeout_ms / 1000
        #: Puts of the queue being walked that must be durable before progress is kept.
        self._moved: list[PutResult] = []
        self._store = store
        self._topics = topics
        self._offsets = offsets
        self._clients = clients
        self._clock = clock
        self._store_host = store_host
        self._timeout_ms = timeout_ms
        self._check_max = check_max
        self._interval_s = interval_ms / 1000
        self._reserved_ms = reserved_ms
        self._round = asyncio.Lock()

    @property
    def interval_s(self) -> float:
        """Seconds between check rounds (``transactionCheckInterval``)."""
        return self._interval_s

    async def check_round(self) -> None:
        """Run one round now (the periodic step; a failing round is retried next tick)."""
        await self.check_once(self._clock.now_ms())

    async def check_once(self, now_ms: int) -> int:
        """Run one check round over every half queue.

        Args:
            now_ms: The time the ages of half messages are measured against.

        Returns:
            How many half messages were checked back (put back and asked about).
        """
        config = self._topics.find(TRANS_HALF_TOPIC)
        if config is None:
            # Half messages without the topic's config: a RocketMQ broker killed before
            # its first check round wrote it (that round creates it, with one queue).
            # (Queue 0 first: a broker without transactions pays a lookup, not a scan.)
            if (TRANS_HALF_TOPIC, 0) not in self._store.queues:
                return 0
            queues = [q for t, q in list(self._store.queues) if t == TRANS_HALF_TOPIC]
            config = self._topics.create_system_topic(TRANS_HALF_TOPIC, max(queues) + 1)
            log.info("transaction half topic config created for stored half messages")
        checked = 0
        async with self._round:
            for queue_id in range(config.read_queue_nums):
                checked += await self._check_queue(queue_id, now_ms)
        return checked

    # -- one queue -----------------------------------------------------------------
    def _progress(self, topic: str, queue_id: int) -> int:
        offset = self._offsets.query(TRANS_SYS_GROUP, topic, queue_id)
        return self._store.min_offset(topic, queue_id) if offset is None else offset

    def _scan_ops(self, queue_id: int, op_offset: int, half_offset: int) -> _OpScan:
        scan = _OpScan({}, [])
        end = self._store.max_offset(TRANS_OP_HALF_TOPIC, queue_id)
        for op_qoff, op in read_queue(self._store, TRANS_OP_HALF_TOPIC, queue_id, op_offset, end):
            try:
                half_qoff = int(op.body.decode())
            except ValueError:
                log.error("op record with a non-numeric body", offset=op_qoff, body=op.body[:40])
                scan.done.append(op_qoff)
                continue
            if op.tags != REMOVE_TAG:
                log.error("op record with an unknown tag", offset=op_qoff, tag=op.tags)
                scan.done.append(op_qoff)  # nothing to resolve; do not re-read it forever
            elif half_qoff < half_offset:
                scan.done.append(op_qoff)
            else:
                scan.removed[half_qoff] = op_qoff
        return scan

    async def _check_queue(self, queue_id: int, now_ms: int) -> int:
        self._moved = []
        half_offset = self._progress(TRANS_HALF_TOPIC, queue_id)
        op_offset = self._progress(TRANS_OP_HALF_TOPIC, queue_id)
        ops = self._scan_ops(queue_id, op_offset, half_offset)
        # Copies put back during this round land past ``end``: they wait for the next one.
        end = self._store.max_offset(TRANS_HALF_TOPIC, queue_id)
        new_offset, checked = half_offset, 0
        for qoff, half in read_queue(self._store, TRANS_HALF_TOPIC, queue_id, half_offset, end):
            if qoff in ops.removed:
                ops.done.append(ops.removed.pop(qoff))
            elif (why := self._discard_reason(half, now_ms)) is not None:
                if not self._discard(half, why):
                    break  # refused (a full disk): the half stays for the next round
            elif self._too_young(half, now_ms):
                break
            else:
                copy = self._put_back(half)
                if copy is None:
                    break
                await self._ask_producer(half, copy)
                checked += 1
            new_offset = qoff + 1
        if not await self._moved_durable():
            return checked  # the next round walks these halves again
        if new_offset != half_offset:
            self._offsets.commit(TRANS_SYS_GROUP, TRANS_HALF_TOPIC, queue_id, new_offset)
        new_op_offset = _advance(op_offset, ops.done)
        if new_op_offset != op_offset:
            self._offsets.commit(TRANS_SYS_GROUP, TRANS_OP_HALF_TOPIC, queue_id, new_op_offset)
        return checked

    async def _moved_durable(self) -> bool:
        """Whether the halves this walk put back or discarded are safely stored.

        The check offset moves past a half only once its copy is on disk (SYNC_FLUSH)
        and the discard topic is saved: otherwise a crash could lose a half whose
        progress was already recorded. Under ASYNC_FLUSH there is nothing to wait for.
        """
        moved, self._moved = self._moved, []
        try:
            await self._topics.saved(CHECK_MAX_TIME_TOPIC)
        except ConfigWriteError as exc:
            log.error("transaction check progress not kept", error=str(exc))
            return False
        for result in moved:
            problem = await wait_flushed(result, self._sync_timeout_s)
            if problem is not None:
                log.error("transaction check progress not kept", error=problem)
                return False
        return True

    # -- decisions -----------------------------------------------------------------
    def _discard_reason(self, half: StoredMessage, now_ms: int) -> str | None:
        times = _int_prop(half, Prop.TRANSACTION_CHECK_TIMES, 0)
        if times >= self._check_max:
            return "half message checked too many times"
        # ``isNeedSkip``: the half outlived the files that would hold it.
        if now_ms - half.born_timestamp > self._reserved_ms:
            return "half message older than fileReservedTime"
        return None

    def _too_young(self, half: StoredMessage, now_ms: int) -> bool:
        immunity = self._timeout_ms
        seconds = _int_prop(half, Prop.CHECK_IMMUNITY_TIME_IN_SECONDS, -1)
        if seconds != -1:
            immunity = seconds * 1000
        age = now_ms - half.born_timestamp
        # A negative age (producer clock ahead of ours) is checked, as RocketMQ does.
        return 0 <= age < immunity

    # -- actions -------------------------------------------------------------------
    def _discard(self, half: StoredMessage, why: str) -> bool:
        """Move a half message to the discard topic; False if the store refused it."""
        log.warning(
            f"{why}; moving it to the discard topic",
            topic=half.properties.get(Prop.REAL_TOPIC),
            uniq_key=half.uniq_key,
            check_times=half.properties.get(Prop.TRANSACTION_CHECK_TIMES),
        )
        self._topics.create_system_topic(CHECK_MAX_TIME_TOPIC, 1)
        result = self._store.put_message(
            _renewed(half, CHECK_MAX_TIME_TOPIC, 0, dict(half.properties))
        )
        if not result.ok:
            log.error("discarding a half message failed", status=result.status.value)
        elif result.durable is not None:
            self._moved.append(result)
        return result.ok

    def _put_back(self, half: StoredMessage) -> tuple[MessageToStore, PutResult] | None:
        props = dict(half.properties)
        times = _int_prop(half, Prop.TRANSACTION_CHECK_TIMES, 0)
        props[Prop.TRANSACTION_CHECK_TIMES] = str(times + 1)
        copy = _renewed(half, TRANS_HALF_TOPIC, half.queue_id, props)
        result = self._store.put_message(copy)
        if not result.ok:
            log.error("putting a half message back failed", status=result.status.value)
            return None
        if result.durable is not None:
            self._moved.append(result)
        return copy, result

    async def _ask_producer(
        self, half: StoredMessage, put: tuple[MessageToStore, PutResult]
    ) -> None:
        copy, result = put
        group = copy.properties.get(Prop.PGROUP, "")
        channels = [c for c in self._clients.producer_channels(group) if c.connection.is_open]
        if not channels:
            log.warning("no live producer to check a transaction with", group=group)
            return
        command = _check_command(copy, result)
        if command is None:
            log.error("half message without a usable REAL_TOPIC/REAL_QID", offset=half.queue_offset)
            return
        channel = random.choice(channels)
        try:
            await channel.connection.send_oneway(command, _SEND_TIMEOUT_S)
        except RemotingError as exc:
            log.info("transaction check not sent", client=channel.client_id, error=str(exc))


def _advance(offset: int, done: list[int]) -> int:
    """``calculateOpOffset``: move past the op records handled without a gap."""
    for op in sorted(done):
        if op == offset:
            offset += 1
        elif op > offset:
            break
    return offset


def _int_prop(msg: StoredMessage, name: str, default: int) -> int:
    try:
        return int(msg.properties.get(name, default))
    except ValueError:
        return default


def _renewed(
    half: StoredMessage, topic: str, queue_id: int, props: dict[str, str]
) -> MessageToStore:
    """A copy of a half message for another put (``renewHalfMessageInner``)."""
    return MessageToStore(
        topic=topic,
        queue_id=queue_id,
        body=half.body,
        properties=props,
        flag=half.flag,
        sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp,
        born_host=pack_peer_host(half.born_host),
        store_host=pack_peer_host(half.store_host),
        reconsume_times=half.reconsume_times,
        prepared_transaction_offset=half.prepared_transaction_offset,
    )


def _check_command(copy: MessageToStore, result: PutResult) -> RemotingCommand | None:
    """CHECK_TRANSACTION_STATE for a put-back copy (``sendCheckMessage``).

    The body is the copy in stored-record form with its topic and queue restored to
    REAL_TOPIC / REAL_QID, as ``Broker2Client.checkProducerTransactionState`` sends it.
    """
    # The put-back copy's setWaitStoreMsgOK(false) lands in the map the check sends.
    props = {**copy.properties, Prop.WAIT: "false"}
    try:
        real_topic, real_qid = props[Prop.REAL_TOPIC], int(props[Prop.REAL_QID])
        body = encode_message(
            topic=real_topic,
            body=copy.body,
            queue_id=real_qid,
            flag=copy.flag,
            properties=props,
            sys_flag=copy.sys_flag,
            born_timestamp=copy.born_timestamp,
            born_host=copy.born_host,
            store_timestamp=result.store_timestamp,
            store_host=copy.store_host,
            reconsume_times=copy.reconsume_times,
            prepared_transaction_offset=copy.prepared_transaction_offset,
            queue_offset=result.queue_offset,
            physical_offset=result.wrote_offset,
        )
    except (KeyError, ValueError, MessageFormatError):
        return None
    uniq = props.get(Prop.UNIQ_KEY)
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=result.queue_offset,
        commit_log_offset=result.wrote_offset,
        msg_id=uniq,
        transaction_id=uniq,
        offset_msg_id=make_offset_msg_id(copy.store_host, result.wrote_offset),
    )
    return RemotingCommand(
        RequestCode.CHECK_TRANSACTION_STATE, ext_fields=header.to_ext_fields(), body=bytes(body)
    )
