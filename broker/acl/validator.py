"""The check run before every request: RocketMQ 4.9's ``PlainAccessValidator``.

:func:`needed_perms` is ``PlainAccessValidator.parse``: which topics and groups a request
touches and with which permission. :meth:`AccessValidator.refusal` is
``PlainPermissionManager.validate``, in its order:

1. a peer in ``globalWhiteRemoteAddresses`` passes, except with an ACL admin request
   (50-54), which goes on to the checks below (Rocklet: only admins read or edit the ACL);
2. no ``AccessKey``: refused; an unknown one: refused;
3. a ``Signature`` that is not the HmacSHA1 of the request: refused, unless the peer
   matches the account's ``whiteRemoteAddress`` (then no signature is needed);
4. a PUB on ``RMQ_SYS_TRACE_TOPIC`` passes (message traces);
5. an admin request code from a non-admin account: refused;
6. each resource needs its permission, from the account's map or its default.

RocketMQ 4.9.4 lets a peer matching the account's ``whiteRemoteAddress`` through at
step 3 with no further check: any request, admin or not, on any topic. Rocklet treats
it as that account's request, so the account's permissions and the admin rule still
apply: the address stands in for the signature, not for the account's rights.

A refusal is answered as Java's remoting layer answers the ``AclException`` its hook
throws: SYSTEM_ERROR, remark ``"<exception>: <message>, <first stack frame>"``; the
frames are 4.9.4's, so a tool matching on them sees what a RocketMQ broker sends.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Collection, Mapping
from typing import Final

from rocklet.broker.acl.accounts import PUB, SUB, AclTable, check_permission
from rocklet.broker.acl.addresses import normalise_ip
from rocklet.protocol.acl import ACCESS_KEY, SIGNATURE, signature
from rocklet.protocol.bodies.heartbeat import HeartbeatData
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.errors import ProtocolError
from rocklet.protocol.names import RETRY_PREFIX
from rocklet.transport.connection import Connection

__all__ = [
    "ACL_ADMIN_CODES",
    "ADMIN_CODES",
    "AccessValidator",
    "AclDenied",
    "needed_perms",
]

#: ``Permission.ADMIN_CODE``: only ``admin: true`` accounts may send these.
ADMIN_CODES: Final = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
    }
)
#: Rocklet also keeps the ACL admin requests to admins: in 4.9.4 any account may give
#: itself admin rights (50) or read every secret (54). A peer in the global white list
#: needs an admin account for them too (it passes every other check unsigned).
ACL_ADMIN_CODES: Final = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
        RequestCode.DELETE_ACL_CONFIG,
        RequestCode.GET_BROKER_CLUSTER_ACL_INFO,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
    }
)
_TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
_EXCEPTION: Final = "org.apache.rocketmq.acl.common.AclException"
_MANAGER: Final = "org.apache.rocketmq.acl.plain.PlainPermissionManager"
#: Where 4.9.4 throws each refusal (the first stack frame Java puts in the remark).
_AT_NO_KEY: Final = f"{_MANAGER}.validate(PlainPermissionManager.java:663)"
_AT_UNKNOWN: Final = f"{_MANAGER}.validate(PlainPermissionManager.java:667)"
_AT_SIGNATURE: Final = f"{_MANAGER}.validate(PlainPermissionManager.java:683)"
_AT_ADMIN: Final = f"{_MANAGER}.checkPerm(PlainPermissionManager.java:580)"
_AT_DEFAULT: Final = f"{_MANAGER}.checkPerm(PlainPermissionManager.java:605)"
_AT_OWNED: Final = f"{_MANAGER}.checkPerm(PlainPermissionManager.java:610)"
_AT_PARSE: Final = (
    "org.apache.rocketmq.acl.plain.PlainAccessValidator.parse(PlainAccessValidator.java:134)"
)
#: The connection attribute caching "this peer is globally white" per table.
_WHITE_KEY: Final = "acl.white"


class AclDenied(Exception):
    """A request the ACL refuses; ``str()`` is the remark to answer with."""

    def __init__(self, message: str, where: str) -> None:
        super().__init__(f"{_EXCEPTION}: {message}, {where}")
        self.message = message


def _retry(group: str | None) -> str | None:
    return None if group is None else RETRY_PREFIX + group


def needed_perms(cmd: RemotingCommand) -> dict[str, int]:
    """The resources a request touches and the permission each needs.

    Args:
        cmd: The request.

    Returns:
        Topic (or ``%RETRY%group``) to permission bits; empty for codes that only
        need a valid signature.

    Raises:
        AclDenied: A HEART_BEAT body that does not parse.
    """
    ext = cmd.ext_fields
    code = cmd.code
    # Sends first: they are most of the traffic. No helper closure: this runs per request.
    if (
        code == RequestCode.SEND_MESSAGE_V2
        or code == RequestCode.SEND_MESSAGE
        or code == RequestCode.SEND_BATCH_MESSAGE
    ):
        # A batch carries the V2 header (RocketMQ 4.9.4 checks it for a signature
        # only: a batch could reach a DENY topic, or create one).
        v2 = code != RequestCode.SEND_MESSAGE
        topic = ext.get("b" if v2 else "topic")
        if topic is not None and topic.startswith(RETRY_PREFIX):
            group = ext.get("a" if v2 else "group")
            return {} if group is None else {RETRY_PREFIX + group: SUB}
        return {} if topic is None else {topic: PUB}
    out: dict[str, int] = {}
    if code == RequestCode.PULL_MESSAGE:
        _add(out, ext.get("topic"), SUB)
        _add(out, _retry(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        _add(out, _retry(ext.get("group")), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        _add(out, ext.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        try:
            heartbeat = HeartbeatData.from_json(cmd.body)
        except ProtocolError as exc:
            raise AclDenied(str(exc), _AT_PARSE) from None
        for consumer in heartbeat.consumer_data_set:
            _add(out, _retry(consumer.group_name), SUB)
            for sub in consumer.subscription_data_set:
                _add(out, sub.topic, SUB)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        _add(out, _retry(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        _add(out, _retry(ext.get("consumerGroup")), SUB)
        _add(out, ext.get("topic"), SUB)
    return out


def _add(out: dict[str, int], resource: str | None, perm: int) -> None:
    """``addResourceAndPerm``: a missing resource (no such field) is skipped."""
    if resource is not None:
        out[resource] = perm


def _shown_resource(resource: str) -> str:
    """``PlainAccessResource.printStr``: ``group:g`` or ``topic:t``."""
    if resource.startswith(RETRY_PREFIX):
        return f"group:{resource[len(RETRY_PREFIX) :]}"
    return f"topic:{resource}"


class AccessValidator:
    """Checks requests against the current ACL table.

    Args:
        table: Returns the table in force (the watcher swaps it on reload; the
            validator reads it on each request, so a change applies to the next one).
        admin_codes: Request codes needing ``admin: true``. Default: RocketMQ's
            list plus the ACL admin codes.
        checked_codes: Only these codes are checked; ``None`` checks every code (the
            broker). The name server checks its write requests only.
    """

    def __init__(
        self,
        table: Callable[[], AclTable],
        *,
        admin_codes: Collection[int] = ADMIN_CODES | ACL_ADMIN_CODES,
        checked_codes: Collection[int] | None = None,
    ) -> None:
        self._table = table
        self._admin_codes = frozenset(int(c) for c in admin_codes)
        self._checked = None if checked_codes is None else frozenset(int(c) for c in checked_codes)

    def refusal(
        self, peer_ip: str, cmd: RemotingCommand, *, white: bool | None = None
    ) -> str | None:
        """Check one request.

        Args:
            peer_ip: The peer's address, without port.
            cmd: The request as received.
            white: Whether the peer is in the global white list, when the caller
                knows (cached per connection); ``None`` computes it.

        Returns:
            ``None`` to let it through, else the remark to refuse it with.
        """
        try:
            self._validate(self._table(), peer_ip, cmd, white)
        except AclDenied as denied:
            return str(denied)
        return None

    def _validate(
        self, table: AclTable, peer_ip: str, cmd: RemotingCommand, white: bool | None
    ) -> None:
        if white is None:
            white = any(p.matches(peer_ip) for p in table.global_white)
        if white and cmd.code not in ACL_ADMIN_CODES:
            return
        ext = cmd.ext_fields
        access_key = ext.get(ACCESS_KEY)
        if access_key is None:
            raise AclDenied("No accessKey is configured", _AT_NO_KEY)
        account = table.accounts.get(access_key)
        if account is None:
            raise AclDenied(f"No acl config for {access_key}", _AT_UNKNOWN)
        # Java parses the resources before validating: a bad heartbeat body fails
        # even for a white-listed account.
        needed = needed_perms(cmd)
        # The account's white address stands in for the signature only (RocketMQ
        # 4.9.4 returns here, skipping the permission and admin checks too).
        if not account.address.matches(peer_ip):
            expected = signature(ext, cmd.body, account.secret_key)
            if not hmac.compare_digest(expected, ext.get(SIGNATURE, "")):
                raise AclDenied(f"Check signature failed for accessKey={access_key}", _AT_SIGNATURE)
        if needed.get(_TRACE_TOPIC) == PUB:
            return
        if cmd.code in self._admin_codes and not account.admin:
            raise AclDenied(
                f"Need admin permission for request code={cmd.code}, but accessKey="
                f"{access_key} is not",
                _AT_ADMIN,
            )
        if not needed or (account.perms is None and account.admin):
            return
        owned_map: Mapping[str, int] = account.perms or {}
        for resource, perm in needed.items():
            owned = owned_map.get(resource)
            if owned is None:
                is_group = resource.startswith(RETRY_PREFIX)
                default = account.default_group_perm if is_group else account.default_topic_perm
                if not check_permission(perm, default):
                    raise AclDenied(
                        f"No default permission for {_shown_resource(resource)}", _AT_DEFAULT
                    )
            elif not check_permission(perm, owned):
                raise AclDenied(f"No default permission for {_shown_resource(resource)}", _AT_OWNED)

    def gate(self, connection: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        """The remoting server's pre-dispatch hook: ``None``, or the refusal to answer.

        Args:
            connection: The connection the request came on.
            cmd: The request.

        Returns:
            ``None`` to dispatch the request, else a SYSTEM_ERROR answer.
        """
        if self._checked is not None and cmd.code not in self._checked:
            return None
        peer = connection.peer
        ip = normalise_ip(peer[0]) if peer is not None else ""
        table = self._table()
        cached = connection.attributes.get(_WHITE_KEY)
        if isinstance(cached, tuple) and cached[0] is table:
            white = bool(cached[1])
        else:
            white = any(p.matches(ip) for p in table.global_white)
            connection.attributes[_WHITE_KEY] = (table, white)
        try:
            self._validate(table, ip, cmd, white)
        except AclDenied as denied:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark=str(denied))
        return None
