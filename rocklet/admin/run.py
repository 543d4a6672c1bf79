"""Run one ``rocklet admin`` verb: connect, call, print a table or JSON, exit code."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Final, TextIO

from rocklet.admin.args import DEFAULT_NAMESRV
from rocklet.admin.format import print_output
from rocklet.admin.tool import AdminTool
from rocklet.admin.verbs import VERBS
from rocklet.client.errors import BrokerError, ClientError, ConnectError, NoRouteError
from rocklet.credentials_args import credentials_from
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.errors import ProtocolError
from rocklet.tls_args import tls_from_args
from rocklet.transport.loop import run as run_loop
from rocklet.transport.tls import TlsConfigError

__all__ = ["run_admin", "run_admin_async"]

EXIT_FAILED: Final = 1


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
            output = await VERBS[args.verb](tool, args)
    except (ClientError, ProtocolError) as exc:
        err.write(f"rocklet admin {args.verb}: {_describe(exc, namesrv)}\n")
        return EXIT_FAILED
    print_output(output, out, as_json=args.json)
    return output.exit_code


def run_admin(args: argparse.Namespace) -> int:
    """Run one admin verb on a new event loop (the ``rocklet admin`` entry point).

    Args:
        args: Parsed ``rocklet admin`` arguments.

    Returns:
        The exit code.
    """
    return run_loop(run_admin_async(args, sys.stdout, sys.stderr))
