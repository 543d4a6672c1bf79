"""The TLS options of the client commands (``produce``, ``consume``, ``admin``).

Parsing them loads no SDK module; :func:`tls_from_args` builds the context when the
command runs. As in the SDK, TLS verifies the servers by default; ``--tls-insecure``
is the explicit, documented way out.
"""

from __future__ import annotations

import argparse
import ssl

__all__ = ["TLS_HELP", "add_tls_arguments", "tls_from_args"]

TLS_HELP = """\
TLS: --tls connects to the name servers and brokers over TLS and verifies their
certificates (the system's CAs, or --tls-ca-file) and host names. --tls-cert-file and
--tls-key-file present a client certificate to servers that require one. Any --tls-*
option implies --tls."""


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--tls`` and its companions to a client command.

    Args:
        parser: The command's parser.
    """
    group = parser.add_argument_group("TLS", TLS_HELP)
    group.add_argument("--tls", action="store_true", help="connect over TLS, verifying servers")
    group.add_argument(
        "--tls-ca-file", metavar="PEM", help="CA certificates to verify servers with"
    )
    group.add_argument("--tls-cert-file", metavar="PEM", help="client certificate (mutual TLS)")
    group.add_argument("--tls-key-file", metavar="PEM", help="the client certificate's key")
    group.add_argument(
        "--tls-insecure",
        action="store_true",
        help="TLS without verifying the servers: anyone in the middle can read and change "
        "the traffic (insecure; tests only)",
    )


def tls_from_args(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The client context the TLS options ask for, or ``None`` for plain TCP.

    Args:
        args: Parsed arguments of a command given :func:`add_tls_arguments`.

    Returns:
        The context.

    Raises:
        TlsConfigError: A file is missing or does not load.
    """
    from rocklet.transport.tls import client_context

    wanted = (
        args.tls or args.tls_insecure or args.tls_ca_file or args.tls_cert_file or args.tls_key_file
    )
    if not wanted:
        return None
    return client_context(
        ca_file=args.tls_ca_file,
        cert_file=args.tls_cert_file,
        key_file=args.tls_key_file,
        verify=not args.tls_insecure,
    )
