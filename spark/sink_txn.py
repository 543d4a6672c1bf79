"""The exactly-once sink: a two-phase commit over RocketMQ's transactional messages.

With ``deliveryGuarantee=exactly-once`` the sink treats each micro-batch (or each batch
write job) as one distributed transaction, the way a two-phase commit uses a log:

1. *Prepare* (each task, :func:`send_halves`). The task sends every row as a half
   message (invisible to consumers) tagged ``rockletTxn=<batch key>:<partition>:<attempt>``
   (the batch key is ``<queryId>:<batchId>``; a batch write job uses a random job id),
   and returns the handles of its half messages to the driver. A task attempt that
   dies or is retried leaves its half messages behind, never ended.
2. *Decide* (the driver's commit, :func:`commit_batch`). The decision is one message:
   the *head*, sent to the journal topic ``ROCKLET_SINK_TXN`` with the batch key as
   its key, naming the winning attempt of each partition and where the handles are
   (chunks sent to the same topic first). Once the broker acknowledged the head, the
   batch is committed.
3. *End*. The commit ends every winning half message as COMMIT, once each, and returns
   only when the brokers applied them all; otherwise it fails, so Spark does not record
   the batch and replays it after a restart.

A replay of a decided batch (the query stopped during or after the commit) sends
nothing: each task finds the head and skips, and the commit reads the handles back from
the journal and ends those whose committed message is not in the topic yet (looked up
by UNIQ_KEY, which the committed copy keeps). Ending a half message twice would store
it twice in RocketMQ, so nothing else ever ends a winner.

Half messages that lost (a failed or duplicate attempt, or a batch replayed before it
was decided) are rolled back: the broker checks back with the producer group, and any
of the query's tasks or commits answers ROLLBACK from the journal (:class:`CheckAnswers`);
an undecided batch, or a winner, is answered UNKNOWN. If nobody answers, the broker
drops them after ``transactionCheckMax`` checks, which is a rollback too. Brokers ask
about a half message only once it is :data:`CHECK_IMMUNITY_S` old, so a batch being
committed draws no check-backs. Spark's ``abort`` rolls nothing back itself: Spark
also calls it when the commit fails after deciding, when the half messages it holds
may be winners.
"""

from __future__ import annotations

import asyncio
import secrets
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import msgpack
from pyspark.sql.datasource import WriterCommitMessage

from rocklet.client.admin import Admin
from rocklet.client.errors import BrokerError, NoRouteError
from rocklet.client.message import Message, MessageExt, SendStatus
from rocklet.client.producer import Producer
from rocklet.client.transaction import HalfMessage, LocalTransactionState, TransactionProducer
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.properties import Prop
from rocklet.spark.broker import Cluster
from rocklet.spark.in_flight import InFlight
from rocklet.spark.options import SinkOptions
from rocklet.transport.logs import get_logger

__all__ = [
    "JOURNAL_TOPIC",
    "TXN_PROPERTY",
    "CheckAnswers",
    "Decision",
    "Prepared",
    "SinkCommitError",
    "commit_batch",
    "connect",
    "find_decision",
    "new_attempt",
    "prepared_of",
    "send_halves",
]

_log = get_logger(__name__)

#: Topic of the decisions (heads) and the handle chunks they point to.
JOURNAL_TOPIC: Final = "ROCKLET_SINK_TXN"
#: Property on each half message: ``<batch key>:<partition>:<attempt>``.
TXN_PROPERTY: Final = "rockletTxn"
#: Half messages (and END_TRANSACTIONs) in flight per task or commit.
IN_FLIGHT: Final = 64
#: Seconds a half message is not checked back (``CHECK_IMMUNITY_TIME_IN_SECONDS``):
#: longer than a micro-batch takes from its first half message to the end of its
#: commit, so brokers do not ask about every row of a batch being committed (with
#: RocketMQ's default ``transactionTimeOut`` of 6 s they would, once a batch takes
#: longer). Losers are rolled back that much later; nobody sees them meanwhile.
CHECK_IMMUNITY_S: Final = 300
#: How long "not decided" is believed before asking the journal again.
_UNDECIDED_TTL_S: Final = 5.0
#: Handles per journal chunk (about 50 bytes each before compression).
_CHUNK_HANDLES: Final = 20_000
_VERSION: Final = 1


