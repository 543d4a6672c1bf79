"""A blocking facade over the asyncio SDK, for scripts and frameworks that are not async.

Every object here wraps its asyncio twin (same name, same arguments) and runs it on a
private event loop in a background thread; each method blocks until the coroutine it
stands for is done and returns its result or raises its exception. All facade objects
of a process share that one loop, so they share client instances (connections,
routes, heartbeats) exactly as async producers and consumers in one loop do. The loop
thread starts with the first object and stops when the last one is closed. An object
dropped without being closed is closed when it is garbage-collected, with a
``ResourceWarning`` (as an unclosed file), so its connections and the loop thread do
not outlive it.

Listeners of the blocking :class:`PushConsumer` are plain functions; they run in the
consumer's thread pool, never on the loop, so they may block. Do not call blocking
methods from the loop thread itself (that would deadlock; it raises RuntimeError).

Example::

    from rocklet.client.sync import Producer, Message

    with Producer("my-group", "127.0.0.1:9876") as producer:
        result = producer.send(Message("orders", b"hello"))
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import warnings
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Self, TypeVar

from rocklet.client import admin as _admin
from rocklet.client import lite_pull_consumer as _lite
from rocklet.client import producer as _producer
from rocklet.client import pull_consumer as _pull
from rocklet.client import transaction as _transaction
from rocklet.client.consume_result import ConsumeResult
from rocklet.client.message import Message, MessageExt, SendResult
from rocklet.client.producer import MessageQueueSelector
from rocklet.client.push_consumer import PushConsumer as _AsyncPushConsumer
from rocklet.client.selector import MessageSelector
from rocklet.client.trace_dispatch import TraceDispatcher
from rocklet.client.transaction import (
    CheckListener,
    LocalTransaction,
    LocalTransactionState,
    TransactionSendResult,
)
from rocklet.protocol.bodies.cluster import ClusterInfo
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.route import Perm, TopicRouteData
from rocklet.protocol.bodies.running import ConsumerConnection, ConsumerRunningInfo
from rocklet.protocol.bodies.stats import ConsumeStats, TopicOffset

__all__ = [
    "Admin",
    "ConsumeResult",
    "LitePullConsumer",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "SendResult",
    "TransactionProducer",
]

T = TypeVar("T")


class _Runtime:
    """The shared loop thread, reference-counted by the facade objects."""

    _lock = threading.Lock()
    _current: _Runtime | None = None

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.users = 0
        self._thread = threading.Thread(target=self._run, name="rocklet-sync-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        self.loop.close()  # (a second close, by release(), does nothing)

    @classmethod
    def acquire(cls) -> _Runtime:
        with cls._lock:
            if cls._current is None:
                cls._current = _Runtime()
            cls._current.users += 1
            return cls._current

    def release(self) -> None:
        with _Runtime._lock:
            self.users -= 1
            if self.users > 0:
                return
            _Runtime._current = None
        self.run(_cancel_leftovers())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()

    def release_soon(self, closing: Coroutine[Any, Any, object] | None) -> None:
        """Await ``closing``, then release, on the loop: from ``__del__``, in any thread.

        The garbage collector may run a finalizer anywhere, the loop thread included,
        and while other threads hold the runtime's lock: nothing here blocks.
        """

        async def close_then_release() -> None:
            if closing is not None:
                with contextlib.suppress(Exception):
                    await closing
            with _Runtime._lock:
                self.users -= 1
                if self.users > 0:
                    return
                _Runtime._current = None
            await _cancel_leftovers()
            self.loop.stop()

        try:
            asyncio.run_coroutine_threadsafe(close_then_release(), self.loop)
        except RuntimeError:  # the loop is already closed (the interpreter is exiting)
            if closing is not None:
                closing.close()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its outcome."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("blocking call made from the SDK's own event loop thread")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def call(self, fn: Callable[[], T]) -> T:
        """Run a plain callable on the loop thread (loop-bound objects live there)."""

        async def call() -> T:
            return fn()

        return self.run(call())


async def _cancel_leftovers() -> None:
    current = asyncio.current_task()
    leftovers = [t for t in asyncio.all_tasks() if t is not current]
    for task in leftovers:
        task.cancel()
    await asyncio.gather(*leftovers, return_exceptions=True)


class _Facade:
    """Owns one runtime reference, released once by :meth:`_release`."""

    def __init__(self) -> None:
        self._rt = _Runtime.acquire()
        self._released = False

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self._rt.release()

    def _closing(self) -> Coroutine[Any, Any, object]:
        """The wrapped object's own close, for :meth:`__del__`."""
        raise NotImplementedError

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        # (``__dict__``: a half-made object, and _Proxy's __getattr__, must not recurse.)
        if self.__dict__.get("_released", True):
            return
        self._released = True
        _warn(
            f"unclosed {type(self).__name__}: close it, or use it in a with block; closing it now",
            ResourceWarning,
            source=self,
        )
        try:
            closing: Coroutine[Any, Any, object] | None = self._closing()
        except AttributeError:  # made without its async twin
            closing = None
        self._rt.release_soon(closing)


