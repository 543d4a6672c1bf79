"""``rocklet healthcheck``: does the Rocklet server of this container answer?

A Docker image has one ``HEALTHCHECK`` whatever role a container gives it, so the check
finds the role itself: it reads the server's command line (PID 1 in a container, under
``docker run --init`` too), parses it with the real ``rocklet`` parser and config
loaders, and asks each port the server listens on a question only that role answers:
GET_BROKER_CLUSTER_INFO for a name server, GET_BROKER_RUNTIME_INFO for a broker (on
its own ``listenPort``). It needs no SDK: one connection, one request.

A server in TLS ``enforcing`` mode is asked over TLS (with the server's
``tls.client.*`` certificate when it has one, for a port that requires client
certificates). The check does not verify the server's certificate: it connects over
loopback to the process it was pointed at, sends no secret, and whether that
certificate would verify for real clients (it need not name 127.0.0.1) is not what
it checks.

Exit status: 0 healthy, 1 not answering, 2 nothing to check (no such process, not a
Rocklet server, or a port chosen at start).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import ssl
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from rocklet.broker.config import ConfigError
from rocklet.broker.tls_config import TlsSettings
from rocklet.cli import broker_config, build_parser, namesrv_config, tls_settings_of
from rocklet.protocol import RemotingCommand, RequestCode, ResponseCode
from rocklet.transport.dial import open_connection
from rocklet.transport.errors import RemotingError
from rocklet.transport.loop import run as run_loop
from rocklet.transport.tls import TlsConfigError, TlsMode, client_context

__all__ = ["Check", "HealthcheckError", "checks_for", "run_healthcheck", "server_command_line"]

EXIT_UNHEALTHY: Final = 1
EXIT_UNKNOWN: Final = 2
SERVER_COMMANDS: Final = ("namesrv", "broker", "standalone")
#: The request each role answers (a broker does not serve the name server's and back).
_QUESTION: Final = {
    "namesrv": RequestCode.GET_BROKER_CLUSTER_INFO,
    "broker": RequestCode.GET_BROKER_RUNTIME_INFO,
}


class HealthcheckError(Exception):
    """What to check cannot be worked out (exit status 2)."""


@dataclass(frozen=True)
class Check:
    """One port to ask.

    Attributes:
        role: ``"namesrv"`` or ``"broker"``.
        host: Where to connect (the loopback address for a wildcard bind).
        port: The server's listen port.
        tls: Ask over TLS with this context (the server is in enforcing mode).
    """

    role: str
    host: str
    port: int
    tls: ssl.SSLContext | None = None


def _local(host: str) -> str:
    return {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    start = next((i for i, arg in enumerate(argv) if arg in SERVER_COMMANDS), None)
    if start is None:
        raise HealthcheckError(
            f"not a Rocklet server (no {', '.join(SERVER_COMMANDS)} in {' '.join(argv)!r})"
        )
    usage = io.StringIO()
    try:
        with contextlib.redirect_stderr(usage):
            return build_parser().parse_args(list(argv[start:]))
    except SystemExit:
        raise HealthcheckError(f"cannot read the server's arguments: {usage.getvalue()}") from None


def checks_for(argv: Sequence[str], cwd: Path) -> list[Check]:
    """The ports a Rocklet server started with ``argv`` listens on, and their roles.

    Args:
        argv: The server's whole command line (interpreter and wrappers included).
        cwd: The server's working directory (relative config paths are relative to it).

    Returns:
        One check per port: the name server's, then the broker's.

    Raises:
        HealthcheckError: Not a server command, unreadable config, or a port of 0.
    """
    args = _parse(argv)
    if getattr(args, "config", None) is not None:
        args.config = cwd / args.config
    if getattr(args, "data_dir", None) is not None:
        args.data_dir = cwd / args.data_dir
    try:
        if args.command == "namesrv":
            ns = namesrv_config(args)
            tls = _tls_for(tls_settings_of(args, ns.extra))
            checks = [Check("namesrv", _local(ns.listen_host), ns.listen_port, tls)]
        else:
            broker = broker_config(args)
            tls = _tls_for(tls_settings_of(args, broker.extra))
            host = _local(broker.listen_host)
            checks = [Check("broker", host, broker.listen_port, tls)]
            if args.command == "standalone":
                checks.insert(0, Check("namesrv", host, args.namesrv_port, tls))
    except (ConfigError, TlsConfigError) as exc:
        raise HealthcheckError(f"cannot read the server's configuration: {exc}") from None
    for check in checks:
        if check.port == 0:
            raise HealthcheckError(
                f"the {check.role} listens on a port chosen at start (0); give it a fixed port"
            )
    return checks


def _tls_for(settings: TlsSettings) -> ssl.SSLContext | None:
    """How to reach a server with these settings: plain unless it enforces TLS."""
    if settings.server.mode is not TlsMode.ENFORCING:
        return None
    return client_context(
        cert_file=settings.client_cert_path,
        key_file=settings.client_key_path,
        key_password=settings.client_key_password,
        verify=False,  # see the module's docstring
    )


def server_command_line(pid: int) -> tuple[list[str], Path]:
    """The command line and working directory of process ``pid`` (Linux ``/proc``).

    Raises:
        HealthcheckError: No such process, or not readable.
    """
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        cwd = Path(f"/proc/{pid}/cwd").readlink()
    except OSError as exc:
        raise HealthcheckError(f"cannot read process {pid}: {exc.strerror}") from None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part], cwd


async def probe(check: Check, timeout_s: float) -> str | None:
    """Ask one port its role's question.

    Returns:
        ``None`` when it answered as that role should, else what went wrong.
    """
    where = f"{check.role} at {check.host}:{check.port}"
    try:
        async with await open_connection(check.host, check.port, tls=check.tls) as conn:
            answer = await conn.request(RemotingCommand(code=_QUESTION[check.role]), timeout_s)
    except (OSError, RemotingError) as exc:
        return f"{where} does not answer: {exc}"
    if answer.code != ResponseCode.SUCCESS:
        return f"{where} answered code {answer.code}: {answer.remark or '(no remark)'}"
    return None


async def run_healthcheck_async(pid: int, timeout_s: float, out: TextIO, err: TextIO) -> int:
    """Check the Rocklet server running as ``pid``.

    Args:
        pid: The server's process id (1 in a container).
        timeout_s: Timeout of each request.
        out: Where the healthy line goes.
        err: Where problems go.

    Returns:
        0 healthy, 1 not answering, 2 nothing to check.
    """
    try:
        checks = checks_for(*server_command_line(pid))
    except HealthcheckError as exc:
        err.write(f"rocklet healthcheck: {exc}\n")
        return EXIT_UNKNOWN
    problems = [p for p in [await probe(check, timeout_s) for check in checks] if p]
    if problems:
        err.write("".join(f"rocklet healthcheck: {p}\n" for p in problems))
        return EXIT_UNHEALTHY
    out.write(", ".join(f"{c.role} at {c.host}:{c.port}" for c in checks) + " answered\n")
    return 0


def run_healthcheck(args: argparse.Namespace) -> int:
    """The ``rocklet healthcheck`` entry point.

    Args:
        args: Parsed arguments (``pid``, ``timeout``).

    Returns:
        The exit code.
    """
    return run_loop(run_healthcheck_async(args.pid, args.timeout, sys.stdout, sys.stderr))
