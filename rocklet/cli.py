"""Entry point of the ``rocklet`` command: servers, produce/consume, admin, cluster, bench.

Each subcommand's implementation is imported only when it runs, so a server process
never loads the SDK and ``rocklet --help`` answers at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import structlog

from rocklet import __version__
from rocklet.admin.args import add_admin_parser
from rocklet.benchsuite.cli import add_bench_parser
from rocklet.broker.config import (
    BrokerConfig,
    ConfigError,
    NamesrvConfig,
    load_broker_config,
    load_namesrv_config,
)
from rocklet.broker.tls_config import TlsSettings, parse_system_properties, tls_settings
from rocklet.broker.tls_keys import without_secrets
from rocklet.cluster import add_cluster_parser
from rocklet.help_text import plain_parser_help
from rocklet.logging import configure_logging
from rocklet.message_args import add_consume_parser, add_produce_parser
from rocklet.port_holders import explain_bind_error
from rocklet.protocol import compiled
from rocklet.store.directory import StoreDirectoryError
from rocklet.store_cmd import add_store_parser
from rocklet.transport.heap import retain_freed_memory
from rocklet.transport.loop import loop_name
from rocklet.transport.loop import run as run_loop

__all__ = ["build_parser", "main", "tls_settings_of"]

_log = structlog.get_logger(__name__)

#: Exit code for bad arguments or configuration (argparse uses 2 as well).
EXIT_USAGE = 2
#: Exit code for a server that cannot start (port taken, store in use or unwritable).
EXIT_START = 1

#: ``rocklet --help``: what the command is and how to start (not this module's docstring,
#: which is written for the code's readers).
DESCRIPTION = """\
Rocklet: a RocketMQ 4.x compatible name server and broker, with admin and benchmark tools.

Start a name server and a broker in one process (Ctrl-C stops it), then see
messages flow:
  rocklet standalone --data-dir ./data
  rocklet produce -t demo --count 10
  rocklet consume -t demo --count 10

