"""The name server's request processors (RocketMQ's ``DefaultRequestProcessor``).

Each processor reads a typed header, consults the :class:`RouteInfoManager` or the
:class:`KVConfigManager` and answers with the bodies docs/protocol.md describes. Header
and body errors propagate to the dispatcher, which answers SYSTEM_ERROR with the reason.
GET/UPDATE_NAMESRV_CONFIG are served by :class:`NamesrvConfiguration` (what each key
does, what is saved where: :mod:`rocklet.broker.namesrv.configuration`); the processors
read the config in force from it on every request.

RocketMQ's name server takes any text; this one checks what it keeps or is asked for.
A topic RocketMQ's name rules reject cannot be routed: a route query answers
TOPIC_NOT_EXIST (the rule, then RocketMQ's FAQ line), a delete SYSTEM_ERROR (the rule);
a registration keeps the broker and its other topics, leaves such topics out, and says
which in the remark of its SUCCESS (a broker with one odd topic still gets routed). A KV entry needs
a namespace and a key; ``ORDER_TOPIC_CONFIG`` entries are a topic and the
``brokerName:queueNums;...`` list clients parse. Text without a UTF-8 form never gets
here: the typed headers and the body parser refuse it.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Final

import structlog

from rocklet.broker.config import NamesrvConfig
from rocklet.broker.config_writer import ConfigWriteError
from rocklet.broker.namesrv.configuration import NamesrvConfiguration
from rocklet.broker.namesrv.kv_config import ORDER_TOPIC_CONFIG, KVConfigManager
from rocklet.broker.namesrv.route_info import RouteInfoManager
from rocklet.broker.tls_keys import SECRET_KEYS
from rocklet.protocol.bodies.cluster import KVTable, TopicList
from rocklet.protocol.bodies.register import RegisterBrokerBody
from rocklet.protocol.bodies.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.base import shown
from rocklet.protocol.headers.namesrv import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from rocklet.protocol.names import check_topic_name
from rocklet.transport import ProcessorRegistry, RequestContext
from rocklet.transport.clock import Clock
from rocklet.transport.connection import Connection

__all__ = ["NamesrvProcessors"]

#: ``MQVersion.Version.V4_9_4``: from this version on clients get standard JSON routes.
_V4_9_4: Final = 401
#: Connection attribute marking that a close callback already watches it.
_WATCHED: Final = "namesrv.broker_watch"
#: ``FAQUrl.suggestTodo(FAQUrl.APPLY_TOPIC_URL)``, which ends 4.9.4's TOPIC_NOT_EXIST remark.
APPLY_TOPIC_TIP: Final = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."

_log = structlog.get_logger(__name__)


def java_crc32(data: bytes) -> int:
    """``UtilAll.crc32``: CRC-32 of the bytes with the sign bit cleared.

    Args:
        data: The bytes.

    Returns:
        A non-negative int32.
    """
    return zlib.crc32(data) & 0x7FFFFFFF


def _routable(
    topics: TopicConfigSerializeWrapper,
) -> tuple[TopicConfigSerializeWrapper, list[str]]:
    """The topic table without topics RocketMQ's rules reject, and why each was left out.

    The routes are keyed by each config's own ``topicName``; a table key that differs
    from it is as suspect as a bad name.
    """
    table: dict[str, TopicConfig] = {}
    left_out: list[str] = []
    for key, config in topics.topic_config_table.items():
        name = config.topic_name
        problem = check_topic_name(name)
        if problem is None and key != name:
            problem = f"listed under another name, {shown(key)}"
        if problem is None:
            table[key] = config
        else:
            left_out.append(f"{shown(name)}: {problem}")
    if not left_out:
        return topics, []
    return dataclasses.replace(topics, topic_config_table=table), left_out


def _kv_problem(namespace: str, key: str, value: str) -> str | None:
    """Why a KV entry cannot be stored, or ``None``."""
    if namespace == ORDER_TOPIC_CONFIG:
        problem = check_topic_name(key)
        if problem is not None:
            return f"{ORDER_TOPIC_CONFIG} key: {problem}"
    elif not namespace.strip() or not key.strip():
        return f"a KV config needs a namespace and a key, got {shown(namespace)} {shown(key)}"
    else:
        return None
    # Clients split it on ";" and ":" and parse the counts (topicRouteData2TopicPublishInfo).
    for item in value.split(";"):
        broker, sep, nums = item.partition(":")
        if not broker or not sep or not nums.isdigit() or not 0 < int(nums) <= 2**31 - 1:
            return (
                f"{ORDER_TOPIC_CONFIG} value must be brokerName:queueNums[;...], got {shown(value)}"
            )
    return None


class NamesrvProcessors:
    """The name server's processors over shared route and KV tables.

    Args:
        routes: The routing tables.
        kv: The KV configuration.
        config: The name server's config.
        clock: Source of registration times (monotonic milliseconds).
        configuration: What GET/UPDATE_NAMESRV_CONFIG serve (its config is the one in
            force). Default: one over ``config``.
    """

    def __init__(
        self,
        routes: RouteInfoManager,
        kv: KVConfigManager,
        config: NamesrvConfig,
        clock: Clock,
        *,
        configuration: NamesrvConfiguration | None = None,
    ) -> None:
        self._routes = routes
        self._kv = kv
        self._configuration = configuration or NamesrvConfiguration(config)
        self._clock = clock

    @property
    def _config(self) -> NamesrvConfig:
        # Read per request: orderMessageEnable and the like change at runtime.
        return self._configuration.config

    def registry(self) -> ProcessorRegistry:
        """A registry with every name server request code.

        Returns:
            The registry.
        """
        registry = ProcessorRegistry()
        registry.register_all(
            {
                RequestCode.REGISTER_BROKER: self.register_broker,
                RequestCode.UNREGISTER_BROKER: self.unregister_broker,
                RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info,
                RequestCode.GET_BROKER_CLUSTER_INFO: self.get_cluster_info,
                RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topics,
                RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
                RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
                RequestCode.PUT_KV_CONFIG: self.put_kv_config,
                RequestCode.GET_KV_CONFIG: self.get_kv_config,
                RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
                RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list,
                RequestCode.QUERY_DATA_VERSION: self.query_data_version,
                RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
                RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
                RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
                RequestCode.GET_NAMESRV_CONFIG: self.get_config,
            }
        )
        return registry

    def _unquoted_keys(self, cmd: RemotingCommand, standard_only: bool = False) -> bool:
        # DefaultRequestProcessor.getRouteInfoByTopic (4.9.4+): fastjson's unquoted
        # integer keys for older clients, unless they ask for standard JSON.
        return (
            self._config.unquoted_route_keys_for_old_clients
            and cmd.version < _V4_9_4
            and not standard_only
        )

    async def register_broker(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """REGISTER_BROKER (103): record a broker and its topic table."""
        header = RegisterBrokerRequestHeader.from_ext_fields(cmd.ext_fields)
        if cmd.body and header.body_crc32 != 0 and java_crc32(cmd.body) != header.body_crc32:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark="crc32 not match")
        if cmd.body:
            body = RegisterBrokerBody.decode(cmd.body, compressed=header.compressed)
            topics = body.topic_config_serialize_wrapper
        else:
            topics = TopicConfigSerializeWrapper({})
        topics, left_out = _routable(topics)
        result = self._routes.register_broker(
            cluster=header.cluster_name,
            broker_addr=header.broker_addr,
            broker_name=header.broker_name,
            broker_id=header.broker_id,
            ha_server_addr=header.ha_server_addr,
            topics=topics,
            connection=ctx.connection,
            now_ms=self._clock.monotonic_ms(),
        )
        self._watch(ctx.connection)
        reply = RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr)
        order_conf = self._kv.namespace(ORDER_TOPIC_CONFIG)
        remark = None
        if left_out:
            remark = f"{len(left_out)} topic(s) not routed: " + "; ".join(left_out[:5])
            _log.warning(
                "registration left out topics that cannot exist",
                broker=header.broker_name,
                addr=header.broker_addr,
                topics=len(left_out),
                first=left_out[0],
            )
        return cmd.make_response(
            ResponseCode.SUCCESS,
            remark=remark,
            ext_fields=reply.to_ext_fields(),
            body=b"" if order_conf is None else KVTable(order_conf).to_json(),
        )

    def _watch(self, conn: Connection) -> None:
        # BrokerHousekeepingService: a broker whose channel closes is dropped at once.
        if conn.attributes.get(_WATCHED):
            return
        conn.attributes[_WATCHED] = True
        conn.add_close_callback(self._routes.on_connection_closed)

    async def unregister_broker(
        self, _ctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """UNREGISTER_BROKER (104): forget a broker that shuts down."""
        header = UnregisterBrokerRequestHeader.from_ext_fields(cmd.ext_fields)
        self._routes.unregister_broker(
            cluster=header.cluster_name,
            broker_addr=header.broker_addr,
            broker_name=header.broker_name,
            broker_id=header.broker_id,
        )
        return cmd.make_response(ResponseCode.SUCCESS)

    async def query_data_version(
        self, _ctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """QUERY_DATA_VERSION (322): has the broker's topic table changed since it registered?

        Like Java, the query also counts as a sign of life for the broker.
        """
        header = QueryDataVersionRequestHeader.from_ext_fields(cmd.ext_fields)
        version = DataVersion.from_json(cmd.body) if cmd.body else DataVersion()
        known = self._routes.data_version(header.broker_addr)
        self._routes.touch(header.broker_addr, self._clock.monotonic_ms())
        changed = QueryDataVersionResponseHeader(changed=known != version)
        return cmd.make_response(
            ResponseCode.SUCCESS,
            ext_fields=changed.to_ext_fields(),
            body=b"" if known is None else known.to_json(),
        )

    async def get_route_info(self, _ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ROUTEINFO_BY_TOPIC (105): a topic's route, or TOPIC_NOT_EXIST."""
        header = GetRouteInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        route = self._routes.get_topic_route(header.topic)
        if route is None:
            # An invalid name is never routed (registrations leave it out): say why.
            reason = (
                check_topic_name(header.topic)
                or f"No topic route info in name server for the topic: {header.topic}"
            )
            return cmd.make_response(ResponseCode.TOPIC_NOT_EXIST, remark=reason + APPLY_TOPIC_TIP)
        if self._config.order_message_enable:
            order_conf = self._kv.get(ORDER_TOPIC_CONFIG, header.topic)
            if order_conf is not None:
                route = dataclasses.replace(route, order_topic_conf=order_conf)
        unquoted = self._unquoted_keys(cmd, bool(header.accept_standard_json_only))
        return cmd.make_response(
            ResponseCode.SUCCESS, body=route.to_json(unquoted_int_keys=unquoted)
        )

    async def get_cluster_info(self, _ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_INFO (106): every broker group and cluster."""
        info = self._routes.cluster_info()
        body = info.to_json(unquoted_int_keys=self._unquoted_keys(cmd))
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def get_all_topics(self, _ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206): every routed topic."""
        body = TopicList(tuple(self._routes.all_topics())).to_json()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def get_topics_by_cluster(
        self, _ctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """GET_TOPICS_BY_CLUSTER (224): topics with queues in one cluster."""
        header = GetTopicsByClusterRequestHeader.from_ext_fields(cmd.ext_fields)
        body = TopicList(tuple(self._routes.topics_of_cluster(header.cluster))).to_json()
        return cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def delete_topic(self, _ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """DELETE_TOPIC_IN_NAMESRV (216): forget a topic's queues."""
        header = DeleteTopicFromNamesrvRequestHeader.from_ext_fields(cmd.ext_fields)
        problem = check_topic_name(header.topic)
        if problem is not None:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=problem)
        self._routes.delete_topic(header.topic, header.cluster_name)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def put_kv_config(self, _ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """PUT_KV_CONFIG (100)."""
        header = PutKVConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        problem = _kv_problem(header.namespace, header.key, header.value)
        if problem is not None:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=problem)
        return await self._kv_saved(cmd, self._kv.put(header.namespace, header.key, header.value))

    async def get_kv_config(self, _ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_KV_CONFIG (101): the value, or QUERY_NOT_FOUND."""
        header = GetKVConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        value = self._kv.get(header.namespace, header.key)
        if value is None:
            return cmd.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                remark=f"No config item, Namespace: {header.namespace} Key: {header.key}",
            )
        return cmd.make_response(
            ResponseCode.SUCCESS, ext_fields=GetKVConfigResponseHeader(value).to_ext_fields()
        )

    async def delete_kv_config(self, _ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """DELETE_KV_CONFIG (102)."""
        header = DeleteKVConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        return await self._kv_saved(cmd, self._kv.delete(header.namespace, header.key))

    async def _kv_saved(self, cmd: RemotingCommand, generation: int) -> RemotingCommand:
        """SUCCESS once the KV change is on disk; SYSTEM_ERROR if it cannot be written."""
        try:
            await self._kv.saved(generation)
        except ConfigWriteError as exc:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=f"{exc} (kept in memory)")
        return cmd.make_response(ResponseCode.SUCCESS)

    async def get_kv_list(self, _ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_KVLIST_BY_NAMESPACE (219): a namespace as a KVTable, or QUERY_NOT_FOUND."""
        header = GetKVListByNamespaceRequestHeader.from_ext_fields(cmd.ext_fields)
        table = self._kv.namespace(header.namespace)
        if table is None:
            return cmd.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                remark=f"No config item, Namespace: {header.namespace}",
            )
        return cmd.make_response(ResponseCode.SUCCESS, body=KVTable(table).to_json())

    async def wipe_write_perm(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """WIPE_WRITE_PERM_OF_BROKER (205): a broker group's topics lose WRITE in the routes.

        Answers ``wipeTopicCount``, the topics the group serves (0 for an unknown group).
        """
        header = WipeWritePermOfBrokerRequestHeader.from_ext_fields(cmd.ext_fields)
        count = self._routes.wipe_write_perm(header.broker_name)
        _log.info(
            "wiped write perm of broker",
            broker=header.broker_name,
            by=ctx.peer_address,
            topics=count,
        )
        reply = WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count)
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields=reply.to_ext_fields())

    async def add_write_perm(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """ADD_WRITE_PERM_OF_BROKER (327): a broker group's topics become READ|WRITE.

        Answers ``addTopicCount``, the topics the group serves.
        """
        header = AddWritePermOfBrokerRequestHeader.from_ext_fields(cmd.ext_fields)
        count = self._routes.add_write_perm(header.broker_name)
        _log.info(
            "added write perm of broker",
            broker=header.broker_name,
            by=ctx.peer_address,
            topics=count,
        )
        reply = AddWritePermOfBrokerResponseHeader(add_topic_count=count)
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields=reply.to_ext_fields())

    async def get_config(self, _ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_NAMESRV_CONFIG (319): the configuration as ``key=value`` lines."""
        return cmd.make_response(
            ResponseCode.SUCCESS, body=self._configuration.text().encode("utf-8")
        )

    async def update_config(self, ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG (318): set keys from a properties body, and save them.

        No body changes nothing (SUCCESS), as in Java. See
        :mod:`rocklet.broker.namesrv.configuration` for what each key does.
        """
        if not cmd.body:
            return cmd.make_response(ResponseCode.SUCCESS)
        result = await self._configuration.update(cmd.body.decode("utf-8", "replace"))
        if result.code != ResponseCode.SUCCESS:
            _log.warning(
                "name server config update refused", by=ctx.peer_address, why=result.remark
            )
        else:
            _log.info(
                "name server config updated",
                by=ctx.peer_address,
                values={k: _secret_hidden(k, v) for k, v in result.applied.items()},
                ignored=list(result.ignored),
            )
        return cmd.make_response(result.code, remark=result.remark)


def _secret_hidden(key: str, value: str) -> str:
    return "******" if key in SECRET_KEYS else value
