"""What a running push consumer is made of, wired together when it starts.

A :class:`PushRuntime` exists from :meth:`PushConsumer.start
<rocklet.client.push_consumer.PushConsumer.start>` to its shutdown, so none of its parts
is ever missing: the offset store (on the broker, or a local file for broadcasting),
the :class:`~rocklet.client.rebalance.Rebalancer`, one
:class:`~rocklet.client.pull_loop.PullLoop` task per owned queue, the consume service
(concurrent or orderly) and the periodic jobs (rebalance, offset commits, lock renewal,
expired-message clean-up). It is also what the client instance knows the group by
(:class:`~rocklet.client.handles.ConsumerHandle`): heartbeats describe its
subscriptions, and the broker's requests (rebalance now, running info, reset offsets)
are answered here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping

from rocklet.client.consume_concurrently import ConcurrentConsumeService
from rocklet.client.consume_directly import consume_directly
from rocklet.client.consume_orderly import OrderlyConsumeService
from rocklet.client.consume_service import make_send_back
from rocklet.client.errors import BrokerError, TransportError
from rocklet.client.instance import ClientInstance
from rocklet.client.listeners import ListenerTable
from rocklet.client.message import MessageExt
from rocklet.client.offset_store import LocalFileOffsetStore, OffsetStore, RemoteOffsetStore
from rocklet.client.process_queue import ProcessQueue
from rocklet.client.pull_loop import PullLoop, PullLoopDeps
from rocklet.client.push_config import PushConsumerConfig
from rocklet.client.rebalance import Rebalancer, subscription
from rocklet.client.selector import MessageSelector
from rocklet.client.selector_check import check_selectors
from rocklet.protocol.bodies.heartbeat import ConsumerData, ConsumeType, MessageModel
from rocklet.protocol.bodies.maintenance import ConsumeMessageDirectlyResult
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.running import ConsumerRunningInfo, ConsumeStatus
from rocklet.protocol.names import retry_topic
from rocklet.transport.logs import get_logger
from rocklet.transport.tasks import BackgroundTasks

__all__ = ["PushRuntime"]

_log = get_logger(__name__)


class PushRuntime:
    """The parts of one running push consumer.

    Args:
        config: The consumer's settings.
        instance: The started client instance.
        listeners: The listeners, by topic.
        expressions: Topic -> tag expression or selector as subscribed so far.
        background: Owns the consumer's tasks and receives their failures.
    """

    def __init__(
        self,
        config: PushConsumerConfig,
        instance: ClientInstance,
        listeners: ListenerTable,
        expressions: Mapping[str, str | MessageSelector],
        background: BackgroundTasks,
    ) -> None:
        self.config = config
        self.instance = instance
        self._listeners = listeners
        self._background = background
        self._start_ms = instance.clock.now_ms()
        group = config.group
        # Clustering members also consume the group's retry topic (copySubscription).
        self._retry_topic = None if config.broadcasting else retry_topic(group)
        self.offsets: OffsetStore = (
            LocalFileOffsetStore(group, config.offsets_path)
            if config.broadcasting
            else RemoteOffsetStore(group, instance)
        )
        self.rebalancer = Rebalancer(
            group,
            instance,
            self.offsets,
            on_added=self._queue_added,
            on_removed=self._queue_removed,
            strategy=config.strategy,
            broadcasting=config.broadcasting,
            orderly=config.orderly,
            consume_from=config.consume_from,
        )
        self.subscribe(expressions)
        self._service = self._make_service()
        self._pull_loops: dict[MessageQueue, PullLoop] = {}
        self._pull_deps = PullLoopDeps(
            group=group,
            instance=instance,
            offset_store=self.offsets,
            subscriptions=self.rebalancer.subscriptions,
            retry_topic=self._retry_topic,
            submit=self._submit,
            report_error=background.report,
            limits=config.flow_limits,
            orderly=config.orderly,
            commit_with_pull=not config.broadcasting,
            batch_size=config.pull_batch_size,
            suspend_ms=config.pull_suspend_ms,
        )
        self._rebalance_wanted = asyncio.Event()
        self._stopped = False

    def _make_service(self) -> ConcurrentConsumeService | OrderlyConsumeService:
        config = self.config
        send_back = make_send_back(self.instance, config.group, config.max_reconsume_times)
        if config.orderly:
            return OrderlyConsumeService(
                self._listeners,
                self.offsets,
                send_back,
                locks=None if config.broadcasting else self.rebalancer.locks,
                on_consumed=self._consumed,
                report_error=self._background.report,
                batch_size=config.consume_batch_size,
                max_reconsume_times=config.max_reconsume_times,
                suspend_ms=config.suspend_ms,
            )
        return ConcurrentConsumeService(
            self._listeners,
            self.offsets,
            send_back,
            on_consumed=self._consumed,
            report_error=self._background.report,
            batch_size=config.consume_batch_size,
            concurrency=config.consume_concurrency,
            broadcasting=config.broadcasting,
        )

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Load offsets, announce the group, take a first share of queues, start timers.

        The caller registered this runtime with the instance before (so the
        heartbeat names the group) and calls :meth:`stop` if this raises.

        Raises:
            NotANameServerError: The name server address is a broker's.
            OSError: The broadcasting offset file cannot be read.
        """
        config, bg = self.config, self._background
        await self.offsets.load()
        self._service.start()
        await self._fetch_routes()
        await self._check_selectors()
        await self.instance.groups.send_heartbeat()
        await bg.run_step(self.rebalancer.rebalance)
        bg.when_asked(
            self._rebalance_wanted,
            config.rebalance_interval_s,
            self.rebalancer.rebalance,
            "rebalance",
        )
        bg.every(config.persist_interval_s, self._persist, "persist-offsets")
        if config.orderly and not config.broadcasting:
            bg.every(config.lock_interval_s, self.rebalancer.locks.lock_all, "relock")
        if isinstance(self._service, ConcurrentConsumeService):
            bg.every(config.consume_timeout_ms / 1000, self._clean_expired, "clean-expired")

    async def stop(self) -> None:
        """Stop consuming and release every queue (offsets committed, locks released).

        Every step runs even if an earlier one failed (a commit that cannot be written
        must not leave queues locked); failures are reported to the background tasks.
        """
        self._stopped = True
        await self._background.cancel_all()
        await self._step(self._service.close(), "closing the consume service")
        await self._step(self.rebalancer.release_all(), "releasing queues")

    async def _step(self, step: Awaitable[None], what: str) -> None:
        try:
            await step
        except Exception as exc:
            self._background.report(exc, what)

    def subscribe(self, expressions: Mapping[str, str | MessageSelector]) -> None:
        """Add or replace subscriptions (their version is now, so brokers take them).

        Args:
            expressions: Topic -> tag expression or selector.
        """
        now = self.instance.clock.now_ms()
        subs = self.rebalancer.subscriptions
        for topic, expression in expressions.items():
            subs[topic] = subscription(topic, expression, now)
        if self._retry_topic is not None and self._retry_topic not in subs:
            subs[self._retry_topic] = subscription(self._retry_topic, "*", now)

    async def after_subscribe(self) -> None:
        """Tell the brokers about new subscriptions and rebalance (a background step)."""
        await self._fetch_routes()
        await self.instance.groups.send_heartbeat()
        self.rebalance_soon()

    def assignment(self) -> list[MessageQueue]:
        """The queues owned now, sorted."""
        return sorted(self.rebalancer.process_queues)

    # -- ConsumerHandle -----------------------------------------------------------------

    def consumer_data(self) -> ConsumerData:
        """The group's registration for heartbeats."""
        config = self.config
        return ConsumerData(
            group_name=config.group,
            consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=MessageModel.BROADCASTING
            if config.broadcasting
            else MessageModel.CLUSTERING,
            consume_from_where=config.consume_from_where,
            subscription_data_set=tuple(self.rebalancer.subscriptions.values()),
        )

    def rebalance_soon(self) -> None:
        """Rebalance now (the broker saw the group's members change)."""
        self._rebalance_wanted.set()

    async def running_info(self) -> ConsumerRunningInfo:
        """Describe this consumer for GET_CONSUMER_RUNNING_INFO."""
        read = self.offsets.read_memory
        return ConsumerRunningInfo(
            properties=self._running_properties(),
            subscription_set=tuple(self.rebalancer.subscriptions.values()),
            mq_table={
                mq: pq.snapshot(read(mq) or 0)
                for mq, pq in dict(self.rebalancer.process_queues).items()
            },
            status_table=self._status_table(),
        )

    async def reset_offset(self, offsets: dict[MessageQueue, int]) -> None:
        """Jump to the given offsets (RESET_CONSUMER_CLIENT_OFFSET from the broker)."""
        if not self._stopped:  # a reset must not re-add queues while shutting down
            await self.rebalancer.reset(offsets)

    def consume_offsets(self, topic: str) -> dict[MessageQueue, int]:
        """The offsets held in memory for ``topic`` (GET_CONSUMER_STATUS_FROM_CLIENT)."""
        return self.offsets.topic_snapshot(topic)

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str | None
    ) -> ConsumeMessageDirectlyResult:
        """Run the listener on one message (CONSUME_MESSAGE_DIRECTLY from an admin tool)."""
        return await consume_directly(
            self._listeners, msg, orderly=self.config.orderly, retry_topic=self._retry_topic
        )

    # -- pull loops and the consume service -----------------------------------------

    def _queue_added(self, mq: MessageQueue, pq: ProcessQueue[MessageExt], offset: int) -> None:
        loop = PullLoop(self._pull_deps, mq, pq, offset)
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
        else:
            service.submit(mq, pq, msgs)

    def _consumed(self, mq: MessageQueue) -> None:
        loop = self._pull_loops.get(mq)
        if loop is not None:
            loop.wake()

    # -- periodic jobs ------------------------------------------------------------------

    async def _fetch_routes(self) -> None:
        for topic in list(self.rebalancer.subscriptions):
            try:
                await self.instance.routes.topic_route(topic)
            except (TransportError, BrokerError) as exc:
                _log.warning("no route yet", group=self.config.group, topic=topic, error=str(exc))

    async def _check_selectors(self) -> None:
        """Ask a broker of each SQL92-subscribed topic whether it takes the selector.

        Java's ``checkClientInBroker`` (shared with the lite pull consumer): a broker
        without ``enablePropertyFilter`` (or one that cannot compile the selector) makes
        :meth:`start` fail with its answer, instead of a consumer that starts and then
        receives nothing.

        Raises:
            BrokerError: A broker refused the subscription.
        """
        subs = self.rebalancer.subscriptions.values()
        await check_selectors(self.instance, self.config.group, subs)

    async def _persist(self) -> None:
        await self.offsets.persist(list(self.rebalancer.process_queues))

    async def _clean_expired(self) -> None:
        if isinstance(self._service, ConcurrentConsumeService):
            await self._service.clean_expired(
                self.rebalancer.process_queues, self.config.consume_timeout_ms
            )

    # -- running info -------------------------------------------------------------------

    def _running_properties(self) -> dict[str, str]:
        config = self.config
        return {
            "PROP_NAMESERVER_ADDR": config.namesrv,
            "PROP_CONSUME_TYPE": ConsumeType.CONSUME_PASSIVELY.name,
            "PROP_CONSUME_ORDERLY": "true" if config.orderly else "false",
            "PROP_THREADPOOL_CORE_SIZE": str(config.consume_concurrency),
            "PROP_CONSUMER_START_TIMESTAMP": str(self._start_ms),
            "messageModel": "BROADCASTING" if config.broadcasting else "CLUSTERING",
            "consumeFromWhere": config.consume_from_where.name,
            "consumeMessageBatchMaxSize": str(config.consume_batch_size),
            "pullBatchSize": str(config.pull_batch_size),
            "maxReconsumeTimes": str(config.max_reconsume_times),
        }

    def _status_table(self) -> dict[str, ConsumeStatus]:
        elapsed_s = max(1e-3, (self.instance.clock.now_ms() - self._start_ms) / 1000)
        out: dict[str, ConsumeStatus] = {}
        for topic, stats in self._listeners.stats.items():
            out[topic] = ConsumeStatus(
                consume_rt=stats.consume_ns / max(1, stats.batches) / 1e6,
                consume_ok_tps=stats.ok / elapsed_s,
                consume_failed_tps=stats.failed / elapsed_s,
                consume_failed_msgs=stats.failed,
            )
        return out
