"""The ``rocklet admin`` argument parser: mqadmin's verbs and flags.

Kept apart from the verbs' implementation so that building the ``rocklet`` parser (and
so starting a server) loads no SDK module.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Final

from rocklet.admin.args_acl import ACL_VERB_ARGS
from rocklet.admin.args_common import add_target, parse_bool
from rocklet.admin.args_more import MORE_VERB_ARGS
from rocklet.credentials_args import add_credential_args
from rocklet.tls_args import add_tls_arguments

__all__ = ["DEFAULT_NAMESRV", "add_admin_parser"]

#: The name server when neither ``-n`` nor ``NAMESRV_ADDR`` names one.
DEFAULT_NAMESRV: Final = "127.0.0.1:9876"


def _topic(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")


def _args_update_topic(p: argparse.ArgumentParser) -> None:
    add_target(p, "create the topic on")
    _topic(p)
    p.add_argument("-r", "--readQueueNums", type=int, default=8, help="read queues (default 8)")
    p.add_argument("-w", "--writeQueueNums", type=int, default=8, help="write queues (default 8)")
    p.add_argument("-p", "--perm", type=int, default=6, help="2: W, 4: R, 6: RW (default 6)")
    p.add_argument(
        "-o", "--order", type=parse_bool, default=False, help="ordered topic (true|false)"
    )


def _args_delete_topic(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterName", required=True, help="delete from this cluster")
    _topic(p)


def _args_topic_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterModel", action="store_true", help="show each topic's cluster")


def _args_update_sub_group(p: argparse.ArgumentParser) -> None:
    add_target(p, "create the group on")
    p.add_argument("-g", "--groupName", required=True, help="consumer group name")
    p.add_argument("-s", "--consumeEnable", type=parse_bool, default=True)
    # False unless given, as mqadmin sets them (SubscriptionGroupConfig's own default
    # is true, which a group auto-created by a heartbeat gets).
    p.add_argument("-m", "--consumeFromMinEnable", type=parse_bool, default=False)
    p.add_argument("-d", "--consumeBroadcastEnable", type=parse_bool, default=False)
    p.add_argument("-q", "--retryQueueNums", type=int, default=1)
    p.add_argument("-r", "--retryMaxTimes", type=int, default=16)
    p.add_argument("-i", "--brokerId", type=int, default=0, help="consume from this broker id")
    p.add_argument("-w", "--whichBrokerWhenConsumeSlowly", type=int, default=1)
    p.add_argument("-a", "--notifyConsumerIdsChanged", type=parse_bool, default=True)


def _args_delete_sub_group(p: argparse.ArgumentParser) -> None:
    add_target(p, "delete the group from")
    p.add_argument("-g", "--groupName", required=True, help="consumer group name")
    p.add_argument(
        "-r", "--removeOffset", type=parse_bool, default=False, help="drop its offsets too"
    )


def _args_consumer_progress(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--groupName", help="consumer group (default: every group)")
    p.add_argument("-s", "--showClientIP", type=parse_bool, default=False, help="queue owners")


def _args_consumer_status(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", required=True, help="consumer group name")
    p.add_argument("-i", "--clientId", help="one consumer (default: every online member)")
    p.add_argument("-b", "--brokerAddr", help="ask this broker (default: the group's brokers)")
    p.add_argument(
        "-s", "--jstack", action="store_true", help="with each member's thread and task stacks"
    )


def _args_query_by_key(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-k", "--msgKey", required=True, help="message key")
    p.add_argument("-c", "--maxNum", type=int, default=64, help="most messages per broker")


def _args_query_by_id(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", required=True, help="message id(s), comma-separated")
    p.add_argument("-t", "--topic", help="the topic, to find client msgIds (UNIQ_KEY) too")


def _args_query_by_offset(p: argparse.ArgumentParser) -> None:
    _topic(p)
    p.add_argument("-b", "--brokerName", required=True, help="broker name")
    p.add_argument("-i", "--queueId", type=int, required=True, help="queue id")
    p.add_argument("-o", "--offset", type=int, required=True, help="queue offset")


def _args_cluster_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterName", help="only this cluster")


def _args_broker_status(p: argparse.ArgumentParser) -> None:
    add_target(p, "report on")


def _args_store_check(p: argparse.ArgumentParser) -> None:
    add_target(p, "check the store of")
    # A broker reads its whole store to answer: minutes for a large one.
    p.set_defaults(timeout=600.0)


_VERB_ARGS: Final[Mapping[str, tuple[str, Callable[[argparse.ArgumentParser], None]]]] = {
    "updateTopic": ("create or update a topic", _args_update_topic),
    "deleteTopic": ("delete a topic from a cluster", _args_delete_topic),
    "topicList": ("list every topic", _args_topic_list),
    "topicRoute": ("show a topic's route", _topic),
    "topicStatus": ("show a topic's queue offsets", _topic),
    "updateSubGroup": ("create or update a consumer group", _args_update_sub_group),
    "deleteSubGroup": ("delete a consumer group", _args_delete_sub_group),
    "consumerProgress": ("offsets and lag per queue", _args_consumer_progress),
    "consumerStatus": ("consumers' running info and process queues", _args_consumer_status),
    "queryMsgByKey": ("find messages by key", _args_query_by_key),
    "queryMsgById": ("find messages by id", _args_query_by_id),
    "queryMsgByOffset": ("read the message at a queue offset", _args_query_by_offset),
    "clusterList": ("list the brokers of every cluster", _args_cluster_list),
    "brokerStatus": ("show a broker's runtime info", _args_broker_status),
    "storeCheck": (
        "check a running broker's store files (Rocklet only; --timeout defaults to 600 s); "
        "exit 1 when problems are found",
        _args_store_check,
    ),
    **MORE_VERB_ARGS,
    **ACL_VERB_ARGS,
}


def add_admin_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``admin`` and its verbs to the ``rocklet`` parser.

    Args:
        sub: The ``rocklet`` parser's subcommands.
    """
    admin = sub.add_parser("admin", help="administer a cluster (mqadmin's verbs)")
    verbs = admin.add_subparsers(dest="verb", required=True, metavar="VERB")
    for name, (summary, add_args) in _VERB_ARGS.items():
        p = verbs.add_parser(name, help=summary, description=summary)
        p.add_argument("-n", "--namesrvAddr", help="name server(s), host:port;host:port")
        p.add_argument("--json", action="store_true", help="print JSON instead of tables")
        p.add_argument("--timeout", type=float, default=5.0, help="request timeout, s (5)")
        add_tls_arguments(p)
        add_credential_args(p)
        add_args(p)
