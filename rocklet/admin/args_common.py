"""Flag helpers the ``rocklet admin`` argument modules share (no SDK module loaded)."""

from __future__ import annotations

import argparse

__all__ = ["add_target", "parse_bool"]


def parse_bool(text: str) -> bool:
    """Parse mqadmin's ``true`` / ``false`` flag values (any case).

    Raises:
        argparse.ArgumentTypeError: Anything else.
    """
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")
    return lowered == "true"


def add_target(p: argparse.ArgumentParser, what: str, cluster_long: str = "clusterName") -> None:
    """``-b BROKER`` or ``-c CLUSTER`` (every master of it), as mqadmin takes them.

    Args:
        p: The verb's parser.
        what: The verb's action, for the help text ("update", "read the ACL of").
        cluster_long: The long name of ``-c`` (mqadmin's clean-ups call it ``cluster``).
    """
    p.add_argument("-b", "--brokerAddr", help=f"{what} this broker (host:port)")
    p.add_argument(
        "-c", f"--{cluster_long}", dest=cluster_long, help=f"{what} every master of this cluster"
    )
