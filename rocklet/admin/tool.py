"""The calls ``rocklet admin`` makes: the SDK's admin client plus a few more.

:class:`~rocklet.client.admin.Admin` covers topics, consumer progress, running info and
message lookups. mqadmin also targets single brokers (``-b``), manages subscription
groups, reads broker runtime info and pulls a message by queue offset; those requests
are sent here through the same shared client instance (``get_instance`` with the
admin's instance name), as RocketMQ's ``DefaultMQAdminExtImpl`` does through its
``MQClientInstance``.
"""

from __future__ import annotations

import dataclasses
import json
import ssl
from typing import Any, Final

from rocklet.client.admin import Admin
from rocklet.client.errors import ClientError, NoRouteError, error_for_code
from rocklet.client.instance import ClientInstance, get_instance
from rocklet.client.message import MessageExt
from rocklet.client.pull_api import PullResult, PullStatus, pull_request, read_pull_response
from rocklet.protocol.acl import Credentials
from rocklet.protocol.bodies.cluster import ClusterInfo, KVTable, TopicList
from rocklet.protocol.bodies.queue import MessageQueue
from rocklet.protocol.bodies.subscription_group import SubscriptionGroupConfig
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.filter import parse_tag_expression
from rocklet.protocol.headers.admin import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
)
from rocklet.protocol.headers.base import Header
from rocklet.protocol.headers.consumer import (
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocklet.protocol.headers.namesrv import GetTopicsByClusterRequestHeader

__all__ = ["INSTANCE_NAME", "TOOLS_CONSUMER_GROUP", "AdminTool", "TargetError"]

#: The client instance the admin tool uses (kept apart from an application's own).
INSTANCE_NAME: Final = "rocklet-admin"
#: ``MixAll.TOOLS_CONSUMER_GROUP``: the group mqadmin pulls with.
TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"


class TargetError(ClientError):
    """The command names a cluster or broker the name server does not know."""


class AdminTool:
    """An :class:`Admin` and the shared client instance behind it.

    Use as an async context manager.

    Args:
        namesrv: Name server address(es), ``host:port`` joined by ``;``.
        timeout_s: Timeout of each request.
        tls: TLS context of the connections; ``None``: plain TCP.
        credentials: Sign requests with this ACL account; ``None``: unsigned.
    """

    def __init__(
        self,
        namesrv: str,
        timeout_s: float,
        tls: ssl.SSLContext | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self.admin = Admin(
            namesrv,
            instance_name=INSTANCE_NAME,
            timeout_s=timeout_s,
            tls=tls,
            credentials=credentials,
        )
        self._tls = tls
        self._credentials = credentials
        self._namesrv = namesrv
        self._timeout_s = timeout_s
        self._instance: ClientInstance | None = None

    async def __aenter__(self) -> AdminTool:
        await self.admin.start()
        # The admin's instance, one more ref.
        self._instance = get_instance(
            self._namesrv, INSTANCE_NAME, tls=self._tls, credentials=self._credentials
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        instance, self._instance = self._instance, None
        if instance is not None:
            await instance.release()
        await self.admin.close()

    @property
    def instance(self) -> ClientInstance:
        """The client instance (only inside ``async with``)."""
        assert self._instance is not None, "use AdminTool in 'async with'"
        return self._instance

    @property
    def namesrv_addrs(self) -> list[str]:
        """Every name server ``-n`` names (some verbs visit each, as mqadmin does)."""
        return [a.strip() for a in self._namesrv.replace(",", ";").split(";") if a.strip()]

    async def call(
        self,
        addr: str,
        code: int,
        header: Header | None = None,
        body: bytes = b"",
        *,
        language: str | None = None,
    ) -> RemotingCommand:
        """Send one request to a broker (or a name server) and return a successful answer.

        Args:
            addr: ``host:port``.
            code: Request code.
            header: Custom header.
            body: Body bytes.
            language: Send as this client language (``"CPP"``) instead of ours.

        Raises:
            BrokerError: The server answered with an error code.
            NotANameServerError: ``addr`` is one of ``-n``'s and is a broker.
            TransportError: The server cannot be reached.
        """
        ext = {} if header is None else header.to_ext_fields()
        cmd = RemotingCommand(code, ext_fields=ext, body=body)
        if language is not None:
            cmd = dataclasses.replace(cmd, language=language)
        answer = await self.instance.invoke(addr, cmd, self._timeout_s)
        if answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and addr in self.namesrv_addrs:
            await self.admin.check_name_server(addr)
        if answer.code != ResponseCode.SUCCESS:
            raise error_for_code(answer.code, answer.remark, addr=addr)
        return answer

    async def targets(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        """The master addresses a ``-b`` / ``-c`` option names (``-b`` wins, as in mqadmin).

        Raises:
            TargetError: The cluster is unknown or has no master registered.
        """
        if broker_addr:
            return [broker_addr]
        if cluster is None:
            raise TargetError("name a broker with -b or a cluster with -c")
        info = await self.admin.cluster_info()
        if cluster not in info.cluster_addr_table:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise TargetError(f"cluster {cluster!r} is unknown to the name server (known: {known})")
        masters = _masters(info, cluster)
        if not masters:
            raise TargetError(f"cluster {cluster!r} has no master broker registered")
        return masters

    async def create_topic(self, addrs: list[str], header: CreateTopicRequestHeader) -> None:
        """UPDATE_AND_CREATE_TOPIC on each broker."""
        for addr in addrs:
            await self.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)

    async def update_group(self, addrs: list[str], config: SubscriptionGroupConfig) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on each broker."""
        for addr in addrs:
            await self.call(
                addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=config.to_json()
            )

    async def delete_group(self, addrs: list[str], group: str, remove_offset: bool) -> None:
        """DELETE_SUBSCRIPTIONGROUP on each broker."""
        header = DeleteSubscriptionGroupRequestHeader(group, remove_offset)
        for addr in addrs:
            await self.call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, header)

    async def runtime_info(self, addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the broker's runtime facts."""
        answer = await self.call(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return dict(sorted(KVTable.from_json(answer.body).table.items()))

    async def store_check(self, addr: str) -> dict[str, Any]:
        """ROCKLET_STORE_CHECK: the broker's check of its own store files."""
        answer = await self.call(addr, RequestCode.ROCKLET_STORE_CHECK)
        report: dict[str, Any] = json.loads(answer.body)
        return report

    async def topics_of_cluster(self, cluster: str) -> list[str]:
        """GET_TOPICS_BY_CLUSTER from the name server."""
        cmd = RemotingCommand(
            RequestCode.GET_TOPICS_BY_CLUSTER,
            ext_fields=GetTopicsByClusterRequestHeader(cluster).to_ext_fields(),
        )
        answer = await self.instance.invoke_namesrv(cmd, self._timeout_s)
        if answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            await self.admin.check_name_server()
        if answer.code != ResponseCode.SUCCESS:
            raise error_for_code(answer.code, answer.remark)
        return sorted(TopicList.from_json(answer.body).topic_list)

    async def message_at(self, mq: MessageQueue, offset: int) -> MessageExt | None:
        """The message at a queue offset, pulled as ``TOOLS_CONSUMER`` (queryMsgByOffset).

        Raises:
            NoRouteError: The topic or the broker name is unknown.
            BrokerError: The broker refused the pull.
        """
        route = await self.admin.topic_route(mq.topic)
        addrs = [b.master_addr for b in route.broker_datas if b.broker_name == mq.broker_name]
        if not addrs or addrs[0] is None:
            raise NoRouteError(mq.topic, f"broker {mq.broker_name!r} does not serve it")
        cmd = pull_request(TOOLS_CONSUMER_GROUP, mq, offset, 1, subscription="*")
        answer = await self.instance.invoke(addrs[0], cmd, self._timeout_s)
        result = read_pull_response(answer, mq.broker_name, addr=addrs[0])
        if result.status is not PullStatus.FOUND or not result.messages:
            return None
        first = result.messages[0]
        return first if first.queue_offset == offset else None

    async def every_master(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        """As :meth:`targets`, but naming neither means every master of every cluster.

        (mqadmin's cleanExpiredCQ, deleteExpiredCommitLog and cleanUnusedTopic.)
        """
        if broker_addr or cluster:
            return await self.targets(cluster, broker_addr)
        info = await self.admin.cluster_info()
        return sorted({a for c in info.cluster_addr_table for a in _masters(info, c)})

    async def cluster_brokers(self, cluster: str) -> list[tuple[str, int, str]]:
        """``(broker name, broker id, addr)`` of every broker of a cluster, slaves too.

        Raises:
            TargetError: The cluster is unknown.
        """
        info = await self.admin.cluster_info()
        if cluster not in info.cluster_addr_table:
            raise TargetError(f"cluster {cluster!r} is unknown to the name server")
        return [
            (name, bid, addr)
            for name in sorted(info.cluster_addr_table[cluster])
            if name in info.broker_addr_table
            for bid, addr in sorted(info.broker_addr_table[name].broker_addrs.items())
        ]

    async def master_of(self, topic: str, broker_name: str) -> str:
        """The master address of one broker of a topic's route.

        Raises:
            NoRouteError: The topic is unknown, or that broker does not serve it.
        """
        route = await self.admin.topic_route(topic)
        for b in route.broker_datas:
            if b.broker_name == broker_name and b.master_addr is not None:
                return b.master_addr
        raise NoRouteError(topic, f"broker {broker_name!r} does not serve it")

    async def queue_offset(self, addr: str, mq: MessageQueue, kind: str, stamp: int = 0) -> int:
        """A queue's ``"min"`` or ``"max"`` offset, or the ``"search"`` offset of a store time."""
        header: Header
        if kind == "min":
            code = RequestCode.GET_MIN_OFFSET
            header = GetMinOffsetRequestHeader(mq.topic, mq.queue_id)
        elif kind == "max":
            code = RequestCode.GET_MAX_OFFSET
            header = GetMaxOffsetRequestHeader(mq.topic, mq.queue_id)
        else:
            code = RequestCode.SEARCH_OFFSET_BY_TIMESTAMP
            header = SearchOffsetRequestHeader(mq.topic, mq.queue_id, stamp)
        answer = await self.call(addr, code, header)
        return int(answer.ext_fields["offset"])

    async def commit_offset(self, addr: str, group: str, mq: MessageQueue, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET: set a group's committed offset of one queue."""
        header = UpdateConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, offset)
        await self.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, header)

    async def pull(
        self, addr: str, mq: MessageQueue, offset: int, max_nums: int, expression: str, group: str
    ) -> PullResult:
        """One PULL_MESSAGE of a queue (tag expression filtered here too, as clients do)."""
        cmd = pull_request(group, mq, offset, max_nums, subscription=expression)
        answer = await self.instance.invoke(addr, cmd, self._timeout_s)
        tags = parse_tag_expression(expression)
        return read_pull_response(answer, mq.broker_name, tags=tags, addr=addr)


def _masters(info: ClusterInfo, cluster: str) -> list[str]:
    names = sorted(info.cluster_addr_table.get(cluster, ()))
    addrs = [info.broker_addr_table[n].master_addr for n in names if n in info.broker_addr_table]
    return [a for a in addrs if a is not None]
