"""exportMetadata and exportConfigs of ``rocklet admin``: a cluster's metadata as files.

Written as RocketMQ 4.9.4's ``mqadmin exportMetadata`` writes them, so either tool's
files serve the other's users (a backup, a migration, a review of what a cluster has):

- ``-c CLUSTER``: every master's tables merged into ``metadata.json``
  (``exportTime``, ``topicConfigTable``, ``subscriptionGroupTable``). A topic or group
  on several masters is listed once with its queue counts added up (read and write
  queues; a group's retry queues), as mqadmin adds them. With ``-t`` only the topics
  go to ``topic.json``, with ``-g`` only the groups to ``subscriptionGroup.json``.
- ``-b BROKER`` with ``-t`` or ``-g``: that broker's table with its ``dataVersion``.

System topics (the broker's own list, GET_SYSTEM_TOPIC_LIST_FROM_BROKER) and system
groups are left out, and retry and dead-letter topics too unless ``-s``.

exportConfigs ``-c CLUSTER`` writes ``configs.json``: the cluster's size
(``clusterScale``: name servers given with ``-n``, masters, their slaves) and, per
broker name, the master's values of the 16 configuration keys mqadmin picks.

Files go to ``-f DIR`` (default ``/tmp/rocketmq/export``), replaced whole: a reader
never sees a half-written one.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from rocklet.admin.format import Output
from rocklet.admin.tool import AdminTool, TargetError
from rocklet.admin.verbs_broker import read_properties
from rocklet.client.errors import ClientError
from rocklet.protocol.bodies.cluster import TopicList
from rocklet.protocol.bodies.subscription_group import SubscriptionGroupWrapper
from rocklet.protocol.bodies.topic import TopicConfigSerializeWrapper
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.names import ADMIN_SYSTEM_GROUPS, DLQ_PREFIX, RETRY_PREFIX

__all__ = ["EXPORT_VERBS", "ExportError", "merge_tables"]

#: The prefix of the broker's internal groups (``MixAll.isSysConsumerGroup``).
_SYSTEM_GROUP_PREFIX: Final = "CID_RMQ_SYS_"
#: The broker keys exportConfigs keeps (``ExportConfigsCommand.needBrokerProprties``),
#: in the order mqadmin 4.9.4 writes them.
_CONFIG_KEYS: Final[tuple[str, ...]] = (
    "brokerId",
    "traceOn",
    "flushDiskType",
    "msgTraceTopicName",
    "traceTopicEnable",
    "messageDelayLevel",
    "autoCreateTopicEnable",
    "brokerRole",
    "slaveReadEnable",
    "fileReservedTime",
    "brokerClusterName",
    "brokerName",
    "filterServerNums",
    "maxMessageSize",
    "useTLS",
    "autoCreateSubscriptionGroup",
)


async def _user_topics(tool: AdminTool, addr: str, special: bool) -> dict[str, Any]:
    """A broker's topic table without system topics (and retry/DLQ ones unless ``special``)."""
    answer = await tool.call(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
    wrapper = TopicConfigSerializeWrapper.from_json(answer.body).to_dict()
    listed = await tool.call(addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
    system = set(TopicList.from_json(listed.body).topic_list)
    wrapper["topicConfigTable"] = {
        name: config
        for name, config in wrapper["topicConfigTable"].items()
        if name not in system and (special or not name.startswith((RETRY_PREFIX, DLQ_PREFIX)))
    }
    return wrapper


async def _user_groups(tool: AdminTool, addr: str) -> dict[str, Any]:
    """A broker's subscription groups without the system ones."""
    answer = await tool.call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    wrapper = SubscriptionGroupWrapper.from_json(answer.body)
    return {
        "dataVersion": wrapper.data_version.to_dict(),
        "subscriptionGroupTable": {
            name: config.to_dict()
            for name, config in wrapper.subscription_group_table.items()
            if name not in ADMIN_SYSTEM_GROUPS and not name.startswith(_SYSTEM_GROUP_PREFIX)
        },
    }


def merge_tables(
    into: dict[str, dict[str, Any]], table: dict[str, Any], counts: tuple[str, ...]
) -> None:
    """Add one master's table to ``into``, as mqadmin merges a cluster's masters.

    Args:
        into: The merged table so far (topic or group name to its JSON object).
        table: One master's table.
        counts: Members added up when an entry is already there (queue counts); the
            other members are the later master's.
    """
    for name, config in table.items():
        known = into.get(name)
        if known is not None:
            config = {**config, **{key: known[key] + config[key] for key in counts}}
        into[name] = config


class ExportError(ClientError):
    """The export file could not be written."""


def _write(path: Path, content: dict[str, Any]) -> None:
    """Write ``content`` as fastjson's pretty JSON (tabs, no space after colons), whole.

    Raises:
        ExportError: The directory or the file could not be written.
    """
    text = json.dumps(content, indent="\t", separators=(",", ":"), ensure_ascii=False)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException as exc:
        os.unlink(tmp)
        if isinstance(exc, OSError):
            raise ExportError(f"cannot write {path}: {exc}") from None
        raise


async def export_metadata(tool: AdminTool, args: argparse.Namespace) -> Output:
    """exportMetadata: write the user topics and groups of a cluster (or a broker) to JSON."""
    directory = Path(args.filePath)
    topics_only, groups_only = args.topic, args.subscriptionGroup
    if args.brokerAddr:
        if topics_only:
            path = directory / "topic.json"
            content = await _user_topics(tool, args.brokerAddr, args.specialTopic)
        elif groups_only:
            path = directory / "subscriptionGroup.json"
            content = await _user_groups(tool, args.brokerAddr)
        else:
            raise TargetError("with -b, choose what to export: -t (topics) or -g (groups)")
    elif args.clusterName:
        topics: dict[str, dict[str, Any]] = {}
        groups: dict[str, dict[str, Any]] = {}
        for addr in await tool.targets(args.clusterName, None):
            if not groups_only:
                found = (await _user_topics(tool, addr, args.specialTopic))["topicConfigTable"]
                merge_tables(topics, found, ("readQueueNums", "writeQueueNums"))
            if not topics_only:
                found = (await _user_groups(tool, addr))["subscriptionGroupTable"]
                merge_tables(groups, found, ("retryQueueNums",))
        content = {"exportTime": int(time.time() * 1000)}
        if topics_only:
            path = directory / "topic.json"
            content["topicConfigTable"] = topics
        elif groups_only:
            path = directory / "subscriptionGroup.json"
            content["subscriptionGroupTable"] = groups
        else:
            path = directory / "metadata.json"
            content |= {"topicConfigTable": topics, "subscriptionGroupTable": groups}
    else:
        raise TargetError("name a broker with -b or a cluster with -c")
    _write(path, content)
    return Output({"file": str(path), "content": content}, notes=[f"export {path} success"])


async def export_configs(tool: AdminTool, args: argparse.Namespace) -> Output:
    """exportConfigs: the cluster's size and its masters' main configuration, as JSON."""
    info = await tool.admin.cluster_info()
    if args.clusterName not in info.cluster_addr_table:
        raise TargetError(f"cluster {args.clusterName!r} is unknown to the name server")
    masters = slaves = 0
    configs: dict[str, dict[str, str]] = {}
    for name in sorted(info.cluster_addr_table[args.clusterName]):
        group = info.broker_addr_table.get(name)
        addr = None if group is None else group.master_addr
        if group is None or addr is None:
            continue  # no master registered: mqadmin skips the group too
        masters += 1
        slaves += len(group.broker_addrs) - 1
        answer = await tool.call(addr, RequestCode.GET_BROKER_CONFIG)
        values = read_properties(answer.body)
        kept = {key: values[key] for key in _CONFIG_KEYS if key in values}
        configs[values.get("brokerName", name)] = kept
    scale = {
        "namesrvSize": len(tool.namesrv_addrs),
        "slaveBrokerSize": slaves,
        "masterBrokerSize": masters,
    }
    content: dict[str, Any] = {"clusterScale": scale, "brokerConfigs": configs}
    path = Path(args.filePath) / "configs.json"
    _write(path, content)
    return Output({"file": str(path), "content": content}, notes=[f"export {path} success"])


#: This module's verbs, by mqadmin name.
EXPORT_VERBS = {"exportMetadata": export_metadata, "exportConfigs": export_configs}
