"""The ``rocklet produce`` and ``rocklet consume`` argument parsers.

Kept apart from their implementations (:mod:`rocklet.produce`, :mod:`rocklet.consume`)
so that building the ``rocklet`` parser, and so starting a server, loads no SDK module.
"""

from __future__ import annotations

import argparse
from typing import Final

from rocklet.admin.args import DEFAULT_NAMESRV
from rocklet.credentials_args import add_credential_args
from rocklet.protocol.names import check_group_name, check_topic_name
from rocklet.tls_args import add_tls_arguments

__all__ = ["DEFAULT_PRODUCER_GROUP", "add_consume_parser", "add_produce_parser"]

#: The producer group ``rocklet produce`` sends as.
DEFAULT_PRODUCER_GROUP: Final = "rocklet-cli-producer"
#: Seconds ``rocklet consume`` waits for a message before it stops (0: no limit).
DEFAULT_IDLE_TIMEOUT_S: Final = 10.0

_PRODUCE_HELP: Final = """\
Send messages to a topic and print where each one was stored.

Bodies come from --body (sent --count times), else from standard input, one message
per line. On a terminal without --body, type the lines (Ctrl-D ends), or give --count
to send generated bodies (also sent when standard input is empty, as in a script or
`docker exec`). A topic that does not exist is created on the first send when the
broker allows it (autoCreateTopicEnable, on by default).

Examples:
  rocklet produce -t demo --count 10
  rocklet produce -t demo --body 'hello' --tags TagA --keys order-1
  seq 1000 | rocklet produce -t demo --json > sent.jsonl

Exit status: 0 all sent, 1 a send failed (the reason on stderr), 2 bad arguments."""

_CONSUME_HELP: Final = """\
Print the messages of a topic as they arrive, until --count messages or until none
arrived for --timeout seconds.

Without -g it reads every queue as the built-in group TOOLS_CONSUMER and stores no
offset. With -g GROUP it starts from that group's committed offsets (--from for queues
it never committed) and commits what it printed, so the next run resumes there; it
reads every queue itself rather than sharing them with the group's other members.

Examples:
  rocklet consume -t demo --count 10
  rocklet consume -t demo --from last --timeout 0      # new messages, until Ctrl-C
  rocklet consume -t demo -g audit --json

Exit status: 0 done, 1 failed (the reason on stderr; also when --count was not
reached before the timeout), 2 bad arguments."""


def _topic(text: str) -> str:
    problem = check_topic_name(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def _group(text: str) -> str:
    problem = check_group_name(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, not {text!r}") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def _common(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "-n",
        "--namesrvAddr",
        help=f"name server(s), host:port;host:port (default: $NAMESRV_ADDR or {DEFAULT_NAMESRV})",
    )
    p.add_argument("-t", "--topic", required=True, type=_topic, help=f"topic to {what}")
    p.add_argument("--json", action="store_true", help="print one JSON object per message")
    add_tls_arguments(p)
    add_credential_args(p)


def add_produce_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``produce`` to the ``rocklet`` parser.

    Args:
        sub: The ``rocklet`` parser's subcommands.
    """
    p = sub.add_parser(
        "produce",
        help="send messages to a topic",
        description=_PRODUCE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(p, "send to")
    p.add_argument("--body", help="the body of every message (default: standard input lines)")
    p.add_argument(
        "--count", type=_positive, help="messages to send (default: 1 with --body, else all lines)"
    )
    p.add_argument("--tags", help="the message tag consumers filter on, e.g. TagA")
    p.add_argument("--keys", help="message keys, space-separated (queryMsgByKey finds them)")
    p.add_argument(
        "-g",
        "--group",
        type=_group,
        default=DEFAULT_PRODUCER_GROUP,
        help=f"producer group (default: {DEFAULT_PRODUCER_GROUP})",
    )
    p.add_argument(
        "--timeout", type=_seconds, default=5.0, help="seconds per send, retries included (5)"
    )


def add_consume_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``consume`` to the ``rocklet`` parser.

    Args:
        sub: The ``rocklet`` parser's subcommands.
    """
    p = sub.add_parser(
        "consume",
        help="print the messages of a topic",
        description=_CONSUME_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(p, "read")
    p.add_argument(
        "-g", "--group", type=_group, help="consumer group whose offsets to resume and commit"
    )
    p.add_argument(
        "--from",
        dest="start",
        choices=["first", "last"],
        default="first",
        help="where to start a queue: its first stored message, or after its last (first)",
    )
    p.add_argument("--count", type=_positive, help="stop after this many messages")
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_IDLE_TIMEOUT_S,
        help=f"stop when no message arrived for this many seconds; 0: never "
        f"(default: {DEFAULT_IDLE_TIMEOUT_S:g})",
    )
    p.add_argument("--tags", help="only messages with these tags, e.g. 'TagA || TagB'")
