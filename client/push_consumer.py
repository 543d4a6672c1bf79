"""PushConsumer: subscribe a listener, and Rocklet delivers the messages.

Under the name is a pull consumer that pulls for you (RocketMQ's
``DefaultMQPushConsumer``): a :class:`~rocklet.client.rebalance.Rebalancer` decides which
queues this member of the group owns, one :class:`~rocklet.client.pull_loop.PullLoop` per
owned queue long-polls the broker into the queue's
:class:`~rocklet.client.process_queue.ProcessQueue`, and a consume service
(:mod:`rocklet.client.consume_service`) calls your listener, concurrently or in per-queue
order. Offsets are committed every 5 s, when a queue moves to another member, and at
shutdown (clustering: on the broker; broadcasting: in a local file). Those parts are
built when the consumer starts (:mod:`rocklet.client.push_runtime`); the settings are a
:class:`~rocklet.client.push_config.PushConsumerConfig`.

Subscribe first, then start: :meth:`PushConsumer.subscribe` before
:meth:`~PushConsumer.start` (or before ``async with``, which starts the consumer and
shuts it down on exit) decides what the group consumes from its first rebalance on;
``subscribe`` returns the consumer, so both fit in the ``async with`` line. Subscribing
while running adds the topic at once.

Background failures never vanish: expected, transient ones (a broker restarting) are
logged and retried; anything unexpected is logged and passed to ``on_error`` or, when
there is none, raised by the next :meth:`PushConsumer.check_errors`,
:meth:`PushConsumer.subscribe` or :meth:`PushConsumer.shutdown`.

Example::

    async def handle(msgs: list[MessageExt]) -> ConsumeResult:
        for msg in msgs:
            print(msg.topic, msg.body)
        return ConsumeResult.SUCCESS

    consumer = PushConsumer("my-group", "127.0.0.1:9876")
    consumer.subscribe("orders", "TagA || TagB", handle)
    async with consumer:  # started: consuming until the block ends
        await stop.wait()
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any, Self

from rocklet.client.arguments import check_listener, check_topic, wrong_loop
from rocklet.client.consume_result import ConsumeResult
from rocklet.client.consumer_status import ConsumerStatus
from rocklet.client.errors import TRANSIENT_ERRORS, ClientStateError
from rocklet.client.instance import ClientInstance, get_instance
from rocklet.client.listeners import Listener, ListenerTable
from rocklet.client.producer import Producer
from rocklet.client.push_config import PushConsumerConfig
from rocklet.client.push_runtime import PushRuntime
from rocklet.client.selector import MessageSelector
from rocklet.client.trace import ConsumeTracer, new_dispatcher
from rocklet.client.trace_dispatch import TraceDispatcher
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.running import ConsumerRunningInfo
from rocklet.transport.tasks import BackgroundTasks

__all__ = ["ConsumerStatus", "PushConsumer", "PushConsumerConfig"]


class PushConsumer:
    """A consumer group member that delivers messages to listeners.

    Use as an async context manager (it starts on entry and shuts down on exit), or
    call :meth:`start` and :meth:`shutdown`. Subscribe before starting.

    Args:
        group: The consumer group.
        namesrv: Name server address(es), ``"host:port"`` (several joined by ``;``).
            Default: ``"127.0.0.1:9876"``.
        on_error: Called with unexpected background failures; without it they are
            raised by the next call. Default: None.
        executor: Runs plain-function listeners. Default: a thread pool of
            ``consume_concurrency`` threads, created on first need.
        instance: Use this client instance (and its clock) instead of the shared one.
        **options: :class:`~rocklet.client.push_config.PushConsumerConfig` fields
            (``orderly``, ``broadcasting``, ``consume_from``, ``consume_batch_size``,
            ``trace``...).

    Raises:
        ValueError: An option is out of range.
        TypeError: An option is unknown, or ``offsets_dir`` is neither a string nor an
            :class:`os.PathLike`.
    """

    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        on_error: Callable[[BaseException], object] | None = None,
        executor: Executor | None = None,
        instance: ClientInstance | None = None,
        **options: Any,
    ) -> None:
        self.config = PushConsumerConfig(group, namesrv, **options)
        self._on_error = on_error
        self._given_instance = instance
        self._status = ConsumerStatus.CREATED
        self._expressions: dict[str, str | MessageSelector] = {}
        self._tracer: ConsumeTracer | None = None
        if self.config.trace:
            dispatcher = new_dispatcher(Producer, self.config, "CONSUME")
            self._tracer = ConsumeTracer(group, dispatcher, self.config.consume_timeout_ms)
        self._listeners = ListenerTable(
            ConsumeResult.SUSPEND if self.config.orderly else ConsumeResult.RECONSUME_LATER,
            executor,
            threads=self.config.consume_concurrency,
            thread_name_prefix=f"rocklet-{group}",
            tracer=self._tracer,
        )
        self._background = BackgroundTasks(f"rocklet-{group}", on_error, transient=TRANSIENT_ERRORS)
        self._runtime: PushRuntime | None = None
        # The loop it was started on: its tasks and connections live there.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._remove_error_cb: Callable[[], None] | None = None

    # -- settings -----------------------------------------------------------------------

    @property
    def group(self) -> str:
        """The consumer group."""
        return self.config.group

    @property
    def namesrv(self) -> str:
        """The name server address(es)."""
        return self.config.namesrv

    @property
    def orderly(self) -> bool:
        """Whether each queue is consumed strictly in order."""
        return self.config.orderly

    @property
    def broadcasting(self) -> bool:
        """Whether every member gets every message."""
        return self.config.broadcasting

    @property
    def trace_dispatcher(self) -> TraceDispatcher | None:
        """The message-trace dispatcher, or ``None`` when ``trace`` is off.

        Its counters ``sent``, ``failed`` and ``dropped`` tell how tracing goes.
        """
        return None if self._tracer is None else self._tracer.dispatcher

    # -- state --------------------------------------------------------------------------

    @property
    def status(self) -> ConsumerStatus:
        """Where the consumer is in its lifecycle."""
        return self._status

    @property
    def client_id(self) -> str | None:
        """This member's id in the group (its client instance's), once started."""
        return None if self._runtime is None else self._runtime.instance.client_id

    def assignment(self) -> list[MessageQueue]:
        """The queues this consumer owns right now (retry queues included), sorted."""
        return [] if self._runtime is None else self._runtime.assignment()

    def check_errors(self) -> None:
        """Raise, once, the first background failure not handed to ``on_error``.

        Raises:
            BaseException: That failure.
        """
        self._background.check_errors()
        if self._runtime is not None and self._on_error is None:
            self._runtime.instance.check_errors()

    async def running_info(self) -> ConsumerRunningInfo:
        """What this consumer reports for GET_CONSUMER_RUNNING_INFO (admin tools).

        Raises:
            ClientStateError: The consumer is not running.
        """
        if self._runtime is None:
            raise ClientStateError("consumer is not running")
        self._check_loop()
        return await self._runtime.running_info()

    def _check_loop(self) -> None:
        """Refuse a call of a running consumer from another event loop than its own.

        Raises:
            ClientStateError: The running loop (if any) is not the consumer's.
        """
        if asyncio.events._get_running_loop() is not self._loop:
            raise wrong_loop(f"consumer {self.config.group!r}")

    # -- lifecycle ----------------------------------------------------------------------

    def subscribe(
        self, topic: str, expression: str | MessageSelector = "*", listener: Listener | None = None
    ) -> Self:
        """Subscribe ``listener`` to the messages of ``topic`` matching ``expression``.

        Before :meth:`start` the subscription takes effect when the consumer starts;
        while running, the brokers are told at once and a rebalance follows.

        Args:
            topic: The topic.
            expression: ``"*"``, tags joined by ``||`` (``"TagA || TagB"``), or
                ``MessageSelector.by_sql("a > 5")`` to select by properties (the
                brokers need ``enablePropertyFilter=true``; :meth:`start` asks them).
            listener: ``async def`` or plain function taking ``list[MessageExt]`` and
                returning a :class:`ConsumeResult`.

        Returns:
            This consumer, so that ``async with PushConsumer(...).subscribe(...) as c``
            subscribes and starts in one line.

        Raises:
            ValueError: No listener, or a topic name brokers refuse (empty, too long,
                characters other than letters, digits, ``%``, ``|``, ``-``, ``_``):
                a heartbeat naming it would be refused whole, and with it every
                group of the client instance.
            TypeError: ``topic`` is not a string, or ``listener`` is not callable.
            ClientStateError: The consumer is closed, or running and called from
                another event loop than its own.
            BaseException: An unreported background failure.
        """
        check_topic(topic, self.config.group)
        check_listener(listener)
        assert listener is not None  # for the type checker: check_listener refuses None
        if self._status in (ConsumerStatus.CLOSING, ConsumerStatus.CLOSED):
            raise ClientStateError("consumer is closed")
        if self._runtime is not None:
            self._check_loop()
        self.check_errors()
        self._expressions[topic] = expression
        self._listeners.add(topic, listener)
        if self._runtime is not None:
            self._runtime.subscribe({topic: expression})
            self._background.spawn(self._runtime.after_subscribe(), "subscribe")
        return self

    async def start(self) -> None:
        """Join the group and start consuming; idempotent.

        Routes are fetched, a heartbeat tells the brokers about the group, and a first
        rebalance assigns queues before this returns. If starting fails, everything
        started so far is shut down again before the error is raised.

        Raises:
            ClientStateError: The consumer was shut down, or nothing is subscribed.
            NotANameServerError: ``namesrv`` is a broker's address.
        """
        if self._status is ConsumerStatus.RUNNING:
            return
        if self._status is not ConsumerStatus.CREATED:
            raise ClientStateError("a shut down consumer cannot be started again")
        if not self._expressions:
            raise ClientStateError(
                "subscribe to a topic before start(): call consumer.subscribe(topic, "
                "expression, listener) first (before `async with consumer` too)"
            )
        config = self.config
        instance = self._given_instance or get_instance(
            config.namesrv,
            config.instance_name,
            tls=config.tls,
            credentials=config.credentials,
        )
        try:
            await instance.start()
            runtime = PushRuntime(
                config, instance, self._listeners, self._expressions, self._background
            )
            instance.groups.register_consumer(config.group, runtime)
        except BaseException:
            if self._given_instance is None:
                await instance.release()
            raise
        self._runtime = runtime
        self._loop = asyncio.get_running_loop()
        if self._on_error is not None:
            self._remove_error_cb = instance.on_error(self._on_error)
        self._status = ConsumerStatus.RUNNING  # from here on, _close() undoes it all
        if self._tracer is not None:
            await self._tracer.start(instance.clock, instance.client_ip)  # never raises
        try:
            await runtime.start()
        except BaseException:
            await self._close()
            raise

    async def shutdown(self) -> None:
        """Leave the group: stop pulling and consuming, commit offsets, unregister.

        Idempotent. Raises, after shutting down, a background failure that was never
        reported (as :meth:`check_errors`).

        Listeners still running are not waited for: an ``async def`` listener is
        cancelled (this waits until it unwinds); a plain function already running goes
        on in its thread, unwaited, and its verdict is dropped. The offsets committed
        stop before the first message not consumed, so the messages of those calls are
        delivered again (to another member of the group, or after a restart).

        Raises:
            ClientStateError: Called from another event loop than the consumer's.
        """
        if self._status is ConsumerStatus.CREATED:
            self._status = ConsumerStatus.CLOSED
            return
        if self._status is not ConsumerStatus.RUNNING:
            return
        self._check_loop()
        await self._close()
        self._background.check_errors()

    async def _close(self) -> None:
        runtime = self._runtime
        assert runtime is not None
        self._status = ConsumerStatus.CLOSING
        instance, group = runtime.instance, self.config.group
        # Every step runs even if an earlier one failed (a commit that cannot be
        # written must not leave the consumer registered); failures are reported.
        await runtime.stop()
        if self._tracer is not None:
            await self._tracer.close()  # sends the traces still queued; never raises
        instance.groups.unregister_consumer(group)
        await self._step(instance.groups.unregister_client(None, group), "unregistering")
        if self._remove_error_cb is not None:
            self._remove_error_cb()
        if self._given_instance is None:
            await self._step(instance.release(), "releasing the client instance")
        self._listeners.close()
        self._status = ConsumerStatus.CLOSED

    async def _step(self, step: Awaitable[None], what: str) -> None:
        try:
            await step
        except Exception as exc:
            self._background.report(exc, what)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()