class Producer(_Facade):
    """Blocking :class:`rocklet.client.producer.Producer` (same arguments)."""

    def __init__(self, group: str, namesrv: str = "127.0.0.1:9876", **options: Any) -> None:
        super().__init__()
        try:
            self._p = self._make(group, namesrv, options)
        except BaseException:
            self._release()
            raise

    def _make(self, group: str, namesrv: str, options: dict[str, Any]) -> _producer.Producer:
        return self._rt.call(lambda: _producer.Producer(group, namesrv, **options))

    @property
    def trace_dispatcher(self) -> TraceDispatcher | None:
        """With ``trace=True``, the message-trace dispatcher (its counters); else ``None``."""
        return self._p.trace_dispatcher

    def start(self) -> None:
        """Start the producer."""
        self._rt.run(self._p.start())

    def _closing(self) -> Coroutine[Any, Any, object]:
        return self._p.close()

    def close(self) -> None:
        """Close the producer; idempotent."""
        if not self._released:
            try:
                self._rt.run(self._p.close())
            finally:
                self._release()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def send(self, msg: Message | Sequence[Message]) -> SendResult:
        """Send one message, or a list as one batch."""
        return self._rt.run(self._p.send(msg))

    def send_oneway(self, msg: Message) -> None:
        """Send without waiting for the broker's answer."""
        self._rt.run(self._p.send_oneway(msg))

    def send_orderly(
        self, msg: Message, sharding_key: Any, selector: MessageQueueSelector | None = None
    ) -> SendResult:
        """Send to the queue chosen for ``sharding_key``."""
        return self._rt.run(self._p.send_orderly(msg, sharding_key, selector))

    def request(self, msg: Message, timeout_ms: int = 3000) -> MessageExt:
        """Send a request and wait for its reply."""
        return self._rt.run(self._p.request(msg, timeout_ms))

    def reply(self, request_msg: MessageExt, body: bytes) -> SendResult:
        """Answer a consumed request message."""
        return self._rt.run(self._p.reply(request_msg, body))


class TransactionProducer(Producer):
    """Blocking :class:`rocklet.client.transaction.TransactionProducer`."""

    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        check_listener: CheckListener,
        **options: Any,
    ) -> None:
        super().__init__(group, namesrv, check_listener=check_listener, **options)

    def _make(self, group: str, namesrv: str, options: dict[str, Any]) -> _producer.Producer:
        return self._rt.call(lambda: _transaction.TransactionProducer(group, namesrv, **options))

    def send_in_transaction(
        self, msg: Message, local_transaction: LocalTransaction, arg: Any = None
    ) -> TransactionSendResult:
        """Send a half message, run ``local_transaction`` and commit or roll back."""
        assert isinstance(self._p, _transaction.TransactionProducer)
        return self._rt.run(self._p.send_in_transaction(msg, local_transaction, arg))