class SinkCommitError(RuntimeError):
    """The commit could not end every half message; a restart of the query finishes it."""


def new_attempt() -> str:
    """A fresh attempt id: 64 random bits, so attempts never collide across restarts."""
    return secrets.token_hex(8)


@dataclass(frozen=True)
class Decision:
    """A committed batch, as its head records it.

    Attributes:
        batch_key: ``<queryId>:<batchId>`` (or ``<jobId>:0``).
        winners: Partition -> the attempt whose half messages are committed (none
            for an aborted batch write).
        chunks: Offset msgIds of the journal messages holding the handles.
    """

    batch_key: str
    winners: dict[int, str]
    chunks: tuple[str, ...] = field(default=())


@asynccontextmanager
async def connect(opts: SinkOptions) -> AsyncIterator[tuple[Admin, TransactionProducer]]:
    """The clients of one task or commit: an admin client and a transaction producer.

    The producer joins the sink's producer group, so while it runs it answers the
    brokers' check-backs (:class:`CheckAnswers`) for the whole query.
    """
    cluster = Cluster(
        opts.name_server,
        timeout_s=opts.send_timeout_ms / 1000,
        consumer=False,
        tls=opts.tls.context(),
        credentials=opts.credentials,
    )
    async with cluster, cluster.admin() as admin:
        producer = TransactionProducer(
            opts.producer_group,
            opts.name_server,
            check_listener=CheckAnswers(admin).__call__,
            send_timeout_ms=opts.send_timeout_ms,
            instance_name=cluster.instance_name,
            tls=cluster.tls,
            credentials=opts.credentials,
        )
        async with producer:
            yield admin, producer


# -- prepare (tasks) ----------------------------------------------------------------


async def send_halves(
    producer: TransactionProducer, chunks: Iterable[Sequence[Message]], tag: str
) -> list[HalfMessage]:
    """Send every message as a half message, ``IN_FLIGHT`` at a time.

    Args:
        producer: A started transaction producer of the sink's group.
        chunks: The messages (their order within a queue is not kept).
        tag: The ``rockletTxn`` value of this task attempt.

    Returns:
        The handles, in no particular order.

    Raises:
        BrokerError, TransportError, NoRouteError: A half message was not stored
            durably; the task fails and Spark retries it (the attempt loses).
    """
    handles: list[HalfMessage] = []
    marks = {TXN_PROPERTY: tag, Prop.CHECK_IMMUNITY_TIME_IN_SECONDS: str(CHECK_IMMUNITY_S)}

    async def one(msg: Message) -> None:
        result = await producer.send_half(msg)
        if result.status is not SendStatus.SEND_OK:
            raise RuntimeError(
                f"half message stored but {result.status.value}: not durable as asked, so "
                "this attempt fails (Spark retries the task)"
            )
        handles.append(HalfMessage.of(msg.topic, result))

    async with InFlight(IN_FLIGHT) as flight:
        for chunk in chunks:
            for msg in chunk:
                msg.properties = {**(msg.properties or {}), **marks}
                await flight.submit(one(msg))
        await flight.drain()
    return handles


# -- the journal --------------------------------------------------------------------


async def find_decision(admin: Admin, batch_key: str) -> Decision | None:
    """The head of ``batch_key``, or None when that batch is not decided.

    When several heads exist (a head whose send failed but was stored, then a second
    commit), the oldest is the decision: every reader picks the same one.
    """
    try:
        found = await admin.query_by_key(JOURNAL_TOPIC, batch_key)
    except NoRouteError:
        return None  # no journal topic yet: nothing was ever decided
    for msg in found:
        head = _unpack(msg.body)
        if head.get("k") == batch_key and "w" in head:
            winners = {int(p): str(a) for p, a in head["w"].items()}
            return Decision(batch_key, winners, tuple(head.get("c", ())))
    return None


def _pack(doc: dict[str, Any]) -> bytes:
    return zlib.compress(msgpack.packb(doc), 1)


