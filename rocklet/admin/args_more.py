"""Flags of the ``rocklet admin`` verbs beyond the first set (:mod:`rocklet.admin.args`).

Broker, name-server, client, offset and message verbs, with mqadmin's short and long
option names. Like :mod:`rocklet.admin.args`, this loads no SDK module.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Final

from rocklet.admin.args_common import add_target, parse_bool

__all__ = ["MORE_VERB_ARGS"]


def _millis(text: str) -> float:
    return int(text) / 1000


def _topic(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")


def _key_value(p: argparse.ArgumentParser) -> None:
    p.add_argument("-k", "--key", required=True, help="config key")
    p.add_argument("-v", "--value", required=True, help="config value")


def _get_broker_config(p: argparse.ArgumentParser) -> None:
    add_target(p, "read")


def _update_broker_config(p: argparse.ArgumentParser) -> None:
    add_target(p, "update")
    _key_value(p)


def _stats_all(p: argparse.ArgumentParser) -> None:
    p.add_argument("-a", "--activeTopic", action="store_true", help="active topics only")
    p.add_argument("-t", "--topic", help="only this topic")


def _broker_consume_stats(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", required=True, help="broker address")
    p.add_argument(
        "-t", "--timeoutMillis", dest="timeout", type=_millis, help="request timeout, ms"
    )
    p.add_argument("-l", "--level", type=int, default=0, help="print queues lagging >= this")
    p.add_argument(
        "-o", "--order", type=parse_bool, default=False, help="ordered topics (true|false)"
    )


def _producer(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--broker", required=True, help="broker address")


def _clean(p: argparse.ArgumentParser) -> None:
    add_target(p, "clean", cluster_long="cluster")
    p.set_defaults(timeout=60.0)  # the broker answers once the files are gone


def _producer_connection(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--producerGroup", required=True, help="producer group")
    _topic(p)


def _consumer_connection(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", required=True, help="consumer group")
    p.add_argument("-b", "--brokerAddr", help="ask this broker")


def _consumer(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", required=True, help="consumer group")
    p.add_argument("-i", "--clientId", help="print this member's running info instead")
    p.add_argument(
        "-s", "--jstack", action="store_true", help="with each member's thread and task stacks"
    )
    p.add_argument(
        "-f", "--dir", help="write the reports under DIR/<now-ms>/ (default: the working dir)"
    )


def _get_consumer_status(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, help="consumer group")
    _topic(p)
    p.add_argument("-i", "--originClientId", help="only this member (default: every one)")


def _get_consumer_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--groupName", required=True, help="consumer group")


def _reset_offset(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, help="consumer group")
    _topic(p)
    p.add_argument(
        "-s",
        "--timestamp",
        required=True,
        help="now, epoch ms or yyyy-MM-dd#HH:mm:ss:SSS",
    )
    p.add_argument("-f", "--force", type=parse_bool, default=True, help="also move forward (true)")
    p.add_argument("-c", "--cplus", action="store_true", help="the consumers are C++ clients")


def _skip(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, help="consumer group")
    _topic(p)
    p.add_argument("-f", "--force", type=parse_bool, default=True, help="(true|false)")


def _clone(p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--srcGroup", required=True, help="copy from this group")
    p.add_argument("-d", "--destGroup", required=True, help="to this group")
    p.add_argument("-t", "--topic", required=True, help="a topic whose route names the brokers")
    p.add_argument("-o", "--offline", type=parse_bool, default=False, help="accepted, unused")


def _update_topic_perm(p: argparse.ArgumentParser) -> None:
    add_target(p, "update the topic on")
    _topic(p)
    p.add_argument("-p", "--perm", type=int, required=True, choices=(2, 4, 6), help="2, 4 or 6")


def _allocate(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-i", "--ipList", required=True, help="client ids, comma-separated")


def _broker_name(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerName", required=True, help="broker name")


def _no_args(p: argparse.ArgumentParser) -> None:
    del p


def _kv(p: argparse.ArgumentParser, with_value: bool) -> None:
    p.add_argument("-s", "--namespace", required=True, help="KV namespace")
    p.add_argument("-k", "--key", required=True, help="key")
    if with_value:
        p.add_argument("-v", "--value", required=True, help="value")


def _order_conf(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-v", "--orderConf", help="brokerName1:num;brokerName2:num (for put)")
    p.add_argument("-m", "--method", required=True, choices=("put", "get", "delete"))


def _query_cq(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-q", "--queue", type=int, required=True, help="queue id")
    p.add_argument("-i", "--index", type=int, required=True, help="first queue index")
    p.add_argument("-c", "--count", type=int, default=10, help="entries (10)")
    p.add_argument("-b", "--broker", help="broker address (default: the first of the route)")
    p.add_argument("-g", "--consumer", help="consumer group: evaluate its filter too")


def _query_unique(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", required=True, help="client msgId (UNIQ_KEY)")
    _topic(p)
    p.add_argument("-g", "--consumerGroup", help="with -d: have this consumer consume it")
    p.add_argument("-d", "--clientId", help="the consumer's client id")
    p.add_argument(
        "-a",
        "--showAll",
        action="store_true",
        help="accepted; as in mqadmin the query keeps only the earliest match",
    )


def _time_range(p: argparse.ArgumentParser, begin: str, end: str) -> None:
    time_help = "epoch ms or yyyy-MM-dd#HH:mm:ss:SSS"
    p.add_argument(begin, "--beginTimestamp", help=f"from this store time: {time_help}")
    p.add_argument(end, "--endTimestamp", help=f"until this store time: {time_help}")


def _print_msg(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-c", "--charsetName", default="utf-8", help="body charset (UTF-8)")
    p.add_argument("-s", "--subExpression", default="*", help="tag expression (*)")
    _time_range(p, "-b", "-e")
    p.add_argument("-d", "--printBody", type=parse_bool, default=False, help="(true|false)")


def _print_msg_by_queue(p: argparse.ArgumentParser) -> None:
    _print_msg(p)
    p.add_argument("-a", "--brokerName", required=True, help="the queue's broker name")
    p.add_argument("-i", "--queueId", type=int, required=True, help="the queue id")
    p.add_argument("-p", "--printMsg", type=parse_bool, default=False, help="print the messages")
    p.add_argument("-f", "--calculate", type=parse_bool, default=False, help="count by tag")


def _decode_message_id(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--messageId", required=True, help="a client msgId (UNIQ_KEY)")


def _query_trace(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", required=True, help="the traced message's client msgId")
    p.add_argument(
        "-t", "--traceTopic", default="RMQ_SYS_TRACE_TOPIC", help="(RMQ_SYS_TRACE_TOPIC)"
    )


def _consume_message(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-b", "--brokerName", help="only this broker")
    p.add_argument("-i", "--queueId", type=int, help="only this queue (needs -b)")
    p.add_argument("-o", "--offset", type=int, help="start at this offset (with -b -i)")
    p.add_argument("-g", "--consumerGroup", default="TOOLS_CONSUMER", help="pull as this group")
    p.add_argument("-c", "--MessageNumber", type=int, default=128, help="most messages (128)")
    _time_range(p, "-s", "-e")


def _send_message(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-p", "--body", required=True, help="message body (UTF-8)")
    p.add_argument("-k", "--key", help="message keys (space-separated)")
    p.add_argument("-c", "--tags", help="message tag")
    p.add_argument("-b", "--broker", help="to this broker (with -i)")
    p.add_argument("-i", "--qid", type=int, help="to this queue (with -b)")
    p.add_argument(
        "-m", "--msgTraceEnable", type=parse_bool, default=False, help="accepted, unused"
    )


def _check_rt(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-a", "--amount", type=int, default=100, help="messages (100)")
    p.add_argument("-s", "--size", type=int, default=128, help="body bytes (128)")


def _send_status(p: argparse.ArgumentParser) -> None:
    _broker_name(p)
    p.add_argument("-s", "--messageSize", type=int, default=128, help="body bytes (128)")
    p.add_argument("-c", "--count", type=int, default=50, help="messages (50)")


def _cluster_rt(p: argparse.ArgumentParser) -> None:
    p.add_argument("-a", "--amount", type=int, default=100, help="sends per broker and round (100)")
    p.add_argument("-s", "--size", type=int, default=128, help="body bytes (128)")
    p.add_argument("-c", "--clusterName", help="one cluster (default: every cluster)")
    p.add_argument("-i", "--interval", type=float, default=10, help="seconds between rounds (10)")
    p.add_argument(
        "--rounds", type=int, default=0, help="stop after this many rounds (0: run until Ctrl-C)"
    )


def _start_monitoring(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--interval", type=float, default=60, help="seconds between rounds (60)")
    p.add_argument(
        "--rounds", type=int, default=0, help="stop after this many rounds (0: run until Ctrl-C)"
    )


_Adder = Callable[[argparse.ArgumentParser], None]

#: Verb name to (summary, flag adder).


def _export_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("-f", "--filePath", default="/tmp/rocketmq/export", help="directory to write to")


def _export_configs(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterName", required=True, help="the cluster to export")
    _export_dir(p)


def _export_metadata(p: argparse.ArgumentParser) -> None:
    add_target(p, "export")
    _export_dir(p)
    p.add_argument("-t", "--topic", action="store_true", help="only the topics (topic.json)")
    p.add_argument(
        "-g",
        "--subscriptionGroup",
        action="store_true",
        help="only the groups (subscriptionGroup.json)",
    )
    p.add_argument(
        "-s", "--specialTopic", action="store_true", help="with retry and dead-letter topics"
    )


MORE_VERB_ARGS: Final[Mapping[str, tuple[str, _Adder]]] = {
    "getBrokerConfig": ("show a broker's configuration", _get_broker_config),
    "updateBrokerConfig": ("set a broker configuration key", _update_broker_config),
    "statsAll": ("TPS, 24-hour counts and lag of every topic and group", _stats_all),
    "brokerConsumeStats": ("every group's lag on one broker", _broker_consume_stats),
    "producer": ("producers connected to a broker", _producer),
    "cleanExpiredCQ": ("drop consume queues of deleted messages", _clean),
    "deleteExpiredCommitLog": ("delete expired commitlog files now", _clean),
    "cleanUnusedTopic": ("drop store files of deleted topics", _clean),
    "producerConnection": ("a producer group's connections", _producer_connection),
    "consumerConnection": ("a consumer group's connections", _consumer_connection),
    "getConsumerConfig": ("a consumer group's configuration", _get_consumer_config),
    "consumer": ("write each member's running info to a file, then check them", _consumer),
    "getConsumerStatus": ("the offsets each member holds in memory", _get_consumer_status),
    "resetOffsetByTime": ("move a group's offsets to a time", _reset_offset),
    "skipAccumulatedMessage": ("move a group's offsets to the end", _skip),
    "cloneGroupOffset": ("copy a group's offsets to another group", _clone),
    "updateTopicPerm": ("change a topic's permission", _update_topic_perm),
    "topicClusterList": ("the clusters serving a topic", _topic),
    "allocateMQ": ("queue allocation of a client list (averagely)", _allocate),
    "wipeWritePerm": ("make a broker read-only in the name servers", _broker_name),
    "addWritePerm": ("give a broker its write permission back", _broker_name),
    "getNamesrvConfig": ("show the name servers' configuration", _no_args),
    "updateNamesrvConfig": ("set a name server configuration key", _key_value),
    "updateKvConfig": ("put a name server KV config entry", lambda p: _kv(p, True)),
    "deleteKvConfig": ("delete a name server KV config entry", lambda p: _kv(p, False)),
    "updateOrderConf": ("put, get or delete a topic's order conf", _order_conf),
    "queryCq": ("raw consume-queue entries", _query_cq),
    "queryMsgByUniqueKey": ("a message by client msgId", _query_unique),
    "printMsg": ("print a topic's messages", _print_msg),
    "queryMsgTraceById": ("the sends and consumes traced for a message", _query_trace),
    "startMonitoring": ("every group's backlog and health, round after round", _start_monitoring),
    "printMsgByQueue": ("print or count by tag one queue's messages", _print_msg_by_queue),
    "DecodeMessageId": (
        "the sender's IP and pid and the time of a client msgId",
        _decode_message_id,
    ),
    "consumeMessage": ("read messages of a queue or topic", _consume_message),
    "sendMessage": ("send one message", _send_message),
    "checkMsgSendRT": ("time sends round a topic's queues", _check_rt),
    "sendMsgStatus": ("time sends to a broker", _send_status),
    "clusterRT": ("time sends to every broker, round after round", _cluster_rt),
    "exportMetadata": ("write a cluster's topics and groups to JSON", _export_metadata),
    "exportConfigs": ("write a cluster's size and main broker keys to JSON", _export_configs),
    # The same two flags as exportConfigs: -c (required) and -f.
    "exportMetrics": ("write each broker's load, rates and versions to JSON", _export_configs),
}
