"""The ACL admin requests (codes 50-54), as RocketMQ 4.9's ``AdminBrokerProcessor`` serves them.

=====================================  ==============================================
request                                answer
=====================================  ==============================================
UPDATE_AND_CREATE_ACL_CONFIG (50)      SUCCESS, or UPDATE_AND_CREATE_ACL_CONFIG_FAILED
                                       (209) with the reason
DELETE_ACL_CONFIG (51)                 SUCCESS, or DELETE_ACL_CONFIG_FAILED (210)
GET_BROKER_CLUSTER_ACL_INFO (52)       header: ``version`` (the default file's
                                       DataVersion JSON), ``allAclFileVersion`` (path
                                       to DataVersion), broker name/address/cluster
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53)  SUCCESS, or UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
                                       (211)
GET_BROKER_CLUSTER_ACL_CONFIG (54)     body ``{"globalWhiteAddrs":[...],
                                       "plainAccessConfigs":[...]}``
=====================================  ==============================================

The same processors serve a name server with ACL on (it then names itself in 52).
Nothing here logs a secret: edits are logged by access key.
"""

from __future__ import annotations

from typing import Any

import structlog

from rocklet.broker.acl.accounts import AclConfigError, DataVersion
from rocklet.broker.acl.files import AccountEdit, AclFiles
from rocklet.protocol import fastjson
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.acl import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from rocklet.transport import ProcessorRegistry, RequestContext

__all__ = ["AclAdmin", "register"]

log = structlog.get_logger(__name__)

#: Account fields as ``PlainAccessConfig`` has them, in fastjson's (sorted) order.
_ACCOUNT_FIELDS = (
    "accessKey",
    "admin",
    "defaultGroupPerm",
    "defaultTopicPerm",
    "groupPerms",
    "secretKey",
    "topicPerms",
    "whiteRemoteAddress",
)


def _split(text: str | None) -> list[str] | None:
    """``UtilAll.split(text, ",")``: ``None`` stays ``None``; blanks are dropped."""
    if text is None:
        return None
    return [item.strip() for item in text.split(",") if item.strip()]


def _plain_access_config(raw: dict[str, Any]) -> dict[str, Any]:
    """An account as ``PlainAccessConfig`` JSON (absent fields left out, as fastjson)."""
    out: dict[str, Any] = {}
    for key in _ACCOUNT_FIELDS:
        value = raw.get(key)
        if key == "admin":
            out[key] = value is True or str(value).lower() == "true"
        elif key in ("topicPerms", "groupPerms"):
            if value is not None:
                out[key] = [str(v) for v in (value if isinstance(value, list) else [value])]
        elif value is not None:
            out[key] = str(value)
    return out


class AclAdmin:
    """Serves the ACL admin requests. Event loop only.

    Args:
        files: The ACL files.
        broker_name: Named in GET_BROKER_CLUSTER_ACL_INFO.
        broker_addr: Likewise.
        cluster_name: Likewise.
    """

    def __init__(
        self, files: AclFiles, *, broker_name: str, broker_addr: str, cluster_name: str
    ) -> None:
        self._files = files
        self._broker_name = broker_name
        self._broker_addr = broker_addr
        self._cluster_name = cluster_name

    async def update_account(self, _ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """UPDATE_AND_CREATE_ACL_CONFIG (50)."""
        header = CreateAccessConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        fields: dict[str, Any] = {"accessKey": header.access_key}
        if header.secret_key:
            fields["secretKey"] = header.secret_key
        if header.white_remote_address is not None:
            fields["whiteRemoteAddress"] = header.white_remote_address
        fields["admin"] = header.admin
        if header.default_topic_perm:
            fields["defaultTopicPerm"] = header.default_topic_perm
        if header.default_group_perm:
            fields["defaultGroupPerm"] = header.default_group_perm
        if (topics := _split(header.topic_perms)) is not None:
            fields["topicPerms"] = topics
        if (groups := _split(header.group_perms)) is not None:
            fields["groupPerms"] = groups
        try:
            await self._files.update_account(AccountEdit(fields))
        except AclConfigError as exc:
            log.warning("ACL account not updated", access_key=header.access_key, error=str(exc))
            return cmd.make_response(
                ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, remark=str(exc)
            )
        log.info("ACL account updated", access_key=header.access_key, peer=_ctx.peer_address)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def delete_account(self, _ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """DELETE_ACL_CONFIG (51)."""
        header = DeleteAccessConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        try:
            deleted = await self._files.delete_account(header.access_key)
        except AclConfigError as exc:
            return cmd.make_response(ResponseCode.DELETE_ACL_CONFIG_FAILED, remark=str(exc))
        if not deleted:
            return cmd.make_response(
                ResponseCode.DELETE_ACL_CONFIG_FAILED,
                remark=f"The accesskey[{header.access_key}] corresponding to accessConfig has "
                "been deleted failed.",
            )
        log.info("ACL account deleted", access_key=header.access_key, peer=_ctx.peer_address)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def versions(self, _ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_ACL_INFO (52)."""
        versions = self._files.versions()
        default = versions.get(str(self._files.default_file), DataVersion())
        header = GetBrokerAclConfigResponseHeader(
            version=fastjson.dumps(default.to_dict()),
            all_acl_file_version=fastjson.dumps({p: v.to_dict() for p, v in versions.items()}),
            broker_name=self._broker_name,
            broker_addr=self._broker_addr,
            cluster_name=self._cluster_name,
        )
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields=header.to_ext_fields())

    async def update_global_white(
        self, _ctx: RequestContext, cmd: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53)."""
        header = UpdateGlobalWhiteAddrsConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        addresses = _split(header.global_white_addrs) or []
        try:
            await self._files.update_global_white(addresses, header.acl_file_full_path)
        except AclConfigError as exc:
            return cmd.make_response(
                ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, remark=str(exc)
            )
        log.info("ACL global white list updated", addresses=addresses, peer=_ctx.peer_address)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def all_config(self, _ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_ACL_CONFIG (54)."""
        white, accounts = self._files.all_config()
        body = {
            "globalWhiteAddrs": white,
            "plainAccessConfigs": [_plain_access_config(a) for a in accounts],
        }
        return cmd.make_response(ResponseCode.SUCCESS, body=fastjson.dumps(body).encode())


def register(registry: ProcessorRegistry, admin: AclAdmin) -> None:
    """Register the five ACL admin codes."""
    registry.register_all(
        {
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: admin.update_account,
            RequestCode.DELETE_ACL_CONFIG: admin.delete_account,
            RequestCode.GET_BROKER_CLUSTER_ACL_INFO: admin.versions,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: admin.update_global_white,
            RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: admin.all_config,
        }
    )