def _unpack(body: bytes) -> dict[str, Any]:
    doc = msgpack.unpackb(zlib.decompress(body), strict_map_key=False)
    if not isinstance(doc, dict) or doc.get("v") != _VERSION:
        raise SinkCommitError(f"journal message of an unknown format: {str(doc)[:80]}")
    return doc


async def _journal_send(producer: Producer, admin: Admin, msg: Message) -> str:
    """Send one journal message; create the journal topic on first use."""
    try:
        result = await producer.send(msg)
    except (NoRouteError, BrokerError) as exc:
        if isinstance(exc, BrokerError) and exc.response_code != ResponseCode.TOPIC_NOT_EXIST:
            raise
        for cluster in sorted((await admin.cluster_info()).cluster_addr_table):
            await admin.create_topic(JOURNAL_TOPIC, cluster=cluster, queue_nums=1)
        _log.info("journal topic created", topic=JOURNAL_TOPIC)
        result = await producer.send(msg)
    if result.status is not SendStatus.SEND_OK:
        raise SinkCommitError(f"journal message stored but {result.status.value}")
    return result.offset_msg_id


async def _write_decision(
    producer: Producer, admin: Admin, batch_key: str, winners: dict[int, str], handles: list[Any]
) -> None:
    chunks = []
    for at in range(0, len(handles), _CHUNK_HANDLES):
        body = _pack({"v": _VERSION, "k": batch_key, "h": handles[at : at + _CHUNK_HANDLES]})
        chunks.append(await _journal_send(producer, admin, Message(JOURNAL_TOPIC, body)))
    head = _pack({"v": _VERSION, "k": batch_key, "w": winners, "c": chunks})
    await _journal_send(producer, admin, Message(JOURNAL_TOPIC, head, keys=(batch_key,)))


async def _read_handles(admin: Admin, decision: Decision) -> list[HalfMessage]:
    handles: list[HalfMessage] = []
    for msg_id in decision.chunks:
        doc = _unpack((await admin.view_message(msg_id)).body)
        handles.extend(HalfMessage(*row) for row in doc["h"])
    return handles


def _rows(handles: Iterable[HalfMessage]) -> list[list[Any]]:
    return [
        [h.topic, h.broker_name, h.commit_log_offset, h.queue_offset, h.msg_id] for h in handles
    ]


# -- decide and end (driver) ----------------------------------------------------------


@dataclass(frozen=True)
class Prepared(WriterCommitMessage):
    """What one task attempt prepared: the message it returns to the driver's commit.

    Attributes:
        partition_id: Spark's partition id.
        batch_key: ``<queryId>:<batchId>`` (``<jobId>:0`` for a batch write).
        attempt: The attempt id in its half messages' ``rockletTxn``; None when the
            task sent nothing because the batch had been decided before (a replay).
        handles: Its half messages.
    """

    partition_id: int
    batch_key: str
    attempt: str | None
    handles: tuple[HalfMessage, ...] = ()


def prepared_of(messages: Iterable[object]) -> list[Prepared]:
    """The :class:`Prepared` reports among a commit's task messages."""
    return [m for m in messages if isinstance(m, Prepared)]


async def commit_batch(
    admin: Admin, producer: TransactionProducer, batch_key: str, prepared: Sequence[Prepared]
) -> int:
    """Decide the batch (unless a head exists), then end each winner not yet committed.

    Args:
        admin: For the journal and the UNIQ_KEY lookups.
        producer: A started transaction producer of the sink's group: it sends the
            journal messages and the END_TRANSACTIONs.
        batch_key: ``<queryId>:<batchId>``.
        prepared: The tasks' reports (on a replay whose tasks all skipped: none with
            handles).

    Returns:
        The number of half messages this call committed.

    Raises:
        SinkCommitError: Some could not be ended; the batch is decided, and a restart
            of the query ends them (the replayed commit recovers).
    """
    decision = await find_decision(admin, batch_key)
    handles: list[HalfMessage]
    if decision is None:
        handles = [h for p in prepared for h in p.handles]
        if not handles:
            return 0  # an empty batch: nothing to decide (a replay is empty as well)
        winners = {p.partition_id: p.attempt for p in prepared if p.attempt is not None}
        await _write_decision(producer, admin, batch_key, winners, _rows(handles))
    else:
        handles = await _not_committed(admin, await _read_handles(admin, decision))
        _log.info("recovering a decided batch", batch=batch_key, to_end=len(handles))
    applied = await _bounded(handles, lambda h: producer.end(h, LocalTransactionState.COMMIT))
    failed = [h for h, ok in zip(handles, applied, strict=True) if not ok]
    if failed:
        # An END whose answer was lost may have been applied: look before ending again,
        # since a second END would store the message twice.
        failed = await _not_committed(admin, failed)
        again = await _bounded(failed, lambda h: producer.end(h, LocalTransactionState.COMMIT))
        if not all(again):
            raise SinkCommitError(
                f"{again.count(False)} of {len(handles)} messages of batch {batch_key} were "
                "not committed (brokers unreachable or refusing); the batch is decided: "
                "restarting the query finishes it"
            )
    return len(handles)


