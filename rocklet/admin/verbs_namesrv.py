"""Name-server verbs of ``rocklet admin``: write permission, configuration, KV config.

wipeWritePerm, addWritePerm, getNamesrvConfig, updateNamesrvConfig, updateKvConfig,
deleteKvConfig and updateOrderConf. As mqadmin does, the writes go to every name server
``-n`` lists (they do not replicate among themselves).
"""

from __future__ import annotations

import argparse
from typing import Any

from rocklet.admin.format import Output, Table
from rocklet.admin.tool import AdminTool, TargetError
from rocklet.admin.verbs_broker import properties_body, read_properties
from rocklet.client.errors import BrokerError, ClientError, NotANameServerError
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.headers.namesrv import (
    AddWritePermOfBrokerRequestHeader,
    DeleteKVConfigRequestHeader,
    GetKVConfigRequestHeader,
    PutKVConfigRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)
from rocklet.protocol.names import ORDER_TOPIC_CONFIG

__all__ = ["NAMESRV_VERBS"]


async def _write_perm(tool: AdminTool, broker: str, wipe: bool) -> Output:
    verb = "wipe" if wipe else "add"
    data: dict[str, Any] = {}
    notes: list[str] = []
    for ns in tool.namesrv_addrs:
        where = f"{verb} write perm of broker[{broker}] in name server[{ns}]"
        try:
            if wipe:
                header = WipeWritePermOfBrokerRequestHeader(broker)
                answer = await tool.call(ns, RequestCode.WIPE_WRITE_PERM_OF_BROKER, header)
                count = int(answer.ext_fields.get("wipeTopicCount", 0))
            else:
                add = AddWritePermOfBrokerRequestHeader(broker)
                answer = await tool.call(ns, RequestCode.ADD_WRITE_PERM_OF_BROKER, add)
                count = int(answer.ext_fields.get("addTopicCount", 0))
        except NotANameServerError:
            raise  # a set-up mistake, not this name server's refusal: one line, exit 1
        except ClientError as exc:
            data[ns] = {"ok": False, "error": str(exc)}
            notes.append(f"{where} Failed: {exc}")
            continue
        data[ns] = {"ok": True, "topicCount": count}
        notes.append(f"{where} OK, {count}")
    failed = any(not d["ok"] for d in data.values())
    return Output(data, notes=notes, exit_code=1 if failed else 0)


async def wipe_write_perm(tool: AdminTool, args: argparse.Namespace) -> Output:
    """wipeWritePerm: make every queue of a broker read-only in the routes (drain it)."""
    return await _write_perm(tool, args.brokerName, wipe=True)


async def add_write_perm(tool: AdminTool, args: argparse.Namespace) -> Output:
    """addWritePerm: give a broker's queues their write permission back."""
    return await _write_perm(tool, args.brokerName, wipe=False)


async def get_namesrv_config(tool: AdminTool, args: argparse.Namespace) -> Output:
    """getNamesrvConfig: each name server's configuration."""
    data: dict[str, dict[str, str]] = {}
    tables = []
    for ns in tool.namesrv_addrs:
        answer = await tool.call(ns, RequestCode.GET_NAMESRV_CONFIG)
        data[ns] = read_properties(answer.body)
        tables.append(Table(("Key", "Value"), list(data[ns].items()), f"Name server {ns}"))
    return Output(data, tables)


async def update_namesrv_config(tool: AdminTool, args: argparse.Namespace) -> Output:
    """updateNamesrvConfig: set one configuration key on every name server."""
    body = properties_body(args.key, args.value)
    for ns in tool.namesrv_addrs:
        await tool.call(ns, RequestCode.UPDATE_NAMESRV_CONFIG, body=body)
    addrs = tool.namesrv_addrs
    return Output(
        {"nameServers": addrs, "key": args.key, "value": args.value},
        notes=[f"update name server config success! {addrs}", f"{args.key} : {args.value}"],
    )


async def update_kv_config(tool: AdminTool, args: argparse.Namespace) -> Output:
    """updateKvConfig: put one KV config entry on every name server."""
    header = PutKVConfigRequestHeader(args.namespace, args.key, args.value)
    for ns in tool.namesrv_addrs:
        await tool.call(ns, RequestCode.PUT_KV_CONFIG, header)
    return Output(
        {"namespace": args.namespace, "key": args.key, "value": args.value},
        notes=["create or update kv config to namespace success."],
    )


async def delete_kv_config(tool: AdminTool, args: argparse.Namespace) -> Output:
    """deleteKvConfig: remove one KV config entry from every name server."""
    header = DeleteKVConfigRequestHeader(args.namespace, args.key)
    for ns in tool.namesrv_addrs:
        await tool.call(ns, RequestCode.DELETE_KV_CONFIG, header)
    return Output(
        {"namespace": args.namespace, "key": args.key},
        notes=["delete kv config from namespace success."],
    )


async def update_order_conf(tool: AdminTool, args: argparse.Namespace) -> Output:
    """updateOrderConf: put, get or delete a topic's order conf (``brokerName:queues;...``)."""
    topic, ns_key = args.topic, ORDER_TOPIC_CONFIG
    if args.method == "get":
        value = None
        header = GetKVConfigRequestHeader(ns_key, topic)
        for ns in tool.namesrv_addrs:
            try:
                answer = await tool.call(ns, RequestCode.GET_KV_CONFIG, header)
            except BrokerError as exc:
                if exc.response_code != ResponseCode.QUERY_NOT_FOUND:
                    raise
                continue
            value = answer.ext_fields.get("value")
            break
        if value is None:
            raise TargetError(f"topic {topic!r} has no order conf")
        return Output(
            {"topic": topic, "orderConf": value},
            notes=[f"get orderConf success. topic=[{topic}], orderConf=[{value}] "],
        )
    if args.method == "put":
        if not args.orderConf:
            raise TargetError("put needs the order conf: -v brokerName1:num;brokerName2:num")
        await update_kv_config(
            tool, argparse.Namespace(namespace=ns_key, key=topic, value=args.orderConf)
        )
        return Output(
            {"topic": topic, "orderConf": args.orderConf},
            notes=[f"update orderConf success. topic=[{topic}], orderConf=[{args.orderConf}]"],
        )
    await delete_kv_config(tool, argparse.Namespace(namespace=ns_key, key=topic))
    return Output({"topic": topic}, notes=[f"delete orderConf success. topic=[{topic}]"])


#: This module's verbs, by mqadmin name.
NAMESRV_VERBS = {
    "wipeWritePerm": wipe_write_perm,
    "addWritePerm": add_write_perm,
    "getNamesrvConfig": get_namesrv_config,
    "updateNamesrvConfig": update_namesrv_config,
    "updateKvConfig": update_kv_config,
    "deleteKvConfig": delete_kv_config,
    "updateOrderConf": update_order_conf,
}
