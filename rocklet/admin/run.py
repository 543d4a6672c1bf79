"""Run one ``rocklet admin`` verb: connect, call, print a table or JSON, exit code."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping
from typing import Final, TextIO

from rocklet.admin.args import DEFAULT_NAMESRV
from rocklet.admin.format import Output, print_output
from rocklet.admin.tool import AdminTool
from rocklet.admin.verbs import VERBS
from rocklet.client.errors import (
    BrokerError,
    ClientError,
    ConnectError,
    NoRouteError,
    NotANameServerError,
)
from rocklet.credentials_args import credentials_from
from rocklet.explain import not_a_name_server, refusal
from rocklet.protocol.errors import ProtocolError
from rocklet.stop_signals import stop_on_signals, until_stopped
from rocklet.tls_args import tls_from_args
from rocklet.transport.loop import run as run_loop
from rocklet.transport.tls import TlsConfigError

__all__ = ["UNTIL_STOPPED", "run_admin", "run_admin_async"]

EXIT_FAILED: Final = 1
#: A one-shot verb stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED: Final = 130
#: Verbs that print round after round until stopped (Ctrl-C, SIGTERM) or ``--rounds``.
UNTIL_STOPPED: Final = frozenset({"clusterRT", "startMonitoring"})


def _describe(exc: Exception, namesrv: str) -> str:
    if isinstance(exc, ConnectError):
        peer = exc.peer or "?"
        role = "name server" if peer in namesrv.replace(",", ";").split(";") else "broker"
        return f"cannot reach the {role} at {peer}: {exc}"
    if isinstance(exc, NoRouteError):
        return f"topic {exc.topic!r} does not exist (the name server has no route for it)"
    if isinstance(exc, NotANameServerError):
        return not_a_name_server(exc)
    if isinstance(exc, BrokerError):
        return refusal(exc)
    return str(exc)


async def run_admin_async(
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    environ: Mapping[str, str] | None = None,
    stop: asyncio.Event | None = None,
) -> int:
    """Run one admin verb and print its result.

    Args:
        args: Parsed ``rocklet admin`` arguments.
        out: Where results go.
        err: Where the error line goes.
        environ: The environment (``NAMESRV_ADDR``); ``os.environ`` by default.
        stop: Set to stop the verb (Ctrl-C): a verb that runs until stopped
            (:data:`UNTIL_STOPPED`) then ends with what it printed so far, exit 0.

    Returns:
        The exit code: 0, or 1 when the command failed (or, for storeCheck, found
        problems).
    """
    env = os.environ if environ is None else environ
    namesrv = args.namesrvAddr or env.get("NAMESRV_ADDR") or DEFAULT_NAMESRV
    try:
        tls = tls_from_args(args)
    except TlsConfigError as exc:
        err.write(f"rocklet admin {args.verb}: {exc}\n")
        return EXIT_FAILED
    try:
        credentials = credentials_from(args, env)
        # A verb that runs until stopped (clusterRT) prints its rows here as they come.
        args.stream = out
        async with AdminTool(namesrv, args.timeout, tls, credentials) as tool:
            work = VERBS[args.verb](tool, args)
            if stop is None:
                output = await work
            elif (done := await until_stopped(stop, work)) is not None:
                output = done
            else:  # stopped: its rows are printed already
                output = Output(None, streamed=True)
    except (ClientError, ProtocolError) as exc:
        err.write(f"rocklet admin {args.verb}: {_describe(exc, namesrv)}\n")
        return EXIT_FAILED
    print_output(output, out, as_json=args.json)
    return output.exit_code


async def _main(args: argparse.Namespace) -> int:
    if args.verb not in UNTIL_STOPPED:
        return await run_admin_async(args, sys.stdout, sys.stderr)
    async with stop_on_signals() as stop:
        return await run_admin_async(args, sys.stdout, sys.stderr, stop=stop)


def run_admin(args: argparse.Namespace) -> int:
    """Run one admin verb on a new event loop (the ``rocklet admin`` entry point).

    SIGINT and SIGTERM end a verb of :data:`UNTIL_STOPPED` cleanly (exit 0); Ctrl-C
    during any other verb interrupts it (exit 130).

    Args:
        args: Parsed ``rocklet admin`` arguments.

    Returns:
        The exit code.
    """
    try:
        return run_loop(_main(args))
    except KeyboardInterrupt:
        sys.stderr.write(f"rocklet admin {args.verb}: interrupted\n")
        return EXIT_INTERRUPTED
