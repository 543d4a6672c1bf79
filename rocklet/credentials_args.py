"""``--access-key`` / ``--secret-key`` for the client commands (produce, consume, admin).

Without them the environment's ``ROCKLET_ACCESS_KEY`` / ``ROCKLET_SECRET_KEY`` are used;
prefer those for the secret, which on a command line is visible to every user of the
machine (``ps``). Requests are then signed as RocketMQ's ACL expects (docs/security.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from rocklet.broker.config import ConfigError
from rocklet.protocol.acl import Credentials

__all__ = ["add_credential_args", "credentials_from"]


def add_credential_args(p: argparse.ArgumentParser) -> None:
    """Add the two options to a client command's parser."""
    p.add_argument(
        "--access-key",
        help="ACL account to sign requests as (default: $ROCKLET_ACCESS_KEY; none: unsigned)",
    )
    p.add_argument(
        "--secret-key",
        help="its secret key (default: $ROCKLET_SECRET_KEY, which keeps it out of 'ps')",
    )


def credentials_from(args: argparse.Namespace, environ: Mapping[str, str]) -> Credentials | None:
    """The credentials the options or the environment give, or ``None``.

    Raises:
        ConfigError: Only one of the two keys is given.
    """
    access_key = getattr(args, "access_key", None) or environ.get("ROCKLET_ACCESS_KEY")
    secret_key = getattr(args, "secret_key", None) or environ.get("ROCKLET_SECRET_KEY")
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise ConfigError("an access key and a secret key are both needed to sign requests")
    return Credentials(access_key, secret_key)
