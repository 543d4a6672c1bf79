"""``rocklet consume``: print a topic's messages with the SDK's pull consumer.

One task per queue long-polls the broker and hands batches to the printer, which stops
after ``--count`` messages, after ``--timeout`` seconds without one, or on Ctrl-C.
Without ``-g`` nothing is stored (the built-in ``TOOLS_CONSUMER`` group names the
pulls, as mqadmin's do); with ``-g`` the group's committed offsets are the start and
what was printed is committed, exactly (a message pulled but not printed is not).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
from collections.abc import Mapping
from typing import Final, TextIO

from rocklet.admin.args import DEFAULT_NAMESRV
from rocklet.client import MessageExt, MessageQueue, PullConsumer
from rocklet.client.errors import ClientError
from rocklet.credentials_args import credentials_from
from rocklet.explain import describe_error
from rocklet.progress_note import ProgressNote
from rocklet.stop_signals import stop_on_signals
from rocklet.tls_args import tls_from_args
from rocklet.transport.loop import run as run_loop
from rocklet.transport.tls import TlsConfigError

__all__ = ["TOOLS_CONSUMER_GROUP", "run_consume", "run_consume_async"]

EXIT_FAILED: Final = 1
#: ``MixAll.TOOLS_CONSUMER_GROUP``: every broker has it, even without auto-created groups.
TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"
#: How long the broker may hold a pull of a queue with nothing new.
LONG_POLL_MS: Final = 5000
#: Batches waiting to be printed (each at most one pull's worth).
_BACKLOG: Final = 64
#: Control characters shown escaped, so each message stays on one line.
_ESCAPES: Final = {c: f"\\x{c:02x}" for c in range(32)} | {9: "\\t", 10: "\\n", 13: "\\r"}

Batch = tuple[MessageQueue, list[MessageExt]]


def _message_line(msg: MessageExt, as_json: bool) -> str:
    if as_json:
        obj: dict[str, object] = {
            "topic": msg.topic,
            "brokerName": msg.broker_name,
            "queueId": msg.queue_id,
            "queueOffset": msg.queue_offset,
            "msgId": msg.msg_id,
            "tags": msg.tags,
            "keys": list(msg.keys),
            "bornTimestamp": msg.born_timestamp,
            "storeTimestamp": msg.store_timestamp,
        }
        try:
            obj["body"] = msg.body.decode()
        except UnicodeDecodeError:
            obj["bodyBase64"] = base64.b64encode(msg.body).decode()
        return json.dumps(obj)
    body = msg.body.decode(errors="backslashreplace").translate(_ESCAPES)
    keys = ",".join(msg.keys) or "-"
    return (
        f"queue={msg.broker_name}:{msg.queue_id} offset={msg.queue_offset} "
        f"tags={msg.tags or '-'} keys={keys} body={body}"
    )


async def _start_offset(consumer: PullConsumer, mq: MessageQueue, args: argparse.Namespace) -> int:
    if args.group:
        committed = await consumer.committed(mq)
        if committed is not None and committed >= 0:
            return committed
    if args.start == "first":
        return await consumer.min_offset(mq)
    return await consumer.max_offset(mq)


async def _pull_queue(
    consumer: PullConsumer,
    mq: MessageQueue,
    offset: int,
    expression: str,
    batches: asyncio.Queue[Batch | Exception],
) -> None:
    try:
        while True:
            result = await consumer.pull(
                mq, offset, 32, expression=expression, long_poll_ms=LONG_POLL_MS
            )
            if result.messages:
                await batches.put((mq, result.messages))
            # Also past a gap: for an offset that is gone the broker names where to go on.
            offset = result.next_begin_offset
    except Exception as exc:  # the printer raises it: one place reports failures
        await batches.put(exc)


class _Printer:
    """Prints batches until the count, the idle timeout or a stop; tracks what to commit."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.out = out
        self.printed = 0
        self.next_offsets: dict[MessageQueue, int] = {}
        self.timed_out = False
        self._progress = ProgressNote(err, "received", total=args.count, enabled=not out.isatty())

    @property
    def done(self) -> bool:
        return bool(self.args.count) and self.printed >= self.args.count

    def print_batch(self, mq: MessageQueue, messages: list[MessageExt]) -> None:
        for msg in messages:
            if self.done:
                return
            self.out.write(_message_line(msg, self.args.json) + "\n")
            self.printed += 1
            self.next_offsets[mq] = msg.queue_offset + 1
        self.out.flush()
        self._progress.update(self.printed)

    async def run(self, batches: asyncio.Queue[Batch | Exception], stop: asyncio.Event) -> None:
        idle = self.args.timeout or None
        stopped = asyncio.ensure_future(stop.wait())
        try:
            while not self.done:
                item = asyncio.ensure_future(batches.get())
                ready, _ = await asyncio.wait(
                    {item, stopped}, timeout=idle, return_when=asyncio.FIRST_COMPLETED
                )
                if item not in ready:
                    item.cancel()
                    self.timed_out = stopped not in ready
                    return
                got = item.result()
                if isinstance(got, Exception):
                    raise got
                self.print_batch(*got)
        finally:
            stopped.cancel()


