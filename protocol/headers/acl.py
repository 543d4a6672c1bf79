"""ACL admin headers (request codes 50-54), as RocketMQ 4.9's ``mqadmin`` sends them.

Lists travel as comma-separated strings (``topicPerms="topicA=PUB,topicB=SUB"``), as
``CreateAccessConfigRequestHeader`` carries them.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocklet.protocol.headers.base import Header, wire

__all__ = [
    "CreateAccessConfigRequestHeader",
    "DeleteAccessConfigRequestHeader",
    "GetBrokerAclConfigResponseHeader",
    "UpdateGlobalWhiteAddrsConfigRequestHeader",
]


@dataclass(frozen=True, slots=True)
class CreateAccessConfigRequestHeader(Header):
    """UPDATE_AND_CREATE_ACL_CONFIG (50): add an account or change one.

    Absent optional fields leave the account's current values (Java's
    ``createAclAccessConfigMap``); ``admin`` is always written.
    """

    access_key: str = wire("accessKey")
    secret_key: str | None = wire("secretKey", None)
    white_remote_address: str | None = wire("whiteRemoteAddress", None)
    admin: bool = wire("admin", False)
    default_topic_perm: str | None = wire("defaultTopicPerm", None)
    default_group_perm: str | None = wire("defaultGroupPerm", None)
    topic_perms: str | None = wire("topicPerms", None)  #: ``topic=PERM`` joined by ``,``
    group_perms: str | None = wire("groupPerms", None)  #: ``group=PERM`` joined by ``,``


@dataclass(frozen=True, slots=True)
class DeleteAccessConfigRequestHeader(Header):
    """DELETE_ACL_CONFIG (51)."""

    access_key: str = wire("accessKey")


@dataclass(frozen=True, slots=True)
class UpdateGlobalWhiteAddrsConfigRequestHeader(Header):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53).

    Java marks both fields required, but ``mqadmin updateGlobalWhiteAddr`` without
    ``-p`` sends no path; an absent or empty path means the default file, as Java's
    ``updateGlobalWhiteAddrsConfig`` treats an empty one.
    """

    global_white_addrs: str = wire("globalWhiteAddrs")  #: addresses joined by ``,``
    acl_file_full_path: str | None = wire("aclFileFullPath", None)


@dataclass(frozen=True, slots=True)
class GetBrokerAclConfigResponseHeader(Header):
    """GET_BROKER_CLUSTER_ACL_INFO (52) answer.

    ``version`` is the default file's ``DataVersion`` JSON; ``allAclFileVersion`` maps
    each file's full path to its ``DataVersion``.
    """

    version: str = wire("version")
    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    all_acl_file_version: str | None = wire("allAclFileVersion", None)
