"""ACL verbs of ``rocklet admin``: accounts and white lists of brokers with ``aclEnable``.

updateAclConfig, deleteAclConfig, updateGlobalWhiteAddr, clusterAclConfigVersion and
getAclConfig send the ACL admin requests (codes 50-54) with mqadmin's flags, to one
broker (``-b``) or every master of a cluster (``-c``). The account running the tool
must be ``admin: true`` on those brokers.

A cluster-wide change is sent to each master in turn and does not stop at the first
refusal: the output says which brokers took it, and the exit code is 1 if any did not,
so a partly applied change is never reported as done. The two reads do the same: what
each broker that answered holds, a line for each that refused, exit code 1.

getAclConfig masks secret keys unless ``--show-secrets`` is given. mqadmin prints
them in the clear; a terminal, a shell history or a support ticket is the wrong place
for them.
"""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Awaitable, Callable
from typing import Any, Final

from rocklet.admin.format import Output, Table
from rocklet.admin.tool import AdminTool
from rocklet.client.errors import ClientError
from rocklet.protocol import fastjson
from rocklet.protocol.codes import RequestCode
from rocklet.protocol.errors import BodyError
from rocklet.protocol.headers.acl import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)

__all__ = ["ACL_VERBS", "json_object"]

#: What a masked secret key shows.
_MASK: Final = "******"


async def _on_each(
    tool: AdminTool,
    args: argparse.Namespace,
    what: str,
    call: Callable[[str], Awaitable[object]],
) -> Output:
    """Run ``call`` on every target broker, reporting each one's outcome."""
    data: dict[str, Any] = {}
    notes: list[str] = []
    for addr in await tool.targets(args.clusterName, args.brokerAddr):
        try:
            await call(addr)
        except ClientError as exc:
            data[addr] = {"ok": False, "error": str(exc)}
            notes.append(f"{what} {addr} failed: {exc}")
            continue
        data[addr] = {"ok": True}
        notes.append(f"{what} {addr} success.")
    failed = any(not d["ok"] for d in data.values())
    return Output(data, notes=notes, exit_code=1 if failed else 0)


async def update_acl_config(tool: AdminTool, args: argparse.Namespace) -> Output:
    """updateAclConfig: add an account, or change the fields given of an existing one.

    As in RocketMQ, ``admin`` is always written: leaving out ``-m`` makes the account
    a non-admin one.
    """
    header = CreateAccessConfigRequestHeader(
        access_key=args.accessKey,
        secret_key=args.secretKey,
        white_remote_address=args.whiteRemoteAddress,
        admin=args.admin,
        default_topic_perm=args.defaultTopicPerm,
        default_group_perm=args.defaultGroupPerm,
        topic_perms=args.topicPerms,
        group_perms=args.groupPerms,
    )

    async def one(addr: str) -> None:
        await tool.call(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header)

    return await _on_each(tool, args, "create or update plain access config to", one)


async def delete_acl_config(tool: AdminTool, args: argparse.Namespace) -> Output:
    """deleteAclConfig: remove an account from the file that defines it."""
    header = DeleteAccessConfigRequestHeader(args.accessKey)

    async def one(addr: str) -> None:
        await tool.call(addr, RequestCode.DELETE_ACL_CONFIG, header)

    return await _on_each(tool, args, "delete plain access config account from", one)


async def update_global_white_addr(tool: AdminTool, args: argparse.Namespace) -> Output:
    """updateGlobalWhiteAddr: replace a file's global white list (the default file's)."""
    header = UpdateGlobalWhiteAddrsConfigRequestHeader(
        args.globalWhiteRemoteAddresses, args.aclFileFullPath
    )

    async def one(addr: str) -> None:
        await tool.call(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header)

    return await _on_each(tool, args, "update global white remote addresses to", one)


async def _read_each(
    tool: AdminTool, args: argparse.Namespace, read: Callable[[str], Awaitable[Any]]
) -> tuple[dict[str, Any], list[str]]:
    """``read`` from every target broker; a refusal is noted and the others still read.

    Returns:
        Each broker's result (or ``{"ok": false, "error": ...}``) and the notes of those
        that failed.
    """
    data: dict[str, Any] = {}
    notes: list[str] = []
    for addr in await tool.targets(args.clusterName, args.brokerAddr):
        try:
            data[addr] = await read(addr)
        except (ClientError, BodyError) as exc:
            data[addr] = {"ok": False, "error": str(exc)}
            notes.append(f"{addr} failed: {exc}")
    return data, notes