async def run_consume_async(
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    environ: Mapping[str, str] | None = None,
    stop: asyncio.Event | None = None,
) -> int:
    """Print the messages ``args`` asks for.

    Args:
        args: Parsed ``rocklet consume`` arguments.
        out: Where messages go.
        err: Where the start line, progress, the summary and errors go.
        environ: The environment (``NAMESRV_ADDR``); ``os.environ`` by default.
        stop: Set to stop early (Ctrl-C); the run then ends as after a timeout.

    Returns:
        0 when done; 1 on failure, or when ``--count`` was not reached in time.
    """
    try:
        tls = tls_from_args(args)
    except TlsConfigError as exc:
        err.write(f"rocklet consume: {exc}\n")
        return EXIT_FAILED
    env = os.environ if environ is None else environ
    namesrv = args.namesrvAddr or env.get("NAMESRV_ADDR") or DEFAULT_NAMESRV
    group = args.group or TOOLS_CONSUMER_GROUP
    expression = args.tags or "*"
    printer = _Printer(args, out, err)
    consumer = PullConsumer(
        group,
        namesrv,
        instance_name="rocklet-consume",
        tls=tls,
        credentials=credentials_from(args, env),
    )
    tasks: list[asyncio.Task[None]] = []
    try:
        async with consumer:
            queues = await consumer.fetch_queues(args.topic)
            starts = {mq: await _start_offset(consumer, mq, args) for mq in queues}
            brokers = ", ".join(sorted({mq.broker_name for mq in queues}))
            where = "its committed offsets, else " if args.group else ""
            limit = f"after {args.timeout:g} s without a message" if args.timeout else "on Ctrl-C"
            err.write(
                f"reading {args.topic} ({len(queues)} queue(s) on {brokers}) from {where}"
                f"{args.start} as group {group}; stopping {limit}\n"
            )
            err.flush()
            batches: asyncio.Queue[Batch | Exception] = asyncio.Queue(_BACKLOG)
            tasks = [
                asyncio.create_task(_pull_queue(consumer, mq, at, expression, batches))
                for mq, at in starts.items()
            ]
            try:
                await printer.run(batches, stop or asyncio.Event())
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            if args.group:
                for mq, offset in printer.next_offsets.items():
                    await consumer.commit(mq, offset)
    except ClientError as exc:
        why = await describe_error(
            exc, namesrv, topic=args.topic, group=group, sending=False, tls=tls
        )
        before = f" ({printer.printed} message(s) were printed before)" if printer.printed else ""
        err.write(f"rocklet consume: {why}{before}\n")
        return EXIT_FAILED
    summary = f"received {printer.printed} message(s) from {args.topic}"
    if printer.timed_out:
        summary += f"; none arrived for {args.timeout:g} s"
    if args.count and printer.printed < args.count:
        err.write(f"rocklet consume: {summary}, fewer than --count {args.count}\n")
        return EXIT_FAILED
    err.write(summary + "\n")
    return 0


async def _main(args: argparse.Namespace) -> int:
    async with stop_on_signals() as stop:
        return await run_consume_async(args, sys.stdout, sys.stderr, stop=stop)


def run_consume(args: argparse.Namespace) -> int:
    """The ``rocklet consume`` entry point: run on a new event loop.

    Args:
        args: Parsed arguments.

    Returns:
        The exit code.
    """
    return run_loop(_main(args))
