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

exportMetrics ``-c CLUSTER`` writes ``metrics.json``: per broker name, the master's
machine (``runtimeEnv``), load (``runtimeQuota``: disk use, message rates, the last
day's counts, average message size, user topics and groups) and versions
(``runtimeVersion``: the tool's, and every language and version of the user groups'
connected consumers), then the rates and day counts summed over the brokers
(``totalData``). A broker that cannot be asked fails the export, naming the broker.

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
from rocklet.admin.verbs_broker import read_properties, view_stats
from rocklet.client.errors import ClientError
from rocklet.protocol.bodies.cluster import TopicList
from rocklet.protocol.bodies.subscription_group import SubscriptionGroupWrapper
from rocklet.protocol.bodies.topic import TopicConfigSerializeWrapper
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.command import OUR_VERSION
from rocklet.protocol.names import (
    ADMIN_SYSTEM_GROUPS,
    DLQ_PREFIX,
    RETRY_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
)
from rocklet.protocol.version import version_desc

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
    """The export could not be made: a file not written, a broker that did not answer."""


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


# -- exportMetrics -------------------------------------------------------------------

#: The system topics whose put statistics are the transaction and delayed-message rates:
#: a half message is stored in the first, a delayed message waits in the second.
_SPECIAL_INFLOWS: Final = (("trans", TRANS_HALF_TOPIC), ("schedule", SCHEDULE_TOPIC))


def _first_rate(text: str | None) -> float:
    """The 10-second figure of a ``"10s 1min 10min"`` rate (0.0 when absent)."""
    first = (text or "").split(" ")[0]
    return float(first) if first else 0.0


def _count(kv: dict[str, str], key: str) -> int:
    """A runtime total (0 when absent: a broker that keeps no such total)."""
    return int(kv.get(key) or 0)


def _present(pairs: dict[str, Any]) -> dict[str, Any]:
    """Leave out what the broker did not send, as fastjson leaves out mqadmin's nulls."""
    return {key: value for key, value in pairs.items() if value is not None}


async def _client_info(tool: AdminTool, groups: list[str]) -> list[str]:
    """``<language>%<version>`` of every consumer connected in ``groups`` (sorted, once)."""
    found: set[str] = set()
    for group in groups:
        try:
            connections = (await tool.admin.consumer_connections(group)).connection_set
        except ClientError:
            continue  # no consumer online (or never routed): mqadmin skips the group too
        found.update(f"{c.language}%{version_desc(c.version)}" for c in connections)
    return sorted(found)


async def _broker_metrics(tool: AdminTool, addr: str) -> dict[str, Any]:
    """One master's ``runtimeEnv``, ``runtimeQuota`` and ``runtimeVersion``."""
    kv = await tool.runtime_info(addr)
    props = read_properties((await tool.call(addr, RequestCode.GET_BROKER_CONFIG)).body)
    groups = (await _user_groups(tool, addr))["subscriptionGroupTable"]
    topics = (await _user_topics(tool, addr, special=False))["topicConfigTable"]
    tps = {
        "normalInTps": _first_rate(kv.get("putTps")),
        "normalOutTps": _first_rate(kv.get("getTransferedTps")),
    }
    one_day = {
        "normalOneDayInNum": _count(kv, "msgPutTotalTodayMorning")
        - _count(kv, "msgPutTotalYesterdayMorning"),
        "normalOneDayOutNum": _count(kv, "msgGetTotalTodayMorning")
        - _count(kv, "msgGetTotalYesterdayMorning"),
    }
    for kind, topic in _SPECIAL_INFLOWS:
        rate, day = await view_stats(tool, addr, "TOPIC_PUT_NUMS", topic)
        tps[f"{kind}InTps"] = rate
        one_day[f"{kind}OneDayInNum"] = day
    disk = ("commitLogDiskRatio", "consumeQueueDiskRatio")
    quota = {
        "diskRatio": _present({key: kv.get(key) for key in disk}),
        "tps": tps,
        "oneDayNum": one_day,
        "messageAverageSize": kv.get("putMessageAverageSize"),
        "topicSize": len(topics),
        "groupSize": len(groups),
    }
    # mqadmin takes the callback thread count for the CPU count: a 4.9.4 broker sizes
    # it from the processors. totalMemKBytes only a Rocklet broker sends.
    env = {
        "cpuNum": props.get("clientCallbackExecutorThreads"),
        "totalMemKBytes": kv.get("totalMemKBytes"),
    }
    return {
        "runtimeEnv": _present(env),
        "runtimeQuota": _present(quota),
        "runtimeVersion": {
            "rocketmqVersion": version_desc(OUR_VERSION),
            "clientInfo": await _client_info(tool, sorted(groups)),
        },
    }


async def export_metrics(tool: AdminTool, args: argparse.Namespace) -> Output:
    """exportMetrics: each master's machine, load and versions, and the cluster's totals."""
    await tool.targets(args.clusterName, None)  # a clear error for an unknown cluster
    info = await tool.admin.cluster_info()
    report: dict[str, Any] = {}
    total_tps = dict.fromkeys(
        ("totalNormalInTps", "totalNormalOutTps", "totalTransInTps", "totalScheduleInTps"), 0.0
    )
    total_day = dict.fromkeys(
        ("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum", "scheduleOneDayInNum"), 0
    )
    for name in sorted(info.cluster_addr_table[args.clusterName]):
        group = info.broker_addr_table.get(name)
        addr = None if group is None else group.master_addr
        if addr is None:
            continue  # no master registered: nothing to ask (mqadmin has no address either)
        try:
            metrics = await _broker_metrics(tool, addr)
        except ClientError as exc:
            # One line naming the broker: the others' figures alone would mislead.
            raise ExportError(
                f"cannot export the metrics of broker {name} ({addr}): {exc}"
            ) from None
        report[name] = metrics
        quota = metrics["runtimeQuota"]
        for key, rate in quota["tps"].items():
            total_tps["total" + key[0].upper() + key[1:]] += rate
        for key, count in quota["oneDayNum"].items():
            total_day[key] += count
    content = {
        "evaluateReport": report,
        "totalData": {"totalTps": total_tps, "totalOneDayNum": total_day},
    }
    path = Path(args.filePath) / "metrics.json"
    _write(path, content)
    return Output({"file": str(path), "content": content}, notes=[f"export {path} success"])


#: This module's verbs, by mqadmin name.
EXPORT_VERBS = {
    "exportMetadata": export_metadata,
    "exportConfigs": export_configs,
    "exportMetrics": export_metrics,
}
