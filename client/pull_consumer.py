"""Pull consumers: drive the offsets yourself, or poll a prefetched feed.

* :class:`PullConsumer` (``DefaultMQPullConsumer``): list a topic's queues, then
  ``await pull(mq, offset, max_nums)``; nothing happens in the background. Offsets
  are yours; :meth:`PullConsumer.commit` stores one on the broker if you want the
  group's progress to be visible (or resumable).
* :class:`LitePullConsumer` (``DefaultLitePullConsumer``): :meth:`~LitePullConsumer.subscribe`
  to topics (queues shared with the group by rebalance, as a push consumer) or
  :meth:`~LitePullConsumer.assign` queues yourself, then ``await poll()``. One task per
  queue long-polls into a ProcessQueue (bounded by ``max_cached_messages``); ``poll``
  returns what is ready. ``seek`` moves a queue; ``commit`` stores the position after
  the last polled message of each queue (sync); with ``auto_commit`` that happens every
  ``auto_commit_interval_s`` during ``poll`` and at shutdown.

Both talk to brokers through the shared :class:`~rocklet.client.instance.ClientInstance`.
"""

from __future__ import annotations

from rocklet.client.arguments import check_offset, check_topic
from rocklet.client.consumer_status import ConsumerStatus
from rocklet.client.instance import ClientInstance
from rocklet.client.lite_pull_consumer import LitePullConsumer
from rocklet.client.pull_api import (
    PullResult,
    PullStatus,
    RawPullResult,
    pull_request,
    read_pull_response,
    read_pull_response_raw,
)
from rocklet.client.pull_base import PullConsumerBase
from rocklet.client.rebalance import subscription
from rocklet.client.selector import MessageSelector, as_selector
from rocklet.client.tls import TlsOption
from rocklet.protocol.acl import Credentials
from rocklet.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
)
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.running import ConsumerRunningInfo
from rocklet.protocol.command import RemotingCommand

__all__ = ["LitePullConsumer", "PullConsumer", "PullResult", "PullStatus"]