class PushConsumer(_Facade):
    """Blocking :class:`~rocklet.client.push_consumer.PushConsumer`; plain-function listeners.

    Subscribe, then ``with consumer:`` starts it (and shuts it down on exit), as
    ``async with`` does.
    """

    def __init__(self, group: str, namesrv: str = "127.0.0.1:9876", **options: Any) -> None:
        super().__init__()
        try:
            self._c = self._rt.call(lambda: _AsyncPushConsumer(group, namesrv, **options))
        except BaseException:
            self._release()
            raise

    def subscribe(
        self,
        topic: str,
        expression: str | MessageSelector = "*",
        listener: Callable[[list[MessageExt]], ConsumeResult] | None = None,
    ) -> Self:
        """Subscribe a plain-function listener to ``topic`` messages matching ``expression``.

        Returns:
            This consumer (``with PushConsumer(...).subscribe(...) as c`` starts it).
        """
        self._rt.call(lambda: self._c.subscribe(topic, expression, listener))
        return self

    def start(self) -> None:
        """Join the group and start consuming."""
        self._rt.run(self._c.start())

    def _closing(self) -> Coroutine[Any, Any, object]:
        return self._c.shutdown()

    def shutdown(self) -> None:
        """Commit offsets, leave the group and stop; idempotent."""
        if not self._released:
            try:
                self._rt.run(self._c.shutdown())
            finally:
                self._release()

    close = shutdown

    @property
    def trace_dispatcher(self) -> TraceDispatcher | None:
        """With ``trace=True``, the message-trace dispatcher (its counters); else ``None``."""
        return self._c.trace_dispatcher

    def check_errors(self) -> None:
        """Raise, once, a background failure not handed to ``on_error``."""
        self._rt.call(self._c.check_errors)

    def assignment(self) -> list[MessageQueue]:
        """The queues this consumer owns right now."""
        return self._rt.call(self._c.assignment)

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.shutdown()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()


class _Proxy(_Facade):
    """Blocking wrapper of any async SDK object.

    Coroutine methods block until done; other methods run on the loop thread.
    """

    _close_names = ("close", "shutdown")

    def __init__(self, make: Callable[[], Any]) -> None:
        super().__init__()
        try:
            self._target = self._rt.call(make)
        except BaseException:
            self._release()
            raise

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def blocking(*args: Any, **kwargs: Any) -> Any:
            result = self._rt.call(lambda: attr(*args, **kwargs))
            if asyncio.iscoroutine(result):
                try:
                    result = self._rt.run(result)
                finally:
                    if name in self._close_names:
                        self._release()
            return result

        return blocking

    def _closing(self) -> Coroutine[Any, Any, object]:
        target = self.__dict__["_target"]
        close = getattr(target, "close", None) or target.shutdown
        return close()  # type: ignore[no-any-return]

    def __enter__(self) -> Any:
        # Mirror the async object's own ``async with``: it starts the consumer.
        try:
            self._rt.run(self._target.__aenter__())
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._released:
            return
        try:
            self._rt.run(self._target.__aexit__(*exc_info))
        finally:
            self._release()


class PullConsumer(_Proxy):
    """Blocking :class:`rocklet.client.pull_consumer.PullConsumer`: same methods, blocking.

    ``with PullConsumer(...) as c`` starts it, as ``async with`` does.
    """

    def __init__(self, group: str, namesrv: str = "127.0.0.1:9876", **options: Any) -> None:
        super().__init__(lambda: _pull.PullConsumer(group, namesrv, **options))


class LitePullConsumer(_Proxy):
    """Blocking :class:`rocklet.client.lite_pull_consumer.LitePullConsumer`: same methods, blocking.

    As with the async class, call ``subscribe`` or ``assign``, then ``start`` (or
    ``with consumer:``, which starts it).
    """

    def __init__(self, group: str, namesrv: str = "127.0.0.1:9876", **options: Any) -> None:
        super().__init__(lambda: _lite.LitePullConsumer(group, namesrv, **options))


