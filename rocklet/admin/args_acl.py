"""Flags of the ``rocklet admin`` ACL verbs, with mqadmin's short and long names.

Like :mod:`rocklet.admin.args`, this loads no SDK module.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Final

from rocklet.admin.args_common import add_target, parse_bool

__all__ = ["ACL_VERB_ARGS"]

_PERMS: Final = "DENY, PUB, SUB or PUB|SUB"


def _access_key(p: argparse.ArgumentParser) -> None:
    p.add_argument("-a", "--accessKey", required=True, help="the account's access key")


def _update(p: argparse.ArgumentParser) -> None:
    add_target(p, "change the ACL of")
    _access_key(p)
    p.add_argument(
        "-s",
        "--secretKey",
        help="its secret key: always needed, also to change an existing account (as mqadmin)",
    )
    p.add_argument(
        "-w", "--whiteRemoteAddress", help="addresses it may use unsigned (its rights still apply)"
    )
    p.add_argument("-i", "--defaultTopicPerm", help=f"for topics not listed: {_PERMS}")
    p.add_argument("-u", "--defaultGroupPerm", help=f"for groups not listed: {_PERMS}")
    p.add_argument("-t", "--topicPerms", help="topicA=PUB,topicB=SUB,...")
    p.add_argument("-g", "--groupPerms", help="groupA=SUB,groupB=DENY,...")
    p.add_argument(
        "-m",
        "--admin",
        type=parse_bool,
        default=False,
        help="may send admin requests; left out: false, also for an existing admin account",
    )


def _delete(p: argparse.ArgumentParser) -> None:
    add_target(p, "delete the account from")
    _access_key(p)


def _white(p: argparse.ArgumentParser) -> None:
    add_target(p, "change the white list of")
    p.add_argument(
        "-g",
        "--globalWhiteRemoteAddresses",
        required=True,
        help="the new list, e.g. 10.10.103.*,192.168.0.*",
    )
    p.add_argument("-p", "--aclFileFullPath", help="the ACL file to change (the default one)")


def _read(p: argparse.ArgumentParser) -> None:
    add_target(p, "read the ACL of")


def _get(p: argparse.ArgumentParser) -> None:
    _read(p)
    p.add_argument(
        "--show-secrets",
        action="store_true",
        help="print secret keys in the clear (masked by default)",
    )


ACL_VERB_ARGS: Final[Mapping[str, tuple[str, Callable[[argparse.ArgumentParser], None]]]] = {
    "updateAclConfig": ("add or change an ACL account", _update),
    "deleteAclConfig": ("delete an ACL account", _delete),
    "deleteAccessConfig": ("delete an ACL account (deleteAclConfig)", _delete),
    "updateGlobalWhiteAddr": ("replace the ACL global white list", _white),
    "clusterAclConfigVersion": ("the ACL files' versions", _read),
    "getAclConfig": ("every ACL account and the global white list", _get),
    "getAccessConfigSubCommand": ("every ACL account (getAclConfig)", _get),
}
