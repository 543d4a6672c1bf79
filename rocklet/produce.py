"""``rocklet produce``: send messages with the SDK's producer, print each send result.

Bodies come from ``--body`` (``--count`` times), from standard input (a line per
message), or, with ``--count`` and no ``--body``, are generated when standard input is
a terminal or empty (``docker exec``, ``ssh host cmd``, a script's ``< /dev/null``). Each
result goes to standard output (text or ``--json``); progress, the summary and errors
go to standard error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Final, TextIO

from rocklet.admin.args import DEFAULT_NAMESRV
from rocklet.client import Message, Producer, SendResult
from rocklet.client.errors import ClientError
from rocklet.credentials_args import credentials_from
from rocklet.explain import describe_error
from rocklet.progress_note import ProgressNote
from rocklet.tls_args import tls_from_args
from rocklet.transport.loop import run as run_loop
from rocklet.transport.tls import TlsConfigError

__all__ = ["run_produce", "run_produce_async"]

EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2


def _result_line(result: SendResult, as_json: bool) -> str:
    mq = result.message_queue
    if as_json:
        return json.dumps(
            {
                "status": result.status.value,
                "msgId": result.msg_id,
                "offsetMsgId": result.offset_msg_id,
                "topic": mq.topic,
                "brokerName": mq.broker_name,
                "queueId": mq.queue_id,
                "queueOffset": result.queue_offset,
            }
        )
    return (
        f"{result.status.value} msgId={result.msg_id} queue={mq.broker_name}:{mq.queue_id} "
        f"offset={result.queue_offset}"
    )


async def _stdin_lines(stdin: TextIO) -> AsyncIterator[str]:
    # A thread per line: reading blocks, and the producer's connections need the loop.
    while line := await asyncio.to_thread(stdin.readline):
        yield line.rstrip("\r\n")


class _Bodies:
    """The bodies to send, in order; counts the empty lines it skips (a body is needed)."""

    def __init__(self, args: argparse.Namespace, stdin: TextIO, err: TextIO) -> None:
        self._args = args
        self._stdin = stdin
        self._err = err
        self.skipped = 0

    async def __aiter__(self) -> AsyncIterator[str]:
        args, stdin = self._args, self._stdin
        if args.body is not None:
            for _ in range(args.count or 1):
                yield args.body
            return
        if stdin.isatty() and args.count:
            for body in _generated(args.count):
                yield body
            return
        if stdin.isatty():
            self._err.write("type one message per line; Ctrl-D ends\n")
            self._err.flush()
        taken = 0
        async for line in _stdin_lines(stdin):
            if not line:
                self.skipped += 1
                continue
            yield line
            taken += 1
            if args.count and taken >= args.count:
                return
        if args.count and not taken and not self.skipped:
            # An input that ends at once is no input (a script, `docker exec` without
            # -i): --count then asks for generated bodies, as on a terminal.
            for body in _generated(args.count):
                yield body


def _generated(count: int) -> Iterator[str]:
    return (f"message {i} of {count} from rocklet produce" for i in range(1, count + 1))


async def run_produce_async(
    args: argparse.Namespace,
    stdin: TextIO,
    out: TextIO,
    err: TextIO,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Send the messages ``args`` describe and print each result.

    Args:
        args: Parsed ``rocklet produce`` arguments.
        stdin: Where body lines come from without ``--body``.
        out: Where send results go.
        err: Where progress, the summary and errors go.
        environ: The environment (``NAMESRV_ADDR``); ``os.environ`` by default.

    Returns:
        0 when every message was sent, 1 when a send failed, 2 for a bad ``--body``.
    """
    if args.body == "":
        err.write("rocklet produce: --body is empty; a message needs a body\n")
        return EXIT_USAGE
    try:
        tls = tls_from_args(args)
    except TlsConfigError as exc:
        err.write(f"rocklet produce: {exc}\n")
        return EXIT_USAGE
    env = os.environ if environ is None else environ
    namesrv = args.namesrvAddr or env.get("NAMESRV_ADDR") or DEFAULT_NAMESRV
    keys = tuple(args.keys.split()) if args.keys else ()
    total = (args.count or 1) if args.body is not None else args.count
    progress = ProgressNote(err, "sent", total=total, enabled=not out.isatty())
    began = time.monotonic()
    sent = 0
    bodies = _Bodies(args, stdin, err)
    producer = Producer(
        args.group,
        namesrv,
        send_timeout_ms=max(1, int(args.timeout * 1000)),
        instance_name="rocklet-produce",
        tls=tls,
        credentials=credentials_from(args, env),
    )
    try:
        async with producer:
            async for body in bodies:
                msg = Message(args.topic, body.encode(), tags=args.tags, keys=keys)
                result = await producer.send(msg)
                out.write(_result_line(result, args.json) + "\n")
                sent += 1
                progress.update(sent)
    except ClientError as exc:
        out.flush()
        why = await describe_error(
            exc, namesrv, topic=args.topic, group=args.group, sending=True, tls=tls
        )
        before = f" ({sent} message(s) were sent before)" if sent else ""
        err.write(f"rocklet produce: {why}{before}\n")
        return EXIT_FAILED
    out.flush()
    skipped = f"; skipped {bodies.skipped} empty line(s)" if bodies.skipped else ""
    if not sent:
        err.write(f"rocklet produce: standard input had no line to send{skipped}\n")
        return EXIT_FAILED
    took = time.monotonic() - began
    err.write(f"sent {sent} message(s) to {args.topic} in {took:.2f} s{skipped}\n")
    return 0


def run_produce(args: argparse.Namespace) -> int:
    """The ``rocklet produce`` entry point: run on a new event loop.

    Args:
        args: Parsed arguments.

    Returns:
        The exit code.
    """
    try:
        return run_loop(run_produce_async(args, sys.stdin, sys.stdout, sys.stderr))
    except KeyboardInterrupt:
        sys.stderr.write("rocklet produce: interrupted\n")
        return 130