def json_object(text: str | bytes, what: str) -> dict[str, Any]:
    """A JSON object from a broker's answer; a clear error for anything else.

    Raises:
        BodyError: Not JSON, or not an object.
    """
    try:
        obj = fastjson.loads(text)
    except ValueError as exc:
        raise BodyError(f"the broker's {what} is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise BodyError(f"the broker's {what} is not a JSON object")
    return obj


def _local_time(epoch_ms: int) -> str | None:
    if epoch_ms <= 0:
        return None
    stamp = datetime.datetime.fromtimestamp(epoch_ms / 1000)
    return stamp.strftime("%Y-%m-%d %H:%M:%S")  # as mqadmin prints it: to the second


async def cluster_acl_config_version(tool: AdminTool, args: argparse.Namespace) -> Output:
    """clusterAclConfigVersion: each ACL file's data version on each broker."""
    rows: list[list[object]] = []

    async def read(addr: str) -> dict[str, Any]:
        answer = await tool.call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
        header = GetBrokerAclConfigResponseHeader.from_ext_fields(answer.ext_fields)
        files = json_object(header.all_acl_file_version or "{}", "allAclFileVersion")
        for path, raw in sorted(files.items()):
            version = raw if isinstance(raw, dict) else {}
            rows.append(
                [
                    header.cluster_name,
                    header.broker_name,
                    header.broker_addr,
                    path,
                    version.get("counter", 0),
                    _local_time(int(version.get("timestamp", 0))),
                ]
            )
        return {
            "clusterName": header.cluster_name,
            "brokerName": header.broker_name,
            "brokerAddr": header.broker_addr,
            "version": json_object(header.version, "ACL version"),
            "allAclFileVersion": files,
        }

    data, notes = await _read_each(tool, args, read)
    headers = (
        "Cluster Name",
        "Broker Name",
        "Broker Addr",
        "AclFilePath",
        "AclConfigVersionNum",
        "AclLastUpdateTime",
    )
    return Output(data, [Table(headers, rows)], notes=notes, exit_code=1 if notes else 0)


def _account_row(account: dict[str, Any]) -> list[object]:
    return [
        account.get("accessKey"),
        account.get("secretKey"),
        bool(account.get("admin", False)),
        account.get("whiteRemoteAddress") or None,
        account.get("defaultTopicPerm"),
        account.get("defaultGroupPerm"),
        ",".join(account.get("topicPerms") or []) or None,
        ",".join(account.get("groupPerms") or []) or None,
    ]


async def get_acl_config(tool: AdminTool, args: argparse.Namespace) -> Output:
    """getAclConfig: every account and the global white list of each broker."""
    tables: list[Table] = []
    headers = (
        "AccessKey",
        "SecretKey",
        "Admin",
        "WhiteRemoteAddress",
        "DefaultTopicPerm",
        "DefaultGroupPerm",
        "TopicPerms",
        "GroupPerms",
    )

    async def read(addr: str) -> dict[str, Any]:
        answer = await tool.call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
        config = json_object(answer.body or b"{}", "ACL configuration")
        accounts: list[dict[str, Any]] = config.get("plainAccessConfigs") or []
        if not args.show_secrets:
            accounts = [{**a, "secretKey": _MASK} if "secretKey" in a else a for a in accounts]
        white = config.get("globalWhiteAddrs") or []
        rows = [_account_row(a) for a in accounts]
        title = f"Broker {addr}: globalWhiteRemoteAddresses: [{', '.join(white)}]"
        tables.append(Table(headers, rows, title))
        return {"globalWhiteAddrs": white, "plainAccessConfigs": accounts}

    data, notes = await _read_each(tool, args, read)
    return Output(data, tables, notes=notes, exit_code=1 if notes else 0)


#: This module's verbs, by mqadmin name (and the other names mqadmin accepts).
ACL_VERBS = {
    "updateAclConfig": update_acl_config,
    "deleteAclConfig": delete_acl_config,
    "deleteAccessConfig": delete_acl_config,
    "updateGlobalWhiteAddr": update_global_white_addr,
    "clusterAclConfigVersion": cluster_acl_config_version,
    "getAclConfig": get_acl_config,
    "getAccessConfigSubCommand": get_acl_config,
}
