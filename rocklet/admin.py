"""``rocklet admin``: mqadmin's verbs and flags, tables for people, ``--json`` for scripts.

Examples::

    rocklet admin clusterList -n 127.0.0.1:9876
    rocklet admin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t orders -r 8 -w 8
    rocklet admin consumerProgress -g billing --json

The name server comes from ``-n``, else the ``NAMESRV_ADDR`` environment variable (as
mqadmin), else ``127.0.0.1:9876``. Exit codes: 0 on success, 1 when the command failed
(unreachable name server or broker, unknown topic, group or cluster, a broker's
refusal; one line on standard error says which), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from typing import Final, TextIO

import uvloop

from rocklet.admin_client import AdminTool
from rocklet.admin_format import print_output
from rocklet.admin_verbs import VERBS
from rocklet.client.errors import BrokerError, ClientError, ConnectError, NoRouteError
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.errors import ProtocolError

__all__ = ["add_admin_parser", "run_admin", "run_admin_async"]

DEFAULT_NAMESRV: Final = "127.0.0.1:9876"
EXIT_FAILED: Final = 1


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")
    return lowered == "true"


def _target(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("-b", "--brokerAddr", help=f"{what} this broker (host:port)")
    p.add_argument("-c", "--clusterName", help=f"{what} every master of this cluster")


def _topic(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")


def _args_update_topic(p: argparse.ArgumentParser) -> None:
    _target(p, "create the topic on")
    _topic(p)
    p.add_argument("-r", "--readQueueNums", type=int, default=8, help="read queues (default 8)")
    p.add_argument("-w", "--writeQueueNums", type=int, default=8, help="write queues (default 8)")
    p.add_argument("-p", "--perm", type=int, default=6, help="2: W, 4: R, 6: RW (default 6)")
    p.add_argument("-o", "--order", type=_bool, default=False, help="ordered topic (true|false)")


def _args_delete_topic(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterName", required=True, help="delete from this cluster")
    _topic(p)


def _args_topic_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterModel", action="store_true", help="show each topic's cluster")


def _args_update_sub_group(p: argparse.ArgumentParser) -> None:
    _target(p, "create the group on")
    p.add_argument("-g", "--groupName", required=True, help="consumer group name")
    p.add_argument("-s", "--consumeEnable", type=_bool, default=True)
    p.add_argument("-m", "--consumeFromMinEnable", type=_bool, default=True)
    p.add_argument("-d", "--consumeBroadcastEnable", type=_bool, default=True)
    p.add_argument("-q", "--retryQueueNums", type=int, default=1)
    p.add_argument("-r", "--retryMaxTimes", type=int, default=16)
    p.add_argument("-i", "--brokerId", type=int, default=0, help="consume from this broker id")
    p.add_argument("-w", "--whichBrokerWhenConsumeSlowly", type=int, default=1)
    p.add_argument("-a", "--notifyConsumerIdsChanged", type=_bool, default=True)


def _args_delete_sub_group(p: argparse.ArgumentParser) -> None:
    _target(p, "delete the group from")
    p.add_argument("-g", "--groupName", required=True, help="consumer group name")
    p.add_argument("-r", "--removeOffset", type=_bool, default=False, help="drop its offsets too")


def _args_consumer_progress(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--groupName", help="consumer group (default: every group)")
    p.add_argument("-s", "--showClientIP", type=_bool, default=False, help="queue owners")


def _args_consumer_status(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", required=True, help="consumer group name")
    p.add_argument("-i", "--clientId", help="one consumer (default: every online member)")


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
    _target(p, "report on")


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
        add_args(p)


def _describe(exc: Exception, namesrv: str) -> str:
    if isinstance(exc, ConnectError):
        peer = exc.peer or "?"
        role = "name server" if peer in namesrv.replace(",", ";").split(";") else "broker"
        return f"cannot reach the {role} at {peer}: {exc}"
    if isinstance(exc, NoRouteError):
        return f"topic {exc.topic!r} does not exist (the name server has no route for it)"
    if isinstance(exc, BrokerError):
        try:
            code = ResponseCode(exc.response_code).name
        except ValueError:
            code = str(exc.response_code)
        where = f"{exc.addr} " if exc.addr else ""
        return f"{where}refused the request: {code}: {exc.remark or '(no reason given)'}"
    return str(exc)


async def run_admin_async(
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run one admin verb and print its result.

    Args:
        args: Parsed ``rocklet admin`` arguments.
        out: Where results go.
        err: Where the error line goes.
        environ: The environment (``NAMESRV_ADDR``); ``os.environ`` by default.

    Returns:
        The exit code: 0, or 1 when the command failed.
    """
    env = os.environ if environ is None else environ
    namesrv = args.namesrvAddr or env.get("NAMESRV_ADDR") or DEFAULT_NAMESRV
    try:
        async with AdminTool(namesrv, args.timeout) as tool:
            output = await VERBS[args.verb](tool, args)
    except (ClientError, ProtocolError) as exc:
        err.write(f"rocklet admin {args.verb}: {_describe(exc, namesrv)}\n")
        return EXIT_FAILED
    print_output(output, out, as_json=args.json)
    return 0


def run_admin(args: argparse.Namespace) -> int:
    """Run one admin verb on a new event loop (the ``rocklet admin`` entry point).

    Args:
        args: Parsed ``rocklet admin`` arguments.

    Returns:
        The exit code.
    """
    return uvloop.run(run_admin_async(args, sys.stdout, sys.stderr))