class Admin(_Facade):
    """Blocking :class:`rocklet.client.admin.Admin` (same arguments and methods)."""

    def __init__(self, namesrv: str = "127.0.0.1:9876", **options: Any) -> None:
        super().__init__()
        try:
            self._a = _admin.Admin(namesrv, **options)
        except BaseException:
            self._release()
            raise

    def start(self) -> None:
        """Join the client instance."""
        self._rt.run(self._a.start())

    def _closing(self) -> Coroutine[Any, Any, object]:
        return self._a.close()

    def close(self) -> None:
        """Release the client instance; idempotent."""
        if not self._released:
            try:
                self._rt.run(self._a.close())
            finally:
                self._release()

    def __enter__(self) -> Admin:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def cluster_info(self) -> ClusterInfo:
        """See :meth:`rocklet.client.admin.Admin.cluster_info`."""
        return self._rt.run(self._a.cluster_info())

    def create_topic(
        self,
        topic: str,
        *,
        cluster: str = "DefaultCluster",
        queue_nums: int = 8,
        perm: int = Perm.READ | Perm.WRITE,
        order: bool = False,
    ) -> list[str]:
        """See :meth:`rocklet.client.admin.Admin.create_topic`."""
        return self._rt.run(
            self._a.create_topic(
                topic, cluster=cluster, queue_nums=queue_nums, perm=perm, order=order
            )
        )

    def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        """See :meth:`rocklet.client.admin.Admin.delete_topic`."""
        self._rt.run(self._a.delete_topic(topic, cluster=cluster))

    def list_topics(self) -> list[str]:
        """See :meth:`rocklet.client.admin.Admin.list_topics`."""
        return self._rt.run(self._a.list_topics())

    def topic_route(self, topic: str) -> TopicRouteData:
        """See :meth:`rocklet.client.admin.Admin.topic_route`."""
        return self._rt.run(self._a.topic_route(topic))

    def topic_stats(self, topic: str) -> dict[MessageQueue, TopicOffset]:
        """See :meth:`rocklet.client.admin.Admin.topic_stats`."""
        return self._rt.run(self._a.topic_stats(topic))

    def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """See :meth:`rocklet.client.admin.Admin.consume_stats`."""
        return self._rt.run(self._a.consume_stats(group, topic))

    def consumer_lag(self, group: str, topic: str | None = None) -> int:
        """See :meth:`rocklet.client.admin.Admin.consumer_lag`."""
        return self._rt.run(self._a.consumer_lag(group, topic))

    def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """See :meth:`rocklet.client.admin.Admin.reset_offset_by_time`."""
        return self._rt.run(self._a.reset_offset_by_time(group, topic, timestamp_ms, force=force))

    def consumer_connections(self, group: str) -> ConsumerConnection:
        """See :meth:`rocklet.client.admin.Admin.consumer_connections`."""
        return self._rt.run(self._a.consumer_connections(group))

    def consumer_running_info(self, group: str, client_id: str) -> ConsumerRunningInfo:
        """See :meth:`rocklet.client.admin.Admin.consumer_running_info`."""
        return self._rt.run(self._a.consumer_running_info(group, client_id))

    def view_message(self, offset_msg_id: str) -> MessageExt:
        """See :meth:`rocklet.client.admin.Admin.view_message`."""
        return self._rt.run(self._a.view_message(offset_msg_id))

    def query_by_key(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = 64,
        begin_ms: int = 0,
        end_ms: int | None = None,
    ) -> list[MessageExt]:
        """See :meth:`rocklet.client.admin.Admin.query_by_key`."""
        return self._rt.run(
            self._a.query_by_key(topic, key, max_num=max_num, begin_ms=begin_ms, end_ms=end_ms)
        )

    def query_by_unique_key(self, topic: str, uniq_key: str) -> MessageExt | None:
        """See :meth:`rocklet.client.admin.Admin.query_by_unique_key`."""
        return self._rt.run(self._a.query_by_unique_key(topic, uniq_key))