async def _not_committed(admin: Admin, handles: Sequence[HalfMessage]) -> list[HalfMessage]:
    """The half messages whose committed copy is not in their topic (by UNIQ_KEY)."""
    found = await _bounded(handles, lambda h: admin.query_by_unique_key(h.topic, h.msg_id))
    return [h for h, msg in zip(handles, found, strict=True) if msg is None]


async def _bounded(
    items: Sequence[HalfMessage], fn: Callable[[HalfMessage], Awaitable[Any]]
) -> list[Any]:
    """``fn`` over ``items``, ``IN_FLIGHT`` at a time, results in order.

    A fixed set of workers takes the items in turn, so a batch of a million rows does
    not become a million waiting coroutines.
    """
    results: list[Any] = [None] * len(items)
    todo = iter(enumerate(items))

    async def worker() -> None:
        for i, item in todo:
            results[i] = await fn(item)

    await asyncio.gather(*(worker() for _ in range(min(IN_FLIGHT, len(items)))))
    return results


# -- check-back (any of the query's processes) -----------------------------------------


def parse_tag(value: str) -> tuple[str, int, str] | None:
    """``<batch key>:<partition>:<attempt>`` -> its parts, or None if malformed."""
    parts = value.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1]), parts[2]


class CheckAnswers:
    """Answers the brokers' check-backs for the exactly-once sink.

    A check-back names one half message, and a broker may ask about many of one batch
    at once: the decision of each batch is looked up once (decided is final; undecided
    is asked again after a few seconds), and concurrent questions share the lookup.

    Args:
        admin: For the journal lookups.
    """

    def __init__(self, admin: Admin) -> None:
        self._admin = admin
        self._decided: dict[str, Decision] = {}
        self._pending: dict[str, asyncio.Future[Decision | None]] = {}
        self._undecided_until: dict[str, float] = {}

    async def __call__(self, msg: MessageExt) -> LocalTransactionState:
        """ROLLBACK a loser, else UNKNOWN (winners are ended only by the commit)."""
        tag = msg.properties.get(TXN_PROPERTY)
        parsed = None if tag is None else parse_tag(tag)
        if parsed is None:
            return LocalTransactionState.UNKNOWN  # not the sink's: someone else's
        batch_key, partition, attempt = parsed
        decision = await self._decision(batch_key)
        if decision is None or decision.winners.get(partition) == attempt:
            return LocalTransactionState.UNKNOWN
        return LocalTransactionState.ROLLBACK

    async def _decision(self, batch_key: str) -> Decision | None:
        decided = self._decided.get(batch_key)
        if decided is not None:
            return decided
        loop = asyncio.get_running_loop()
        if loop.time() < self._undecided_until.get(batch_key, 0.0):
            return None
        pending = self._pending.get(batch_key)
        if pending is None:
            pending = self._pending[batch_key] = loop.create_future()
            try:
                found = await find_decision(self._admin, batch_key)
            except BaseException as exc:
                pending.set_exception(exc)
                pending.exception()  # retrieved: the waiters get it too
                raise
            finally:
                del self._pending[batch_key]
            if found is None:
                self._undecided_until[batch_key] = loop.time() + _UNDECIDED_TTL_S
            else:
                self._decided[batch_key] = found
            pending.set_result(found)
            return found
        return await asyncio.shield(pending)