Each command explains its options: rocklet COMMAND --help"""


def _common(parser: argparse.ArgumentParser, level: str = "INFO") -> None:
    parser.add_argument("--log-json", action="store_true", help="write JSON log lines")
    parser.add_argument(
        "--log-level",
        default=level,
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        help=f"minimum log level (default: {level})",
    )


def _system_properties(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-D",
        dest="system_properties",
        action="append",
        metavar="KEY=VALUE",
        help="a RocketMQ TLS property, as the JVM's -D (e.g. -D tls.server.mode=enforcing "
        "-D tls.server.certPath=server.pem -D tls.config.file=tls.properties); repeatable",
    )


def _acl_file(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--acl-file",
        type=Path,
        help="plain_acl.yml used when aclEnable=true (default: $ROCKETMQ_HOME/conf/"
        "plain_acl.yml; without ROCKETMQ_HOME, conf/plain_acl.yml under the store root, "
        "or under the working directory for a name server)",
    )


def _advertised(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--broker-ip1",
        metavar="ADDR",
        help="the address the broker gives clients, overriding brokerIP1 of the config "
        "(default: brokerIP1, else 127.0.0.1); clients connect to ADDR:listenPort",
    )


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand.

    Returns:
        The parser.
    """
    parser = argparse.ArgumentParser(
        prog="rocklet",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=(
            # The binary too: builds of one Python version differ by ~12 % in speed.
            f"rocklet {__version__} (Python {platform.python_version()} at "
            f"{Path(sys.executable).resolve()}, {loop_name()}, codecs: {compiled.describe()})"
        ),
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    namesrv = sub.add_parser("namesrv", help="run a name server")
    namesrv.add_argument("-c", "--config", type=Path, help="namesrv properties file")
    namesrv.add_argument("--port", type=int, help="listen port (default: 9876; 0 = any free)")
    namesrv.add_argument("--host", help="bind address (default: 0.0.0.0)")
    namesrv.add_argument(
        "--kv-config",
        type=Path,
        help="the KV table's file (default: kvConfigPath of -c, else ~/namesrv/kvConfig.json)",
    )
    _system_properties(namesrv)
    _acl_file(namesrv)
    _common(namesrv)

    broker = sub.add_parser("broker", help="run a broker")
    broker.add_argument("-c", "--config", type=Path, required=True, help="broker.conf file")
    broker.add_argument("--namesrv", help="name server address(es), host:port;host:port")
    broker.add_argument("--listen-port", type=int, help="client port (default: 10911)")
    broker.add_argument("--data-dir", type=Path, help="store root directory (storePathRootDir)")
    broker.add_argument(
        "--host",
        help="address to bind (default: listenHost of the config, else 0.0.0.0, every interface)",
    )
    _advertised(broker)
    _system_properties(broker)
    _acl_file(broker)
    _common(broker)

    standalone = sub.add_parser("standalone", help="run a name server and a broker together")
    standalone.add_argument("-c", "--config", type=Path, help="broker.conf file")
    standalone.add_argument(
        "--data-dir",
        type=Path,
        help="store root (default: the config file's storePathRootDir, else ./data)",
    )
    standalone.add_argument("--namesrv-port", type=int, default=9876, help="(default: 9876)")
    standalone.add_argument("--listen-port", type=int, help="broker port (default: 10911)")
    standalone.add_argument(
        "--host",
        help="address both servers bind (default: listenHost of the config, else 127.0.0.1, "
        "this machine only; 0.0.0.0 for every interface, with --broker-ip1 an address "
        "clients reach)",
    )
    _advertised(standalone)
    _system_properties(standalone)
    _acl_file(standalone)
    _common(standalone)

    add_produce_parser(sub)
    _common(sub.choices["produce"], "WARNING")  # a tool's output, not a server's log
    add_consume_parser(sub)
    _common(sub.choices["consume"], "WARNING")
    add_admin_parser(sub)
    _common(sub.choices["admin"], "WARNING")
    add_cluster_parser(sub)
    _common(sub.choices["cluster"])
    add_bench_parser(sub)
    _common(sub.choices["bench"], "WARNING")
    add_store_parser(sub)
    _common(sub.choices["store"], "WARNING")
    health = sub.add_parser(
        "healthcheck",
        help="check that the Rocklet server of this container answers (the image's check)",
        description="Read the command line of the server process (PID 1 in a container), "
        "find its role and ports, and ask each port a question only that role answers. "
        "Exit status: 0 healthy, 1 not answering, 2 nothing to check.",
    )
    health.add_argument("--pid", type=int, default=1, help="the server's process id (1)")
    health.add_argument("--timeout", type=float, default=5.0, help="seconds per request (5)")
    _common(health, "WARNING")
    plain_parser_help(parser)
    return parser


def namesrv_config(args: argparse.Namespace) -> NamesrvConfig:
    """The name server's config from ``rocklet namesrv`` arguments.

    Args:
        args: Parsed arguments.

    Returns:
        The config (file values, then command-line overrides).

    Raises:
        ConfigError: Unreadable file or invalid value.
    """
    overrides = {
        "listen_port": args.port,
        "listen_host": args.host,
        "acl_file": args.acl_file,
        "kv_config_path": args.kv_config,
    }
    return load_namesrv_config(args.config, overrides)


def broker_config(args: argparse.Namespace) -> BrokerConfig:
    """The broker's config from ``rocklet broker`` or ``rocklet standalone`` arguments.

    Args:
        args: Parsed arguments.

    Returns:
        The config (file values, then command-line overrides).

    Raises:
        ConfigError: Unreadable file or invalid value.
    """
    overrides: dict[str, object] = {
        "listen_port": args.listen_port,
        "store_path_root_dir": args.data_dir,
        "broker_ip1": args.broker_ip1,
        "listen_host": args.host,
        "acl_file": args.acl_file,
    }
    defaults: dict[str, object] = {}
    if args.command == "standalone":
        overrides["namesrv_addr"] = f"127.0.0.1:{args.namesrv_port}"
        defaults["store_path_root_dir"] = Path("data")
        defaults["listen_host"] = "127.0.0.1"  # a laptop's server stays on the laptop
    else:
        overrides["namesrv_addr"] = args.namesrv
    return load_broker_config(args.config, overrides, defaults=defaults)


def tls_settings_of(args: argparse.Namespace, conf: Mapping[str, str]) -> TlsSettings:
    """The TLS settings of a server command: its config file's, ``-D`` and the TLS file.

    Args:
        args: Parsed ``namesrv``, ``broker`` or ``standalone`` arguments.
        conf: The properties of the config file the command read (its ``extra``).

    Returns:
        The settings.

    Raises:
        ConfigError: An invalid TLS key or value, or an unreadable TLS file.
    """
    system = parse_system_properties(getattr(args, "system_properties", None))
    return tls_settings(conf, system)


def _run_namesrv(args: argparse.Namespace) -> int:
    from rocklet.serve import serve_namesrv

    config = namesrv_config(args)
    tls = tls_settings_of(args, config.extra)
    _log.debug("heap", retain_freed_memory=retain_freed_memory())
    try:
        run_loop(serve_namesrv(config, tls=tls))
    except OSError as exc:
        return _cannot_start("namesrv", exc, "--port, or listenPort in its config file")
    return 0


def _port_hint(command: str, config: BrokerConfig) -> str:
    """How to move a broker to other ports, for a start that found one taken."""
    vip = "fastListenPort" if config.fast_listen_port is not None else "that port-2"
    ha = "haListenPort" if config.ha_listen_port is not None else "that port+1"
    ports = "--namesrv-port, --listen-port" if command == "standalone" else "--listen-port"
    return (
        f"{ports} (or listenPort in broker.conf; the broker also binds {vip} for its VIP "
        f"port and {ha} for replication)"
    )


def _cannot_start(command: str, exc: OSError, hint: str) -> int:
    # A taken port gets one plain line naming its holder; other errors are logged.
    line = explain_bind_error(exc, hint)
    if line is None:
        _log.error(f"{command} cannot start", error=str(exc))
    else:
        sys.stderr.write(f"rocklet {command}: {line}\n")
    return EXIT_START


def _run_broker(args: argparse.Namespace) -> int:
    from rocklet.serve import serve_broker, serve_standalone

    config = broker_config(args)
    tls = tls_settings_of(args, config.extra)
    _log.debug(
        "broker config",
        config=dataclasses.replace(config, extra=without_secrets(config.extra)),
    )
    _log.debug("heap", retain_freed_memory=retain_freed_memory())
    try:
        if args.command == "standalone":
            run_loop(serve_standalone(config, args.namesrv_port, tls=tls))
        else:
            run_loop(serve_broker(config, tls=tls))
    except StoreDirectoryError as exc:
        # One plain line a person can act on (who holds the store, which directory
        # cannot be written), as for configuration errors.
        sys.stderr.write(f"rocklet {args.command}: {exc}\n")
        return EXIT_START
    except OSError as exc:
        return _cannot_start(args.command, exc, _port_hint(args.command, config))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: Arguments without the program name; ``sys.argv[1:]`` by default.

    Returns:
        The process exit code.
    """
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(json=args.log_json, level=args.log_level)
    try:
        if args.command == "namesrv":
            return _run_namesrv(args)
        if args.command == "admin":
            from rocklet.admin.run import run_admin

            return run_admin(args)
        if args.command == "produce":
            from rocklet.produce import run_produce

            return run_produce(args)
        if args.command == "consume":
            from rocklet.consume import run_consume

            return run_consume(args)
        if args.command == "cluster":
            from rocklet.cluster import run_cluster

            return run_cluster(args)
        if args.command == "bench":
            from rocklet.benchsuite.cli import run_bench

            return run_bench(args)
        if args.command == "store":
            from rocklet.store_cmd import run_store

            return run_store(args)
        if args.command == "healthcheck":
            from rocklet.healthcheck import run_healthcheck

            return run_healthcheck(args)
        return _run_broker(args)
    except ConfigError as exc:
        sys.stderr.write(f"rocklet {args.command}: {exc}\n")
        return EXIT_USAGE