class PullConsumer(PullConsumerBase):
    """Pull messages from queues you choose, at offsets you keep.

    Args:
        group: The consumer group (pulls need one; offsets are stored under it only
            when you :meth:`commit`).
        namesrv: Name server address(es).
        pull_timeout_ms: Request timeout of a pull. Default: 10000 (the C++ client's).
        instance_name: Client instance name. Default: ``"DEFAULT"``.
        instance: Use this client instance instead of the shared one.
        tls: TLS to name servers and brokers: ``True`` (verified against the
            system's CAs) or an :class:`ssl.SSLContext`
            (:func:`rocklet.client.tls_context`). Default: plain TCP.
        credentials: Sign requests with this ACL account. Default: unsigned.
    """

    def __init__(
        self,
        group: str,
        namesrv: str = "127.0.0.1:9876",
        *,
        pull_timeout_ms: int = 10000,
        instance_name: str = "DEFAULT",
        instance: ClientInstance | None = None,
        tls: TlsOption = None,
        credentials: Credentials | None = None,
    ) -> None:
        super().__init__(group, namesrv, instance_name, instance, "last", tls, credentials)
        self._timeout_s = pull_timeout_ms / 1000
        # Topic -> when it was first pulled: the version of its subscription.
        self._topics: dict[str, int] = {}

    async def start(self) -> None:
        """Join the client instance (idempotent once running)."""
        if self._status is ConsumerStatus.RUNNING:
            return
        await self._start_instance(self)

    async def shutdown(self) -> None:
        """Leave the group; idempotent.

        Raises:
            ClientStateError: Called from another event loop than the consumer's.
        """
        if self._status is ConsumerStatus.RUNNING:
            self._live()
            self._status = ConsumerStatus.CLOSING
            await self._stop_instance()
        self._status = ConsumerStatus.CLOSED

    async def __aenter__(self) -> PullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    async def pull(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        *,
        expression: str | MessageSelector = "*",
        long_poll_ms: int = 0,
    ) -> PullResult:
        """Pull up to ``max_nums`` messages of ``mq`` from ``offset``.

        Args:
            mq: The queue.
            offset: The first queue offset wanted.
            max_nums: Most messages (the broker caps it too).
            expression: Tag expression (the broker and this client both filter) or
                ``MessageSelector.by_sql(...)`` (the broker filters; it needs
                ``enablePropertyFilter=true``).
            long_poll_ms: Let the broker hold the pull this long when the queue has
                nothing new (0: answer at once). Default: 0.

        Returns:
            The status, the messages and where the next pull starts.

        Raises:
            ValueError: ``offset`` or ``long_poll_ms`` is not an int of at least 0,
                ``max_nums`` not one of at least 1, or the topic is not a valid name.
            ClientStateError: Not running, or called from another event loop.
            BrokerError: The broker refused the pull.
            TransportError: The broker could not be reached in time.
            NoRouteError: The queue's broker is unknown.
        """
        check_offset(long_poll_ms, "long_poll_ms")
        selector = as_selector(expression)
        addr, answer = await self._pull_answer(mq, offset, max_nums, selector, long_poll_ms)
        return read_pull_response(answer, mq.broker_name, tags=selector.tags(), addr=addr)

    async def pull_raw(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        *,
        expression: str | MessageSelector = "*",
    ) -> RawPullResult:
        """Pull as :meth:`pull` does, but return the stored records undecoded.

        For callers that decode records themselves. With a tag expression the broker
        filters by tag hash, which collides: the caller must re-check each record's
        TAGS against the expression (:func:`rocklet.protocol.filter.parse_tag_expression`).
        An SQL92 selector the broker applies in full.

        Args:
            mq: The queue.
            offset: The first queue offset wanted.
            max_nums: Most messages (the broker caps it too).
            expression: Tag expression, or ``MessageSelector.by_sql(...)``.

        Returns:
            The status, the raw records and where the next pull starts.

        Raises:
            ValueError: ``offset`` is not an int of at least 0, ``max_nums`` not one
                of at least 1, or the topic is not a valid name.
            ClientStateError: Not running, or called from another event loop.
            BrokerError: The broker refused the pull.
            TransportError: The broker could not be reached in time.
            NoRouteError: The queue's broker is unknown.
        """
        selector = as_selector(expression)
        addr, answer = await self._pull_answer(mq, offset, max_nums, selector, 0)
        return read_pull_response_raw(answer, addr=addr)

    async def _pull_answer(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int,
        selector: MessageSelector,
        long_poll_ms: int,
    ) -> tuple[str, RemotingCommand]:
        """Send one PULL_MESSAGE of ``mq``; the broker that answered and its answer."""
        check_offset(offset)
        check_offset(max_nums, "max_nums", 1)
        instance = self._live()
        if mq.topic not in self._topics:
            # Heartbeats name every topic pulled: one brokers refuse would get the
            # heartbeat of every group of the client instance refused.
            check_topic(mq.topic, self.group)
            self._topics[mq.topic] = instance.clock.now_ms()
        cmd = pull_request(
            self.group,
            mq,
            offset,
            max_nums,
            subscription=selector.expression,
            suspend_ms=long_poll_ms,
            expression_type=selector.expression_type,
        )
        return await self._pull_somewhere(mq, cmd, self._timeout_s + long_poll_ms / 1000)

    async def commit(self, mq: MessageQueue, offset: int) -> None:
        """Store ``offset`` as the group's position in ``mq`` on the broker (sync).

        Raises:
            ValueError: ``offset`` is not an int of at least 0.
            ClientStateError: Not running, or called from another event loop.
            BrokerError: The broker refused.
            TransportError: The broker could not be reached.
        """
        assert self._offsets is not None
        check_offset(offset)
        self._live()
        self._offsets.update(mq, offset, increase_only=False)
        await self._offsets.persist([mq])

    def consumer_data(self) -> ConsumerData:
        """The group's registration (pull consumers consume actively)."""
        return ConsumerData(
            self.group,
            ConsumeType.CONSUME_ACTIVELY,
            MessageModel.CLUSTERING,
            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            tuple(subscription(t, "*", v) for t, v in sorted(self._topics.items())),
        )

    async def running_info(self) -> ConsumerRunningInfo:
        """A minimal self-description (pull consumers keep no queue state)."""
        return ConsumerRunningInfo(
            properties={"PROP_CONSUME_TYPE": ConsumeType.CONSUME_ACTIVELY.name},
            subscription_set=self.consumer_data().subscription_data_set,
        )
