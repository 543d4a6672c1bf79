"""Administration: topics, consumer progress, running info, message lookup, cluster info.

The subset of RocketMQ's ``DefaultMQAdminExt`` (mqadmin) a Python user needs, over the
same requests (docs/protocol.md):

- topics: create on every master of a cluster (UPDATE_AND_CREATE_TOPIC), delete on the
  brokers and the name servers, list (name server), per-queue offset ranges
  (GET_TOPIC_STATS_INFO on every broker of the topic);
- consumer progress and lag (GET_CONSUME_STATS on every broker of the group's retry
  topic), connections (GET_CONSUMER_CONNECTION_LIST), running info
  (GET_CONSUMER_RUNNING_INFO, which the broker relays to the client, with its stacks
  when asked) and the offsets the members hold in memory
  (INVOKE_BROKER_TO_GET_CONSUMER_STATUS, which the broker asks each member for);
- messages: by key (QUERY_MESSAGE on every broker of the topic, filtered client-side
  because the broker's index is a hash index), by UNIQ_KEY, and by offset msgId
  (VIEW_MESSAGE_BY_ID to the host encoded in the id);
- a consume queue's raw entries (QUERY_CONSUME_QUEUE, ``mqadmin queryCq``);
- cluster info (GET_BROKER_CLUSTER_INFO).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from rocklet.client.admin_reset import reset_offline
from rocklet.client.arguments import check_offset, check_topic
from rocklet.client.errors import (
    BrokerError,
    ClientError,
    ClientStateError,
    ConsumerNotOnlineError,
    NoRouteError,
    NotANameServerError,
    error_for_code,
)
from rocklet.client.instance import ClientInstance, get_instance
from rocklet.client.message import MessageExt
from rocklet.client.namesrv import NameServers
from rocklet.client.tls import TlsOption
from rocklet.protocol.acl import Credentials
from rocklet.protocol.bodies.cluster import ClusterInfo, TopicList
from rocklet.protocol.bodies.consumer import GetConsumerStatusBody, ResetOffsetBody
from rocklet.protocol.bodies.maintenance import QueryConsumeQueueResponseBody
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.route import Perm, TopicRouteData
from rocklet.protocol.bodies.running import ConsumerConnection, ConsumerRunningInfo
from rocklet.protocol.bodies.stats import ConsumeStats, OffsetWrapper, TopicOffset, TopicStatsTable
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import ProtocolError
from rocklet.protocol.headers.admin import (
    MAX_QUEUE_NUMS,
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryConsumeQueueRequestHeader,
)
from rocklet.protocol.headers.base import Header
from rocklet.protocol.headers.consumer import (
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetConsumeStatsRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    ResetOffsetRequestHeader,
)
from rocklet.protocol.headers.namesrv import DeleteTopicFromNamesrvRequestHeader
from rocklet.protocol.headers.query import QueryMessageRequestHeader, ViewMessageRequestHeader
from rocklet.protocol.message import iter_messages
from rocklet.protocol.message_id import parse_offset_msg_id
from rocklet.protocol.names import retry_topic
from rocklet.protocol.properties import Prop

__all__ = ["Admin", "QueueIndexError"]

T = TypeVar("T")
#: How long to wait for INVOKE_BROKER_TO_GET_CONSUMER_STATUS at least: the broker gives
#: each member 5 s, so a silent one must not make the admin give up first.
_CONSUMER_STATUS_WAIT_S = 8.0
#: The topic :meth:`Admin.check_name_server` asks the route of (every broker has it).
_PROBE_TOPIC = "TBW102"


class QueueIndexError(ClientError, IndexError):
    """A consume queue has no entry at the index asked (:meth:`Admin.query_consume_queue`).

    The index is below the queue's first one still stored, or at or past its end.

    Attributes:
        topic: The topic.
        queue_id: The queue.
        index: The index asked.
        remark: The broker's words (``Index 1000 of 1@demo is not exist!``).
        min_offset: The queue's first index still stored; ``None`` when unknown.
        max_offset: The index the next message gets; ``None`` when unknown.
    """

    def __init__(
        self,
        topic: str,
        queue_id: int,
        index: int,
        remark: str | None,
        min_offset: int | None = None,
        max_offset: int | None = None,
    ) -> None:
        what = f"index {index} of queue {queue_id} of {topic} does not exist"
        if min_offset is None or max_offset is None:
            why = f"the broker says: {remark}" if remark else "the broker has no entry there"
        elif max_offset <= min_offset:
            why = f"the queue is empty; its next index is {max_offset}"
        else:
            why = f"the queue holds indexes {min_offset} to {max_offset - 1}"
        super().__init__(f"{what} ({why})")
        self.topic = topic
        self.queue_id = queue_id
        self.index = index
        self.remark = remark
        self.min_offset = min_offset
        self.max_offset = max_offset


class Admin:
    """Administrative calls against a name server and its brokers.

    Use as an async context manager, or call :meth:`start` and :meth:`close`.

    Args:
        namesrv: Name server address(es). Default: ``"127.0.0.1:9876"``.
        instance_name: Client instance to share. Default: ``"DEFAULT"``.
        timeout_s: Timeout of each request. Default: 5.0.
        tls: TLS to name servers and brokers: ``True`` (verified against the
            system's CAs) or an :class:`ssl.SSLContext`
            (:func:`rocklet.client.tls_context`). Default: plain TCP.
        credentials: Sign requests with this ACL account. Default: unsigned.
    """

    def __init__(
        self,
        namesrv: str = "127.0.0.1:9876",
        *,
        instance_name: str = "DEFAULT",
        timeout_s: float = 5.0,
        tls: TlsOption = None,
        credentials: Credentials | None = None,
    ) -> None:
        self.namesrv = namesrv
        self._tls = tls
        self.credentials = credentials
        self._instance_name = instance_name
        self._timeout_s = timeout_s
        self._instance: ClientInstance | None = None

    async def start(self) -> None:
        """Join the client instance; idempotent."""
        if self._instance is None:
            instance = get_instance(
                self.namesrv, self._instance_name, tls=self._tls, credentials=self.credentials
            )
            try:
                await instance.start()
            except BaseException:
                await instance.release()
                raise
            self._instance = instance

    async def close(self) -> None:
        """Release the client instance; idempotent."""
        instance, self._instance = self._instance, None
        if instance is not None:
            await instance.release()

    async def __aenter__(self) -> Admin:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def _inst(self) -> ClientInstance:
        if self._instance is None:
            raise ClientStateError("the admin client is not started")
        return self._instance

    # -- plumbing -----------------------------------------------------------------

    async def _call(
        self,
        addr: str,
        code: int,
        header: Header | None = None,
        body: bytes = b"",
        *,
        timeout_s: float | None = None,
    ) -> RemotingCommand:
        cmd = RemotingCommand(
            code, ext_fields={} if header is None else header.to_ext_fields(), body=body
        )
        wait = self._timeout_s if timeout_s is None else timeout_s
        answer = await self._inst.invoke(addr, cmd, wait)
        if answer.code != ResponseCode.SUCCESS:
            raise error_for_code(answer.code, answer.remark, addr=addr)
        return answer

    async def _namesrv(self, code: int, header: Header | None = None) -> RemotingCommand:
        cmd = RemotingCommand(code, ext_fields={} if header is None else header.to_ext_fields())
        answer = await self._inst.invoke_namesrv(cmd, self._timeout_s)
        if answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            await self.check_name_server()
        if answer.code != ResponseCode.SUCCESS:
            raise error_for_code(answer.code, answer.remark)
        return answer

    async def check_name_server(self, addr: str | None = None) -> None:
        """Raise :class:`NotANameServerError` when a name server address is a broker's.

        Asks the route query producers ask (:meth:`NameServers.fetch_route
        <rocklet.client.namesrv.NameServers.fetch_route>`), which a broker refuses with
        REQUEST_CODE_NOT_SUPPORTED. Worth calling when a name server request was
        refused with that code: a broker given as the name server refuses every
        name-server request so.

        Args:
            addr: The address to check. Default: every configured name server.

        Raises:
            NotANameServerError: The address (the first such one) is a broker.
        """
        for one in (addr,) if addr is not None else self._inst.name_servers.addrs:
            try:
                await NameServers(one, self._inst.invoke).fetch_route(_PROBE_TOPIC)
            except NotANameServerError:
                raise
            except (ClientError, ProtocolError):  # unreachable, or another answer: not that
                continue

    async def _route(self, topic: str) -> TopicRouteData:
        route = await self._inst.topic_route(topic, refresh=True)
        if route is None:
            raise NoRouteError(topic)
        return route

    @staticmethod
    async def _each(addrs: list[str], call: Callable[[str], Awaitable[T]]) -> list[T]:
        return list(await asyncio.gather(*(call(a) for a in addrs)))

    # -- cluster and topics -------------------------------------------------------

    async def cluster_info(self) -> ClusterInfo:
        """Every broker group and cluster the name server knows (GET_BROKER_CLUSTER_INFO)."""
        answer = await self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
        return ClusterInfo.from_json(answer.body)

    async def _cluster_masters(self, cluster: str | None) -> list[str]:
        info = await self.cluster_info()
        names: set[str] = set()
        for name, members in info.cluster_addr_table.items():
            if cluster is None or name == cluster:
                names.update(members)
        if cluster is not None and cluster not in info.cluster_addr_table:
            raise NoRouteError(cluster, "no such cluster")
        addrs = [info.broker_addr_table[n].master_addr for n in sorted(names)]
        return [a for a in addrs if a is not None]

    async def create_topic(
        self,
        topic: str,
        *,
        cluster: str = "DefaultCluster",
        queue_nums: int = 8,
        perm: int = Perm.READ | Perm.WRITE,
        order: bool = False,
    ) -> list[str]:
        """Create (or update) a topic on every master of a cluster.

        Args:
            topic: The topic.
            cluster: Cluster name. Default: ``"DefaultCluster"``.
            queue_nums: Read and write queue count per broker, 1 to 1024. Default: 8.
            perm: Permission bits. Default: read + write.
            order: Mark the topic ordered.

        Returns:
            The broker addresses that created it.

        Raises:
            ValueError: The topic name is invalid, or ``queue_nums`` is out of range.
            NoRouteError: The cluster is unknown.
            BrokerError: A broker refused.
        """
        check_topic(topic)
        check_offset(queue_nums, "queue_nums", 1, MAX_QUEUE_NUMS)
        header = CreateTopicRequestHeader(
            topic=topic,
            default_topic="TBW102",
            read_queue_nums=queue_nums,
            write_queue_nums=queue_nums,
            perm=int(perm),
            order=order,
        )
        addrs = await self._cluster_masters(cluster)
        await self._each(
            addrs, lambda a: self._call(a, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
        )
        return addrs

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        """Delete a topic on the brokers of ``cluster`` (all when ``None``) and the name servers.

        Raises:
            BrokerError: A broker or name server refused.
        """
        addrs = await self._cluster_masters(cluster)
        header = DeleteTopicRequestHeader(topic)
        await self._each(addrs, lambda a: self._call(a, RequestCode.DELETE_TOPIC_IN_BROKER, header))
        await self._namesrv(
            RequestCode.DELETE_TOPIC_IN_NAMESRV, DeleteTopicFromNamesrvRequestHeader(topic, cluster)
        )

    async def list_topics(self) -> list[str]:
        """Every topic the name server knows, sorted (GET_ALL_TOPIC_LIST_FROM_NAMESERVER)."""
        answer = await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return sorted(TopicList.from_json(answer.body).topic_list)

    async def topic_route(self, topic: str) -> TopicRouteData:
        """A topic's current route.

        Raises:
            NoRouteError: The name server does not know the topic.
        """
        return await self._route(topic)

    async def topic_stats(self, topic: str) -> dict[MessageQueue, TopicOffset]:
        """Offset range of every queue of a topic, over all its brokers.

        Raises:
            NoRouteError: The topic is unknown.
            BrokerError: A broker refused.
        """
        route = await self._route(topic)
        addrs = [a for b in route.broker_datas if (a := b.any_addr) is not None]
        header = GetTopicStatsInfoRequestHeader(topic)
        answers = await self._each(
            addrs, lambda a: self._call(a, RequestCode.GET_TOPIC_STATS_INFO, header)
        )
        table: dict[MessageQueue, TopicOffset] = {}
        for answer in answers:
            table.update(TopicStatsTable.from_json(answer.body).offset_table)
        return dict(sorted(table.items()))

    # -- consumers ----------------------------------------------------------------

    async def _group_brokers(self, group: str) -> list[str]:
        try:
            route = await self._route(retry_topic(group))
        except NoRouteError:  # a group's brokers are those of its retry topic
            raise NoRouteError(
                retry_topic(group),
                f"consumer group {group!r} is unknown: no consumer of it ever connected",
            ) from None
        return sorted({a for b in route.broker_datas if (a := b.any_addr) is not None})

    async def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """A consumer group's progress per queue, over every broker it consumes from.

        Args:
            group: Consumer group.
            topic: Limit to one topic.

        Returns:
            The merged stats; ``total_diff`` is the lag in messages.

        Raises:
            NoRouteError: The group never consumed (no retry topic route).
            BrokerError: A broker refused.
        """
        header = GetConsumeStatsRequestHeader(group, topic)
        answers = await self._each(
            await self._group_brokers(group),
            lambda a: self._call(a, RequestCode.GET_CONSUME_STATS, header),
        )
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for answer in answers:
            stats = ConsumeStats.from_json(answer.body)
            table.update(stats.offset_table)
            tps += stats.consume_tps
        return ConsumeStats(dict(sorted(table.items())), tps)

    async def consumer_lag(self, group: str, topic: str | None = None) -> int:
        """Messages the group has not consumed yet (sum over queues)."""
        return (await self.consume_stats(group, topic)).total_diff

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Move a group's offsets on a topic to the first message stored at ``timestamp_ms``.

        Each broker of the topic commits the new offsets and tells the group's online
        consumers (RESET_CONSUMER_CLIENT_OFFSET), as ``mqadmin resetOffsetByTime`` does.
        A broker with none of the group's consumers online answers CONSUMER_NOT_ONLINE;
        the offsets on it are then committed from here, queue by queue, as the tool
        falls back to (:func:`rocklet.client.admin_reset.reset_offline`).

        Args:
            group: Consumer group.
            topic: Topic.
            timestamp_ms: Store time to rewind (or advance) to; ``-1`` means the end.
            force: Also move offsets forward. Default: ``True``.

        Returns:
            The new offset of every queue.

        Raises:
            NoRouteError: The topic is unknown.
            BrokerError: A broker refused (e.g. the group is unknown there).
        """
        route = await self._route(topic)
        addrs = [a for b in route.broker_datas if (a := b.master_addr) is not None]
        header = ResetOffsetRequestHeader(topic, group, timestamp_ms, force)

        async def one(addr: str) -> dict[MessageQueue, int]:
            try:
                answer = await self._call(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
            except ConsumerNotOnlineError:
                call = self._call
                return await reset_offline(call, addr, group, topic, timestamp_ms, force=force)
            return dict(ResetOffsetBody.from_json(answer.body).offset_table)

        table: dict[MessageQueue, int] = {}
        for part in await self._each(addrs, one):
            table.update(part)
        return dict(sorted(table.items()))

    async def _group_or_given(self, group: str, broker_addr: str | None) -> list[str]:
        return [broker_addr] if broker_addr else await self._group_brokers(group)

    async def consumer_connections(
        self, group: str, *, broker_addr: str | None = None
    ) -> ConsumerConnection:
        """The group's connected clients and subscriptions (from one of its brokers).

        Args:
            group: Consumer group.
            broker_addr: Ask this broker only. Default: the brokers of the group's
                retry topic, until one answers.

        Raises:
            ConsumerNotOnlineError: No consumer of the group is connected.
        """
        header = GetConsumerConnectionListRequestHeader(group)
        last: BrokerError | None = None
        for addr in await self._group_or_given(group, broker_addr):
            try:
                answer = await self._call(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, header)
            except BrokerError as exc:
                last = exc
                continue
            return ConsumerConnection.from_json(answer.body)
        assert last is not None
        raise last

    async def consumer_running_info(
        self,
        group: str,
        client_id: str,
        *,
        jstack: bool = False,
        broker_addr: str | None = None,
    ) -> ConsumerRunningInfo:
        """A consumer's own report (queues, process-queue state, subscriptions).

        The broker relays the request to the client and returns its answer.

        Args:
            group: Consumer group.
            client_id: The member.
            jstack: Ask for the client's stacks too (``jstack``: a Java client's
                threads, a Rocklet client's threads and asyncio tasks).
            broker_addr: Ask through this broker only. Default: the brokers of the
                group's retry topic, until one answers.

        Raises:
            BrokerError: The broker refused or the client did not answer.
        """
        header = GetConsumerRunningInfoRequestHeader(group, client_id, jstack)
        last: BrokerError | None = None
        for addr in await self._group_or_given(group, broker_addr):
            try:
                answer = await self._call(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, header)
            except BrokerError as exc:
                last = exc
                continue
            return ConsumerRunningInfo.from_json(answer.body)
        assert last is not None
        raise last

    async def consume_status(
        self, topic: str, group: str, client_id: str | None = None
    ) -> dict[str, dict[MessageQueue, int]]:
        """The offsets of ``topic`` each online member of ``group`` holds in memory.

        Each master of the topic's route asks the members connected to it
        (INVOKE_BROKER_TO_GET_CONSUMER_STATUS, ``mqadmin getConsumerStatus``); their
        answers are merged per client. A member that does not answer within the
        broker's 5 s is left out. The offsets are the client's own, ahead of what
        it committed to the broker (``consume_stats``) by up to its commit interval.

        Args:
            topic: The topic.
            group: Consumer group.
            client_id: Only this member. Default: every member.

        Returns:
            Client id to queue to offset, both sorted.

        Raises:
            NoRouteError: The topic is unknown.
            BrokerError: Every broker refused (e.g. no member of the group online);
                a broker that refuses while another answers is left out.
            BodyError: A broker's answer is malformed.
        """
        route = await self._route(topic)
        addrs = sorted({a for b in route.broker_datas if (a := b.master_addr) is not None})
        header = GetConsumerStatusRequestHeader(topic, group, client_id)
        wait = max(self._timeout_s, _CONSUMER_STATUS_WAIT_S)

        async def one(addr: str) -> GetConsumerStatusBody | BrokerError:
            try:
                answer = await self._call(
                    addr, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, header, timeout_s=wait
                )
            except BrokerError as exc:
                return exc
            return GetConsumerStatusBody.from_json(answer.body)

        merged: dict[str, dict[MessageQueue, int]] = {}
        failures: list[BrokerError] = []
        for result in await self._each(addrs, one):
            if isinstance(result, BrokerError):
                failures.append(result)
                continue
            for client, table in result.consumer_table.items():
                merged.setdefault(client, {}).update(table)
        if failures and len(failures) == len(addrs):
            raise failures[0]
        return {c: dict(sorted(t.items())) for c, t in sorted(merged.items())}

    async def query_consume_queue(
        self,
        broker_addr: str,
        topic: str,
        queue_id: int,
        index: int,
        count: int,
        consumer_group: str | None = None,
    ) -> QueryConsumeQueueResponseBody:
        """Raw consume-queue entries of one queue from ``index`` on (QUERY_CONSUME_QUEUE).

        Args:
            broker_addr: The broker holding the queue.
            topic: The topic.
            queue_id: The queue.
            index: The first queue offset.
            count: Most entries.
            consumer_group: Also report this group's subscription of the topic.

        Raises:
            QueueIndexError: No entry at ``index``. RocketMQ 4.9.4's broker (and
                Rocklet's) answers that SUCCESS without a body, the remark saying
                ``Index I of Q@T is not exist!``; the queue's bounds are then asked for
                (GET_MIN_OFFSET, GET_MAX_OFFSET) to say which indexes exist.
            BrokerError: The broker refused (SYSTEM_ERROR: it has no such queue).
            BodyError: The answer's body is malformed.
        """
        header = QueryConsumeQueueRequestHeader(topic, queue_id, index, count, consumer_group)
        answer = await self._call(broker_addr, RequestCode.QUERY_CONSUME_QUEUE, header)
        if answer.body:
            return QueryConsumeQueueResponseBody.from_json(answer.body)
        low = await self._queue_bound(broker_addr, topic, queue_id, max_offset=False)
        high = await self._queue_bound(broker_addr, topic, queue_id, max_offset=True)
        raise QueueIndexError(topic, queue_id, index, answer.remark, low, high)

    async def _queue_bound(
        self, addr: str, topic: str, queue_id: int, *, max_offset: bool
    ) -> int | None:
        """A queue's min or max offset, ``None`` when it cannot be had."""
        try:
            if max_offset:
                header: Header = GetMaxOffsetRequestHeader(topic, queue_id)
                code = RequestCode.GET_MAX_OFFSET
            else:
                header = GetMinOffsetRequestHeader(topic, queue_id)
                code = RequestCode.GET_MIN_OFFSET
            answer = await self._call(addr, code, header)
            return int(answer.ext_fields["offset"])
        except (ClientError, ProtocolError, KeyError, ValueError):
            return None

    # -- messages -----------------------------------------------------------------

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message an offset msgId names, from the broker encoded in the id.

        Its ``broker_name`` is the name the name server registers for that address
        (``""`` when none does), as :meth:`query_by_unique_key` gives it from the route.

        Raises:
            MessageFormatError: Not a 32-hex-digit offset msgId.
            BrokerError: The broker has no message there.
        """
        where = parse_offset_msg_id(offset_msg_id)
        addr = f"{where.host}:{where.port}"
        answer = await self._call(
            addr, RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(where.offset)
        )
        return next(_decode(answer.body, await self._broker_name_at(addr)))

    async def _broker_name_at(self, addr: str) -> str:
        """The broker name registered for ``addr`` (a master or a slave), else ``""``."""
        try:
            info = await self.cluster_info()
        except (ClientError, ProtocolError):  # the name is a nicety: the message is found
            return ""
        for name, data in sorted(info.broker_addr_table.items()):
            if addr in data.broker_addrs.values():
                return name
        return ""

    async def query_by_key(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = 64,
        begin_ms: int = 0,
        end_ms: int | None = None,
    ) -> list[MessageExt]:
        """Messages of ``topic`` with ``key`` among their KEYS, from every broker.

        Args:
            topic: The topic.
            key: One key.
            max_num: Most messages per broker. Default: 64.
            begin_ms: Earliest store time. Default: 0.
            end_ms: Latest store time. Default: now.

        Returns:
            The matches, oldest first.

        Raises:
            NoRouteError: The topic is unknown.
        """
        return await self._query(topic, key, max_num, begin_ms, end_ms, unique=False)

    async def query_by_unique_key(self, topic: str, uniq_key: str) -> MessageExt | None:
        """The message whose UNIQ_KEY (``SendResult.msg_id``) is ``uniq_key``, if found."""
        found = await self._query(topic, uniq_key, 32, 0, None, unique=True)
        return found[0] if found else None

    async def _query(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int | None, *, unique: bool
    ) -> list[MessageExt]:
        route = await self._route(topic)
        end = self._inst.clock.now_ms() if end_ms is None else end_ms
        header = QueryMessageRequestHeader(topic, key, max_num, begin_ms, end, unique)

        async def one(addr: str, broker_name: str) -> list[MessageExt]:
            try:
                answer = await self._call(addr, RequestCode.QUERY_MESSAGE, header)
            except BrokerError as exc:
                if exc.response_code == ResponseCode.QUERY_NOT_FOUND:
                    return []
                raise
            return list(_decode(answer.body, broker_name))

        pairs = [(a, b.broker_name) for b in route.broker_datas if (a := b.master_addr)]
        found = [m for batch in await asyncio.gather(*(one(*p) for p in pairs)) for m in batch]
        # The index is a hash index: drop other keys that share the slot (as Java does).
        if unique:
            found = [m for m in found if m.properties.get(Prop.UNIQ_KEY) == key]
        else:
            found = [m for m in found if key in m.keys]
        return sorted(found, key=lambda m: (m.store_timestamp, m.commit_log_offset))


def _decode(body: bytes, broker_name: str = "") -> Iterator[MessageExt]:
    for stored in iter_messages(body):
        yield MessageExt.from_stored(stored, broker_name=broker_name)
