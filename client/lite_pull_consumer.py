"""LitePullConsumer: poll messages that background tasks prefetch (``DefaultLitePullConsumer``).

:meth:`~LitePullConsumer.subscribe` to topics (queues shared with the group by
rebalance, as a push consumer does) or :meth:`~LitePullConsumer.assign` queues
yourself, then start it (``async with`` starts it and shuts it down on exit) and
``await poll()``. One task per queue long-polls into a ProcessQueue
(at most ``max_cached_messages``); ``poll`` returns what is ready, at most
``max_poll_messages`` (the rest of a prefetched batch waits for the next poll). ``seek``
moves a queue; ``commit`` stores the position after the last polled message of each queue
(sync); with ``auto_commit`` that happens every ``auto_commit_interval_s`` during
``poll`` and at shutdown.

Starting asks the brokers about SQL92 selectors (as the push consumer does) and fails
on a refusal. A refusal met later by the prefetch (the broker reconfigured, or a topic
created after the start) is reported once per queue, to ``on_error`` or the next
``poll``, and the pull is retried, so the queue recovers once the broker takes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, NamedTuple

from rocklet.client.allocate import STRATEGIES, AllocateStrategy
from rocklet.client.arguments import check_offset, check_topic
from rocklet.client.consume_result import ConsumeResult
from rocklet.client.consumer_status import ConsumerStatus
from rocklet.client.errors import (
    TRANSIENT_ERRORS,
    BrokerError,
    ClientStateError,
    NoRouteError,
    TransportError,
)
from rocklet.client.instance import ClientInstance
from rocklet.client.message import MessageExt
from rocklet.client.process_queue import ProcessQueue
from rocklet.client.producer import Producer
from rocklet.client.pull_api import PullStatus, pull_request, read_pull_response
from rocklet.client.pull_base import PullConsumerBase
from rocklet.client.rebalance import ConsumeFrom, Rebalancer, subscription
from rocklet.client.selector import MessageSelector, as_selector
from rocklet.client.selector_check import check_selectors, is_selector_refusal
from rocklet.client.tls import TlsOption
from rocklet.client.trace import ConsumeTracer, check_trace_topic, new_dispatcher
from rocklet.client.trace_dispatch import TraceDispatcher
from rocklet.protocol.acl import Credentials
from rocklet.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.running import ConsumerRunningInfo
from rocklet.transport.logs import get_logger
from rocklet.transport.tasks import BackgroundTasks

__all__ = ["LitePullConsumer"]

_log = get_logger(__name__)

#: Long-poll hold of the prefetch pulls (Java's 20 s is capped here so that a seek or
#: shutdown never waits on a pull for long).
_LITE_SUSPEND_MS: Final = 15000
_PULL_ERROR_WAIT_S: Final = 3.0
#: Longest wait of a full prefetch cache for poll() to make room.
_ROOM_WAIT_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class _TraceSettings:
    """What the trace producer of a lite consumer is made from (``TracedConfig``)."""

    group: str
    namesrv: str
    trace_topic: str | None
    tls: TlsOption
    credentials: Credentials | None


class _Ready(NamedTuple):
    mq: MessageQueue
    pq: ProcessQueue[MessageExt]
    msgs: list[MessageExt]


class _QueueFeed:
    """One assigned queue of a lite consumer: its cache, positions and prefetch task."""

    def __init__(self, mq: MessageQueue, pq: ProcessQueue[MessageExt], offset: int) -> None:
        self.mq = mq
        self.pq = pq
        self.pull_offset = offset  # next offset to pull
        self.consumed = offset  # next offset after what poll() returned
        self.room = asyncio.Event()  # set by poll() when it frees cache space
        self.task: asyncio.Task[None] | None = None


class LitePullConsumer(PullConsumerBase):
    """Poll messages that background tasks prefetch from assigned or subscribed queues.

    Args:
        group: The consumer group.
        namesrv: Name server address(es).
        consume_from: Start of a queue with no committed offset: ``"last"``,
            ``"first"`` or a store timestamp (ms). Default: ``"last"``.
        pull_batch_size: Most messages per prefetch pull. Default: 32.
        max_poll_messages: Most messages one :meth:`poll` returns (at least 1); the
            rest of a prefetched batch is kept for the next poll. Default: 1024.
        max_cached_messages: Per-queue prefetch limit. Default: 1000.
        auto_commit: Commit polled positions every ``auto_commit_interval_s`` and at
            shutdown. Default: True.
        auto_commit_interval_s: Default: 5.0.
        allocate: Allocation strategy for :meth:`subscribe`. Default: ``"averagely"``.
        rebalance_interval_s: Rebalance period for :meth:`subscribe`. Default: 20.0.
        instance_name: Client instance name. Default: ``"DEFAULT"``.
        on_error: Called with unexpected background failures, and with a broker's
            refusal of a subscription met by the prefetch (once per queue until a pull
            of it succeeds again); without it they are raised by the next
            :meth:`poll`. Default: None.
        instance: Use this client instance instead of the shared one.
        tls: TLS to name servers and brokers: ``True`` (verified against the
            system's CAs) or an :class:`ssl.SSLContext`
            (:func:`rocklet.client.tls_context`). Default: plain TCP.
        credentials: Sign requests with this ACL account. Default: unsigned.
        trace: Message trace (Java's ``enableMsgTrace``): a ``SubBefore`` and a
            ``SubAfter`` record of each prefetched message, written when it arrives
            (as Java's lite consumer does: it cannot know when the application is
            done with it). Default: False.
        trace_topic: Where traces go. Default: ``RMQ_SYS_TRACE_TOPIC``.

    Raises:
        ValueError: A bad group, allocation strategy, trace topic or
            ``max_poll_messages`` (below 1).
    """

    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        consume_from: ConsumeFrom = "last",
        pull_batch_size: int = 32,
        max_poll_messages: int = 1024,
        max_cached_messages: int = 1000,
        auto_commit: bool = True,
        auto_commit_interval_s: float = 5.0,
        allocate: str | AllocateStrategy = "averagely",
        rebalance_interval_s: float = 20.0,
        instance_name: str = "DEFAULT",
        on_error: Callable[[BaseException], object] | None = None,
        instance: ClientInstance | None = None,
        tls: TlsOption = None,
        credentials: Credentials | None = None,
        trace: bool = False,
        trace_topic: str | None = None,
    ) -> None:
        super().__init__(group, namesrv, instance_name, instance, consume_from, tls, credentials)
        check_trace_topic(trace_topic)
        if isinstance(allocate, str) and allocate not in STRATEGIES:
            raise ValueError(f"unknown allocation strategy {allocate!r}")
        if max_poll_messages < 1:
            raise ValueError(f"max_poll_messages must be at least 1, not {max_poll_messages}")
        self._pull_batch = pull_batch_size
        self._max_poll = max_poll_messages
        self._max_cached = max_cached_messages
        self._auto_commit = auto_commit
        self._commit_s = auto_commit_interval_s
        self._strategy = STRATEGIES[allocate] if isinstance(allocate, str) else allocate
        self._rebalance_s = rebalance_interval_s
        self._expressions: dict[str, MessageSelector] = {}
        # Made at start, when the instance's clock gives them their version.
        self._subscriptions: dict[str, SubscriptionData] = {}
        self._assigned: list[MessageQueue] | None = None
        self._feeds: dict[MessageQueue, _QueueFeed] = {}
        # Prefetched batches in arrival order; poll() puts the rest of a batch it could
        # not return whole back in front, so a queue's messages stay in order.
        self._ready: deque[_Ready] = deque()
        self._ready_added = asyncio.Event()
        # Queue -> response code of the selector refusal last reported for it, so a
        # refusal that repeats on every retry reaches on_error once, not every 3 s.
        self._refused: dict[MessageQueue, int] = {}
        self._rebalancer: Rebalancer | None = None
        self._background = BackgroundTasks(f"rocklet-{group}", on_error, transient=TRANSIENT_ERRORS)
        self._rebalance_wanted = asyncio.Event()
        self._last_commit_ms = 0
        self._tracer: ConsumeTracer | None = None
        if trace:
            settings = _TraceSettings(group, namesrv, trace_topic, tls, credentials)
            dispatcher = new_dispatcher(Producer, settings, "CONSUME")
            # No listener here: each batch is recorded as consumed at once (Java's
            # 15-minute consume time-out is never reached).
            self._tracer = ConsumeTracer(group, dispatcher, consume_timeout_ms=15 * 60_000)

    @property
    def trace_dispatcher(self) -> TraceDispatcher | None:
        """The message-trace dispatcher, or ``None`` when ``trace`` is off.

        Its counters ``sent``, ``failed`` and ``dropped`` tell how tracing goes.
        """
        return None if self._tracer is None else self._tracer.dispatcher

    # -- setup ------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Consume ``topic`` with the group: queues are shared by rebalance.

        ``expression`` is a tag expression or ``MessageSelector.by_sql(...)``.

        Raises:
            ValueError: ``topic`` is not a name brokers accept (a heartbeat naming it
                would be refused, for every group of the client instance).
            ClientStateError: Queues were assigned with :meth:`assign`, or running.
        """
        check_topic(topic, self.group)
        if self._assigned is not None:
            raise ClientStateError("subscribe() and assign() cannot be mixed")
        if self._status is not ConsumerStatus.CREATED:
            raise ClientStateError("subscribe before start()")
        self._expressions[topic] = as_selector(expression)

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Consume exactly these queues, with no rebalance.

        Raises:
            ValueError: A queue's topic is not a name brokers accept.
            ClientStateError: Topics were subscribed, or running.
        """
        queues = sorted(set(mqs))
        for topic in {mq.topic for mq in queues}:
            check_topic(topic, self.group)
        if self._expressions:
            raise ClientStateError("subscribe() and assign() cannot be mixed")
        if self._status is not ConsumerStatus.CREATED:
            raise ClientStateError("assign before start()")
        self._assigned = queues

    def assignment(self) -> list[MessageQueue]:
        """The queues being consumed now, sorted."""
        return sorted(self._feeds)

    async def start(self) -> None:
        """Start prefetching (after a first rebalance when subscribed); idempotent.

        If starting fails, what was started is stopped again before the error is raised.

        Raises:
            ClientStateError: Nothing assigned or subscribed, or shut down before.
            NotANameServerError: ``namesrv`` is a broker's address.
            BrokerError: A broker refused an SQL92 subscription (SYSTEM_ERROR when it
                runs without ``enablePropertyFilter``, SUBSCRIPTION_PARSE_FAILED when
                the selector does not compile).
        """
        if self._status is ConsumerStatus.RUNNING:
            return
        if not self._expressions and not self._assigned:
            raise ClientStateError(
                "subscribe() or assign() before start() (before `async with consumer` too)"
            )
        instance = await self._start_instance(self)
        # No await since the group was registered: no heartbeat has described it yet.
        now = instance.clock.now_ms()
        self._subscriptions = {t: subscription(t, e, now) for t, e in self._expressions.items()}
        self._last_commit_ms = instance.clock.monotonic_ms()
        try:
            await self._begin(instance)
        except BaseException:
            self._status = ConsumerStatus.CLOSING
            await self._background.cancel_all()
            self._drop_feeds()
            await self._stop_instance()
            raise
        if self._tracer is not None:
            await self._tracer.start(instance.clock, instance.client_ip)  # never raises

    async def _begin(self, instance: ClientInstance) -> None:
        assert self._offsets is not None
        self._rebalancer = Rebalancer(
            self.group,
            instance,
            self._offsets,
            on_added=self._queue_added,
            on_removed=self._queue_removed,
            strategy=self._strategy,
            consume_from=self._consume_from,
            drop_stuck_queues=False,
        )
        self._rebalancer.subscriptions = dict(self._subscriptions)
        topics = set(self._subscriptions) | {mq.topic for mq in self._assigned or ()}
        for topic in sorted(topics):
            try:
                await instance.topic_route(topic)
            except (TransportError, BrokerError) as exc:
                _log.warning("no route yet", group=self.group, topic=topic, error=str(exc))
        # Java's checkClientInBroker, as the push consumer does: a refused selector
        # fails the start instead of prefetching nothing for ever.
        await check_selectors(instance, self.group, self._subscriptions.values())
        if self._assigned is not None:
            # Assigned queues start now; a failure to find a start offset is raised.
            for mq in self._assigned:
                await self._start_assigned(mq)
            return
        await instance.groups.send_heartbeat()
        bg = self._background
        await bg.run_step(self._rebalance)
        bg.when_asked(self._rebalance_wanted, self._rebalance_s, self._rebalance, "rebalance")

    async def _start_assigned(self, mq: MessageQueue) -> None:
        assert self._rebalancer is not None
        offset = await self._rebalancer.compute_start_offset(mq)
        self._queue_added(mq, ProcessQueue(clock=self.instance.clock), offset)

    async def shutdown(self) -> None:
        """Stop prefetching, commit polled positions (auto-commit), leave the group.

        Idempotent. Raises, after shutting down, a background failure never reported.

        Raises:
            ClientStateError: Called from another event loop than the consumer's.
        """
        if self._status is ConsumerStatus.CREATED:
            self._status = ConsumerStatus.CLOSED
            return
        if self._status is not ConsumerStatus.RUNNING:
            return
        self._live()
        if self._auto_commit:
            try:
                await self.commit()
            except (TransportError, BrokerError, NoRouteError) as exc:
                _log.warning("final commit failed", group=self.group, error=str(exc))
            except Exception as exc:
                self._background.report(exc, "final commit")  # raised below, after the cleanup
        self._status = ConsumerStatus.CLOSING
        await self._background.cancel_all()
        self._drop_feeds()
        if self._tracer is not None:
            await self._tracer.close()  # sends the traces still queued; never raises
        try:
            await self._stop_instance()
        except Exception as exc:
            self._background.report(exc, "leaving the group")
        self._status = ConsumerStatus.CLOSED
        self._background.check_errors()

    def _drop_feeds(self) -> None:
        for feed in self._feeds.values():
            feed.pq.dropped = True
        self._feeds.clear()

    async def __aenter__(self) -> LitePullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    # -- consuming --------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 5000) -> list[MessageExt]:
        """Return prefetched messages, waiting up to ``timeout_ms`` for the first.

        The returned messages count as consumed: the next :meth:`commit` (or
        auto-commit) stores the positions after them.

        Args:
            timeout_ms: Longest wait when nothing is ready.

        Returns:
            Up to ``max_poll_messages`` messages, possibly from several queues; empty
            when the wait timed out.

        Raises:
            ClientStateError: The consumer is not running, or this is another event
                loop than its own.
            BaseException: A background failure not handed to ``on_error``, such as a
                broker's refusal of the subscription met by the prefetch
                (:class:`~rocklet.client.errors.BrokerError`: SYSTEM_ERROR from a broker
                without property filtering, SUBSCRIPTION_PARSE_FAILED).
        """
        instance = self._live()
        self._background.check_errors()
        elapsed_ms = instance.clock.monotonic_ms() - self._last_commit_ms
        if self._auto_commit and elapsed_ms >= self._commit_s * 1000:
            try:
                await self.commit()
            except (TransportError, BrokerError, NoRouteError) as exc:
                _log.warning("auto-commit failed", group=self.group, error=str(exc))
        out: list[MessageExt] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        ready = self._ready
        while not out:
            if not ready:
                self._ready_added.clear()
                try:
                    async with asyncio.timeout_at(deadline):
                        await self._ready_added.wait()
                except TimeoutError:
                    return out
            while ready and len(out) < self._max_poll:
                self._take(ready.popleft(), out)
        return out

    def _take(self, ready: _Ready, out: list[MessageExt]) -> None:
        feed = self._feeds.get(ready.mq)
        if feed is None or feed.pq is not ready.pq or ready.pq.dropped:
            return  # the queue was sought, reassigned or dropped since the prefetch
        msgs = ready.msgs
        room = self._max_poll - len(out)
        if len(msgs) > room:
            # Only the head is returned; the rest stays cached (and ahead of the queue's
            # later batches) for the next poll, so the consumed offset below stops at it.
            self._ready.appendleft(_Ready(ready.mq, ready.pq, msgs[room:]))
            msgs = msgs[:room]
        offset = ready.pq.remove(msgs)
        if offset >= 0:
            feed.consumed = offset
            if self._auto_commit and self._offsets is not None:
                self._offsets.update(ready.mq, offset)
        feed.room.set()
        out.extend(msgs)

    async def commit(self) -> None:
        """Store the position after the last polled message of every queue (sync).

        Raises:
            BrokerError: A broker refused.
            TransportError: A broker could not be reached.
        """
        assert self._offsets is not None
        self._last_commit_ms = self._live().clock.monotonic_ms()
        for mq, feed in self._feeds.items():
            self._offsets.update(mq, feed.consumed, increase_only=False)
        await self._offsets.persist(list(self._feeds))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue ``mq`` from ``offset``: prefetched messages are discarded.

        Raises:
            ValueError: ``offset`` is not an int of at least 0 (checked here: the
                prefetch would fail on it for ever, and the final commit with it).
            ClientStateError: ``mq`` is not assigned to this consumer now, or this is
                another event loop than the consumer's.
        """
        check_offset(offset)
        feed = self._feeds.get(mq)
        if feed is None:
            raise ClientStateError(f"{mq} is not assigned to this consumer")
        clock = self._live().clock
        feed.pq.dropped = True
        if feed.task is not None:
            feed.task.cancel()
        pq: ProcessQueue[MessageExt] = ProcessQueue(clock=clock)
        if self._rebalancer is not None and mq in self._rebalancer.process_queues:
            self._rebalancer.process_queues[mq] = pq
        self._queue_added(mq, pq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        """Continue ``mq`` from its smallest stored offset."""
        self.seek(mq, await self.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        """Continue ``mq`` after its last stored message."""
        self.seek(mq, await self.max_offset(mq))

    # -- prefetch -----------------------------------------------------------------------

    def _queue_added(self, mq: MessageQueue, pq: ProcessQueue[MessageExt], offset: int) -> None:
        feed = _QueueFeed(mq, pq, offset)
        self._feeds[mq] = feed
        name = f"prefetch-{mq.topic}-{mq.queue_id}"
        feed.task = self._background.spawn(self._prefetch(feed), name)

    def _queue_removed(self, mq: MessageQueue, pq: ProcessQueue[MessageExt]) -> None:
        feed = self._feeds.get(mq)
        if feed is not None and feed.pq is pq:
            del self._feeds[mq]
            if feed.task is not None:
                feed.task.cancel()  # do not sit out a long poll for a queue we lost

    async def _prefetch(self, feed: _QueueFeed) -> None:
        try:
            while not feed.pq.dropped:
                try:
                    await self._prefetch_once(feed)
                except (TransportError, BrokerError, NoRouteError) as exc:
                    _log.warning("prefetch failed; retrying", mq=feed.mq, error=str(exc))
                    self._report_refusal(feed.mq, exc)
                    await asyncio.sleep(_PULL_ERROR_WAIT_S)
        finally:
            if self._feeds.get(feed.mq) is feed and feed.pq.dropped:
                del self._feeds[feed.mq]

    async def _prefetch_once(self, feed: _QueueFeed) -> None:
        mq, pq = feed.mq, feed.pq
        if pq.count >= self._max_cached:
            feed.room.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(feed.room.wait(), _ROOM_WAIT_S)
            return
        selector = as_selector(self._expressions.get(mq.topic))
        cmd = pull_request(
            self.group,
            mq,
            feed.pull_offset,
            self._pull_batch,
            subscription=selector.expression,
            suspend_ms=_LITE_SUSPEND_MS,
            expression_type=selector.expression_type,
        )
        addr, answer = await self._pull_somewhere(mq, cmd, _LITE_SUSPEND_MS / 1000 + 15)
        result = read_pull_response(answer, mq.broker_name, tags=selector.tags(), addr=addr)
        self._refused.pop(mq, None)  # taken again: a later refusal is news
        if pq.dropped:
            return
        pq.touch_pull()
        feed.pull_offset = result.next_begin_offset
        if result.messages:
            pq.put(result.messages, result.max_offset)
            self._ready.append(_Ready(mq, pq, result.messages))
            self._ready_added.set()
            if self._tracer is not None:
                self._trace(self._tracer, result.messages)
        elif result.status is PullStatus.OFFSET_ILLEGAL:
            _log.warning("prefetch offset illegal; jumping", mq=mq, to=result.next_begin_offset)
            if pq.count == 0:
                feed.consumed = result.next_begin_offset

    def _report_refusal(self, mq: MessageQueue, exc: BaseException) -> None:
        """Report a broker's refusal of ``mq``'s selector, once until a pull succeeds.

        Retrying cannot fix it (only reconfiguring the broker can), so logging alone
        would leave ``poll`` returning nothing with no error anywhere; transient
        failures (transport, busy broker, no route) are only logged by the caller.
        """
        if not is_selector_refusal(exc, as_selector(self._expressions.get(mq.topic))):
            return
        assert isinstance(exc, BrokerError)  # is_selector_refusal holds only for those
        if self._refused.get(mq) == exc.response_code:
            return
        self._refused[mq] = exc.response_code
        self._background.report(exc, f"prefetch-{mq.topic}-{mq.queue_id}")

    @staticmethod
    def _trace(tracer: ConsumeTracer, msgs: list[MessageExt]) -> None:
        # Java's lite consumer runs both hooks on each pull that found messages, the
        # second at once with success: the messages are consumed as far as it knows.
        batch = tracer.before(msgs)
        if batch is not None:
            tracer.after(batch, ConsumeResult.SUCCESS, raised=False, elapsed_ns=0)

    # -- background ---------------------------------------------------------------------

    async def _rebalance(self) -> None:
        assert self._rebalancer is not None
        await self._rebalancer.rebalance()

    # -- ConsumerHandle ------------------------------------------------------------------

    def rebalance_soon(self) -> None:
        """Rebalance now (the broker saw the group's members change)."""
        self._rebalance_wanted.set()

    def consumer_data(self) -> ConsumerData:
        """The group's registration (lite consumers consume actively)."""
        where = {
            "last": ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            "first": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        }.get(str(self._consume_from), ConsumeFromWhere.CONSUME_FROM_TIMESTAMP)
        return ConsumerData(
            self.group,
            ConsumeType.CONSUME_ACTIVELY,
            MessageModel.CLUSTERING,
            where,
            tuple(self._subscriptions.values()),
        )

    async def running_info(self) -> ConsumerRunningInfo:
        """Describe this consumer for GET_CONSUMER_RUNNING_INFO."""
        return ConsumerRunningInfo(
            properties={
                "PROP_CONSUME_TYPE": ConsumeType.CONSUME_ACTIVELY.name,
                "PROP_NAMESERVER_ADDR": self.namesrv,
            },
            subscription_set=tuple(self._subscriptions.values()),
            mq_table={mq: f.pq.snapshot(f.consumed) for mq, f in self._feeds.items()},
        )

    async def reset_offset(self, offsets: dict[MessageQueue, int]) -> None:
        """Seek the owned queues among ``offsets`` (RESET_CONSUMER_CLIENT_OFFSET)."""
        for mq, offset in offsets.items():
            if mq in self._feeds:
                self.seek(mq, offset)
