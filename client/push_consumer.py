"""PushConsumer: subscribe a listener, and Rocklet delivers the messages.

Under the name is a pull consumer that pulls for you (RocketMQ's
``DefaultMQPushConsumer``): a :class:`~rocklet.client.rebalance.Rebalancer` decides which
queues this member of the group owns, one :class:`~rocklet.client.pull_loop.PullLoop` per
owned queue long-polls the broker into the queue's
:class:`~rocklet.client.process_queue.ProcessQueue`, and a consume service
(:mod:`rocklet.client.consume_service`) calls your listener, concurrently or in per-queue
order. Offsets are committed every 5 s, when a queue moves to another member, and at
shutdown (clustering: on the broker; broadcasting: in a local file).

Background failures never vanish: expected, transient ones (a broker restarting) are
logged and retried; anything unexpected is logged and passed to ``on_error`` or, when
there is none, raised by the next :meth:`PushConsumer.check_errors`,
:meth:`PushConsumer.subscribe` or :meth:`PushConsumer.shutdown`.

Example::

    async def handle(msgs: list[MessageExt]) -> ConsumeResult:
        for msg in msgs:
            print(msg.topic, msg.body)
        return ConsumeResult.SUCCESS

    async with PushConsumer("my-group", "127.0.0.1:9876") as consumer:
        consumer.subscribe("orders", "TagA || TagB", handle)
        await consumer.start()
        ...
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Final

from rocklet.client.allocate import STRATEGIES, AllocateStrategy
from rocklet.client.consume_result import ConsumeResult
from rocklet.client.consume_service import (
    ConcurrentConsumeService,
    OrderlyConsumeService,
    make_send_back,
)
from rocklet.client.errors import TRANSIENT_ERRORS, BrokerError, ClientStateError, TransportError
from rocklet.client.instance import ClientInstance, get_instance
from rocklet.client.listeners import Listener, ListenerTable
from rocklet.client.message import MessageExt
from rocklet.client.offset_store import (
    DEFAULT_OFFSETS_DIR,
    LocalFileOffsetStore,
    OffsetStore,
    RemoteOffsetStore,
)
from rocklet.client.process_queue import ProcessQueue
from rocklet.client.pull_loop import FlowLimits, PullLoop, PullLoopDeps
from rocklet.client.rebalance import ConsumeFrom, Rebalancer, subscription
from rocklet.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.running import ConsumerRunningInfo, ConsumeStatus
from rocklet.protocol.names import retry_topic
from rocklet.transport.logs import get_logger
from rocklet.transport.tasks import BackgroundTasks

__all__ = ["ConsumerStatus", "PushConsumer"]

_log = get_logger(__name__)

#: Java's consumeMessageBatchMaxSize / pullBatchSize upper bound.
_MAX_BATCH: Final = 1024


class ConsumerStatus(enum.Enum):
    """Lifecycle of a consumer."""

    CREATED = "created"
    RUNNING = "running"
    CLOSING = "closing"
    CLOSED = "closed"


def _consume_from_where(value: ConsumeFrom) -> ConsumeFromWhere:
    if value == "last":
        return ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    if value == "first":
        return ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    return ConsumeFromWhere.CONSUME_FROM_TIMESTAMP


class PushConsumer:
    """A consumer group member that delivers messages to listeners.

    Args:
        group: The consumer group.
        namesrv: Name server address(es), ``"host:port"`` (several joined by ``;``).
        orderly: Deliver each queue's messages strictly in order (listeners answer
            SUCCESS or SUSPEND); queues are locked on their broker. Default: False.
        broadcasting: Every member gets every message, offsets kept in a local file;
            failed messages are dropped, not retried (as RocketMQ). Default: False.
        consume_from: Where a group with no committed offset starts: ``"last"``,
            ``"first"`` or a store timestamp in epoch ms. Default: ``"last"``.
        consume_batch_size: Most messages per listener call (1..1024). Default: 1.
        pull_batch_size: Most messages per pull (1..1024; the broker also caps it).
            Default: 32.
        allocate: ``"averagely"``, ``"round_robin"``, ``"consistent_hash"`` or a
            strategy function. Default: ``"averagely"``.
        max_reconsume_times: Deliveries of a failing message before the dead-letter
            queue. Default: 16.
        consume_concurrency: Batches in listeners at once (and threads for plain
            listeners). Default: 20.
        flow_limits: Per-queue cache limits that pause pulling. Default: 1000
            messages, 100 MiB, span 2000.
        pull_suspend_ms: Long-poll hold asked of the broker. Default: 15000.
        suspend_ms: Orderly: pause after SUSPEND before retrying. Default: 1000.
        consume_timeout_min: Concurrent: a batch in the listener longer than this is
            sent back for another delivery. Default: 15.
        persist_interval_s: Offset commit period. Default: 5.0.
        rebalance_interval_s: Rebalance period (besides broker notifications).
            Default: 20.0.
        lock_interval_s: Orderly: broker lock renewal period. Default: 20.0.
        offsets_dir: Broadcasting: where the offset file lives. Default:
            ``~/.rocklet/offsets/<instance_name>``.
        instance_name: Client instance name; consumers of the same group in one
            process need different names. Default: ``"DEFAULT"``.
        on_error: Called with unexpected background failures; without it they are
            raised by the next call. Default: None.
        executor: Runs plain-function listeners. Default: a thread pool of
            ``consume_concurrency`` threads, created on first need.
        instance: Use this client instance instead of the shared one.

    Raises:
        ValueError: An option is out of range.
    """

    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        orderly: bool = False,
        broadcasting: bool = False,
        consume_from: ConsumeFrom = "last",
        consume_batch_size: int = 1,
        pull_batch_size: int = 32,
        allocate: str | AllocateStrategy = "averagely",
        max_reconsume_times: int = 16,
        consume_concurrency: int = 20,
        flow_limits: FlowLimits | None = None,
        pull_suspend_ms: int = 15000,
        suspend_ms: int = 1000,
        consume_timeout_min: float = 15,
        persist_interval_s: float = 5.0,
        rebalance_interval_s: float = 20.0,
        lock_interval_s: float = 20.0,
        offsets_dir: Path | None = None,
        instance_name: str = "DEFAULT",
        on_error: Callable[[BaseException], object] | None = None,
        executor: Executor | None = None,
        instance: ClientInstance | None = None,
    ) -> None:
        if not group:
            raise ValueError("consumer group must not be empty")
        if not 1 <= consume_batch_size <= _MAX_BATCH or not 1 <= pull_batch_size <= _MAX_BATCH:
            raise ValueError(f"batch sizes must be within 1..{_MAX_BATCH}")
        if consume_from not in ("last", "first") and not isinstance(consume_from, int):
            raise ValueError(f"consume_from must be 'last', 'first' or ms, not {consume_from!r}")
        if isinstance(allocate, str) and allocate not in STRATEGIES:
            raise ValueError(
                f"unknown allocation strategy {allocate!r}; one of {sorted(STRATEGIES)}"
            )
        if consume_concurrency < 1:
            raise ValueError("consume_concurrency must be at least 1")
        self.group = group
        self.namesrv = namesrv
        self.orderly = orderly
        self.broadcasting = broadcasting
        self._consume_from: ConsumeFrom = consume_from
        self._batch_size = consume_batch_size
        self._pull_batch_size = pull_batch_size
        self._strategy = STRATEGIES[allocate] if isinstance(allocate, str) else allocate
        self._max_reconsume = max_reconsume_times
        self._concurrency = consume_concurrency
        self._limits = flow_limits or FlowLimits()
        self._pull_suspend_ms = pull_suspend_ms
        self._suspend_ms = suspend_ms
        self._consume_timeout_ms = int(consume_timeout_min * 60_000)
        self._persist_s = persist_interval_s
        self._rebalance_s = rebalance_interval_s
        self._lock_s = lock_interval_s
        self._offsets_dir = offsets_dir or DEFAULT_OFFSETS_DIR / instance_name
        self._instance_name = instance_name
        self._on_error = on_error
        self._executor = executor
        self._own_executor: ThreadPoolExecutor | None = None
        self._given_instance = instance
        self._status = ConsumerStatus.CREATED
        self._subscriptions: dict[str, SubscriptionData] = {}
        # Clustering members also consume the group's retry topic (copySubscription);
        # made once so its version stays the same in every heartbeat.
        self._retry_subscription = None if broadcasting else subscription(retry_topic(group), "*")
        failure = ConsumeResult.SUSPEND if orderly else ConsumeResult.RECONSUME_LATER
        self._listeners = ListenerTable(self._get_executor, failure)
        self._background = BackgroundTasks(f"rocklet-{group}", on_error, transient=TRANSIENT_ERRORS)
        self._pull_loops: dict[MessageQueue, PullLoop] = {}
        self._rebalance_wanted = asyncio.Event()
        self._start_ms = 0
        self._instance: ClientInstance | None = None
        self._offsets: OffsetStore | None = None
        self._rebalancer: Rebalancer | None = None
        self._service: ConcurrentConsumeService | OrderlyConsumeService | None = None
        self._remove_error_cb: Callable[[], None] | None = None

    # -- public API -------------------------------------------------------------------

    @property
    def status(self) -> ConsumerStatus:
        """Where the consumer is in its lifecycle."""
        return self._status

    @property
    def client_id(self) -> str | None:
        """This member's id in the group (its client instance's), once started."""
        return None if self._instance is None else self._instance.client_id

    def subscribe(
        self, topic: str, expression: str = "*", listener: Listener | None = None
    ) -> None:
        """Subscribe ``listener`` to the messages of ``topic`` matching ``expression``.

        Args:
            topic: The topic.
            expression: ``"*"`` or tags joined by ``||`` (``"TagA || TagB"``).
            listener: ``async def`` or plain function taking ``list[MessageExt]`` and
                returning a :class:`ConsumeResult`.

        Raises:
            ValueError: No listener.
            ClientStateError: The consumer is closed.
            BaseException: An unreported background failure.
        """
        if listener is None:
            raise ValueError("subscribe needs a listener")
        if self._status in (ConsumerStatus.CLOSING, ConsumerStatus.CLOSED):
            raise ClientStateError("consumer is closed")
        self.check_errors()
        self._subscriptions[topic] = subscription(topic, expression)
        self._listeners.add(topic, listener)
        if self._status is ConsumerStatus.RUNNING:
            self._background.spawn(self._after_subscribe(), "subscribe")

    def check_errors(self) -> None:
        """Raise, once, the first background failure not handed to ``on_error``.

        Raises:
            BaseException: That failure.
        """
        self._background.check_errors()
        if self._instance is not None and self._on_error is None:
            self._instance.check_errors()

    def assignment(self) -> list[MessageQueue]:
        """The queues this consumer owns right now (retry queues included), sorted."""
        return [] if self._rebalancer is None else sorted(self._rebalancer.process_queues)

    async def start(self) -> None:
        """Join the group and start consuming; idempotent.

        Routes are fetched, a heartbeat tells the brokers about the group, and a first
        rebalance assigns queues before this returns.

        Raises:
            ClientStateError: The consumer was shut down, or nothing is subscribed.
        """
        if self._status is ConsumerStatus.RUNNING:
            return
        if self._status is not ConsumerStatus.CREATED:
            raise ClientStateError("a shut down consumer cannot be started again")
        if not self._subscriptions:
            raise ClientStateError("subscribe to a topic before start()")
        instance = self._given_instance or get_instance(self.namesrv, self._instance_name)
        try:
            await instance.start()
            instance.groups.register_consumer(self.group, self)
        except BaseException:
            if self._given_instance is None:
                await instance.release()
            raise
        self._instance = instance
        if self._on_error is not None:
            self._remove_error_cb = instance.on_error(self._on_error)
        self._build(instance)
        assert self._offsets is not None and self._service is not None
        self._status = ConsumerStatus.RUNNING  # from here on, shutdown() undoes it all
        await self._offsets.load()
        self._start_ms = time.time_ns() // 1_000_000
        self._service.start()
        await self._fetch_routes()
        await instance.groups.send_heartbeat()
        await self._background.run_step(self._rebalance)
        bg = self._background
        bg.when_asked(self._rebalance_wanted, self._rebalance_s, self._rebalance, "rebalance")
        bg.every(self._persist_s, self._persist, "persist-offsets")
        if self.orderly and not self.broadcasting:
            bg.every(self._lock_s, self._lock_all, "relock")
        if not self.orderly:
            clean_s = self._consume_timeout_ms / 1000
            bg.every(clean_s, self._clean_expired, "clean-expired")

    async def shutdown(self) -> None:
        """Leave the group: stop pulling and consuming, commit offsets, unregister.

        Idempotent. Raises, after shutting down, a background failure that was never
        reported (as :meth:`check_errors`).
        """
        if self._status is ConsumerStatus.CREATED:
            self._status = ConsumerStatus.CLOSED
            return
        if self._status is not ConsumerStatus.RUNNING:
            return
        self._status = ConsumerStatus.CLOSING
        await self._background.cancel_all()
        service, rebalancer, instance = self._service, self._rebalancer, self._instance
        assert service is not None and rebalancer is not None and instance is not None
        # Every step runs even if an earlier one failed (a commit that cannot be
        # written must not leave the consumer registered); the failure is raised last.
        await self._cleanup(service.close(), "closing the consume service")
        await self._cleanup(rebalancer.release_all(), "releasing queues")
        instance.groups.unregister_consumer(self.group)
        await self._cleanup(instance.groups.unregister_client(None, self.group), "unregistering")
        if self._remove_error_cb is not None:
            self._remove_error_cb()
        if self._given_instance is None:
            await self._cleanup(instance.release(), "releasing the client instance")
        if self._own_executor is not None:
            self._own_executor.shutdown(wait=False, cancel_futures=True)
        self._status = ConsumerStatus.CLOSED
        self._background.check_errors()

    async def _cleanup(self, step: Awaitable[None], what: str) -> None:
        try:
            await step
        except Exception as exc:
            self._background.report(exc, what)

    async def __aenter__(self) -> PushConsumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    # -- ConsumerHandle (called by the client instance) --------------------------------

    def consumer_data(self) -> ConsumerData:
        """The group's registration for heartbeats."""
        return ConsumerData(
            group_name=self.group,
            consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=MessageModel.BROADCASTING
            if self.broadcasting
            else MessageModel.CLUSTERING,
            consume_from_where=_consume_from_where(self._consume_from),
            subscription_data_set=tuple(self._all_subscriptions().values()),
        )

    def rebalance_soon(self) -> None:
        """Rebalance now (the broker saw the group's members change)."""
        self._rebalance_wanted.set()

    async def running_info(self) -> ConsumerRunningInfo:
        """Describe this consumer for GET_CONSUMER_RUNNING_INFO."""
        offsets, rebalancer = self._offsets, self._rebalancer
        table = {} if rebalancer is None else dict(rebalancer.process_queues)
        mq_table = {
            mq: pq.snapshot((offsets.read_memory(mq) if offsets is not None else None) or 0)
            for mq, pq in table.items()
        }
        return ConsumerRunningInfo(
            properties=self._running_properties(),
            subscription_set=tuple(self._all_subscriptions().values()),
            mq_table=mq_table,
            status_table=self._status_table(),
        )

    async def reset_offset(self, offsets: dict[MessageQueue, int]) -> None:
        """Jump to the given offsets (RESET_CONSUMER_CLIENT_OFFSET from the broker)."""
        if self._rebalancer is not None and self._status is ConsumerStatus.RUNNING:
            await self._rebalancer.reset(offsets)

    # -- wiring -----------------------------------------------------------------------

    def _all_subscriptions(self) -> dict[str, SubscriptionData]:
        subs = dict(self._subscriptions)
        if self._retry_subscription is not None:
            subs.setdefault(self._retry_subscription.topic, self._retry_subscription)
        return subs

    def _build(self, instance: ClientInstance) -> None:
        if self.broadcasting:
            self._offsets = LocalFileOffsetStore(self.group, self._offsets_dir)
        else:
            self._offsets = RemoteOffsetStore(self.group, instance)
        send_back = make_send_back(instance, self.group, self._max_reconsume)
        self._rebalancer = Rebalancer(
            self.group,
            instance,
            self._offsets,
            on_added=self._queue_added,
            on_removed=self._queue_removed,
            strategy=self._strategy,
            broadcasting=self.broadcasting,
            orderly=self.orderly,
            consume_from=self._consume_from,
        )
        self._rebalancer.subscriptions = self._all_subscriptions()
        if self.orderly:
            self._service = OrderlyConsumeService(
                self._listeners,
                self._offsets,
                send_back,
                locks=None if self.broadcasting else self._rebalancer,
                on_consumed=self._consumed,
                report_error=self._background.report,
                batch_size=self._batch_size,
                max_reconsume_times=self._max_reconsume,
                suspend_ms=self._suspend_ms,
            )
        else:
            self._service = ConcurrentConsumeService(
                self._listeners,
                self._offsets,
                send_back,
                on_consumed=self._consumed,
                report_error=self._background.report,
                batch_size=self._batch_size,
                concurrency=self._concurrency,
                broadcasting=self.broadcasting,
            )

    def _pull_deps(self) -> PullLoopDeps:
        assert self._instance is not None and self._offsets is not None
        assert self._rebalancer is not None
        return PullLoopDeps(
            group=self.group,
            instance=self._instance,
            offset_store=self._offsets,
            subscriptions=self._rebalancer.subscriptions,
            retry_topic=None if self.broadcasting else retry_topic(self.group),
            submit=self._submit,
            report_error=self._background.report,
            limits=self._limits,
            orderly=self.orderly,
            commit_with_pull=not self.broadcasting,
            batch_size=self._pull_batch_size,
            suspend_ms=self._pull_suspend_ms,
        )

    def _queue_added(self, mq: MessageQueue, pq: ProcessQueue[MessageExt], offset: int) -> None:
        loop = PullLoop(self._pull_deps(), mq, pq, offset)
        self._pull_loops[mq] = loop
        name = f"pull-{mq.topic}-{mq.broker_name}-{mq.queue_id}"
        loop.task = self._background.spawn(loop.run(), name)
        loop.task.add_done_callback(lambda _t: self._forget_loop(loop))

    def _queue_removed(self, mq: MessageQueue, pq: ProcessQueue[MessageExt]) -> None:
        loop = self._pull_loops.pop(mq, None)
        if loop is not None and loop.task is not None and loop.pq is pq:
            loop.task.cancel()  # do not sit out a long poll for a queue we lost

    def _forget_loop(self, loop: PullLoop) -> None:
        if self._pull_loops.get(loop.mq) is loop:
            del self._pull_loops[loop.mq]

    def _submit(
        self, mq: MessageQueue, pq: ProcessQueue[MessageExt], msgs: list[MessageExt], dispatch: bool
    ) -> None:
        service = self._service
        if isinstance(service, OrderlyConsumeService):
            service.submit(mq, pq, dispatch)
        elif service is not None:
            service.submit(mq, pq, msgs)

    def _consumed(self, mq: MessageQueue) -> None:
        loop = self._pull_loops.get(mq)
        if loop is not None:
            loop.wake()

    def _get_executor(self) -> Executor:
        if self._executor is None:
            self._own_executor = ThreadPoolExecutor(
                self._concurrency, thread_name_prefix=f"rocklet-{self.group}"
            )
            self._executor = self._own_executor
        return self._executor

    # -- background work --------------------------------------------------------------

    async def _rebalance(self) -> None:
        assert self._rebalancer is not None
        await self._rebalancer.rebalance()

    async def _fetch_routes(self) -> None:
        assert self._instance is not None
        for topic in self._all_subscriptions():
            try:
                await self._instance.topic_route(topic)
            except (TransportError, BrokerError) as exc:
                _log.warning("no route yet", group=self.group, topic=topic, error=str(exc))

    async def _after_subscribe(self) -> None:
        assert self._instance is not None and self._rebalancer is not None
        self._rebalancer.subscriptions.update(self._all_subscriptions())
        await self._fetch_routes()
        await self._instance.groups.send_heartbeat()
        self.rebalance_soon()

    async def _persist(self) -> None:
        assert self._offsets is not None and self._rebalancer is not None
        await self._offsets.persist(list(self._rebalancer.process_queues))

    async def _lock_all(self) -> None:
        assert self._rebalancer is not None
        await self._rebalancer.lock_all()

    async def _clean_expired(self) -> None:
        if isinstance(self._service, ConcurrentConsumeService) and self._rebalancer is not None:
            await self._service.clean_expired(
                self._rebalancer.process_queues, self._consume_timeout_ms
            )

    # -- running info -----------------------------------------------------------------

    def _running_properties(self) -> dict[str, str]:
        return {
            "PROP_NAMESERVER_ADDR": self.namesrv,
            "PROP_CONSUME_TYPE": ConsumeType.CONSUME_PASSIVELY.name,
            "PROP_CONSUME_ORDERLY": "true" if self.orderly else "false",
            "PROP_THREADPOOL_CORE_SIZE": str(self._concurrency),
            "PROP_CONSUMER_START_TIMESTAMP": str(self._start_ms),
            "messageModel": "BROADCASTING" if self.broadcasting else "CLUSTERING",
            "consumeFromWhere": _consume_from_where(self._consume_from).name,
            "consumeMessageBatchMaxSize": str(self._batch_size),
            "pullBatchSize": str(self._pull_batch_size),
            "maxReconsumeTimes": str(self._max_reconsume),
        }

    def _status_table(self) -> dict[str, ConsumeStatus]:
        elapsed_s = max(1e-3, (time.time_ns() // 1_000_000 - self._start_ms) / 1000)
        out: dict[str, ConsumeStatus] = {}
        for topic, stats in self._listeners.stats.items():
            out[topic] = ConsumeStatus(
                consume_rt=stats.consume_ns / max(1, stats.batches) / 1e6,
                consume_ok_tps=stats.ok / elapsed_s,
                consume_failed_tps=stats.failed / elapsed_s,
                consume_failed_msgs=stats.failed,
            )
        return out
