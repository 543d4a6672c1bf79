"""Permissions, accounts and the ACL table, parsed from ``plain_acl.yml`` documents.

The schema is RocketMQ 4.9's (``distribution/conf/plain_acl.yml``)::

    globalWhiteRemoteAddresses: [10.10.103.*, 192.168.0.*]
    accounts:
      - accessKey: RocketMQ          # both keys longer than 6 characters
        secretKey: 12345678
        whiteRemoteAddress:          # a match skips the signature check
        admin: false
        defaultTopicPerm: DENY       # DENY, PUB, SUB, PUB|SUB (SUB|PUB); absent: DENY
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB]
        groupPerms: [groupA=DENY]    # kept as %RETRY%groupA, as Java does
    dataVersion: [{counter: 1, timestamp: 1650000000000}]   # written by admin edits

Permission bits and the check are ``Permission.java``'s. An account's keys, its
resource lines and its address pattern are checked when the file is read; a bad one
is an :class:`AclConfigError` naming the file (the secret is never in its text).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rocklet.broker.acl.addresses import AddressPattern, AddressPatternError, parse_pattern
from rocklet.protocol.names import RETRY_PREFIX

__all__ = [
    "ANY",
    "DENY",
    "MIN_KEY_LENGTH",
    "PUB",
    "SUB",
    "Account",
    "AclConfigError",
    "AclFile",
    "AclTable",
    "DataVersion",
    "build_account",
    "build_table",
    "check_keys",
    "check_permission",
    "parse_acl_document",
    "parse_perm",
    "parse_resource_perms",
]

DENY: Final = 1
ANY: Final = 2
PUB: Final = 4
SUB: Final = 8
#: Keys must be longer than this (``AclConstants.ACCESS_KEY_MIN_LENGTH``).
MIN_KEY_LENGTH: Final = 6
_PERMS: Final = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}


class AclConfigError(ValueError):
    """An ACL file or an admin edit that RocketMQ would refuse."""


def parse_perm(text: object) -> int:
    """``Permission.parsePermFromString``: unknown or absent text is DENY."""
    return _PERMS.get(str(text).strip(), DENY) if text is not None else DENY


def check_permission(needed: int, owned: int) -> bool:
    """``Permission.checkPermission``: DENY wins; otherwise any needed bit owned."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def parse_resource_perms(
    lines: Sequence[str], *, topic: bool, strict: bool = False
) -> dict[str, int]:
    """``topicPerms`` / ``groupPerms`` lines as resource to permission.

    Args:
        lines: ``name=PERM`` strings.
        topic: Topics (``True``) or groups (kept as their retry topic).
        strict: Refuse a permission that is not one of the five spellings, as
            Java's ``checkResourcePerms`` does for admin edits (files only need the
            ``name=PERM`` shape; an unknown word there means DENY).

    Returns:
        Resource to permission bits.

    Raises:
        AclConfigError: A line is not ``name=PERM``.
    """
    out: dict[str, int] = {}
    for line in lines:
        items = [item for item in str(line).split("=") if item]
        if len(items) != 2:
            kind = "topic" if topic else "group"
            raise AclConfigError(f"Parse resource permission failed for {kind}:{line}")
        name, perm = items[0].strip(), items[1].strip()
        if strict and perm not in _PERMS:
            raise AclConfigError(
                f"Parse resource permission error for {line}.\n"
                "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'."
            )
        out[name if topic else RETRY_PREFIX + name] = parse_perm(perm)
    return out


@dataclass(frozen=True, slots=True)
class DataVersion:
    """A file's ``dataVersion`` (``common/DataVersion.java``)."""

    counter: int = 0
    timestamp: int = 0

    def to_dict(self) -> dict[str, int]:
        """As fastjson writes a ``DataVersion``."""
        return {"counter": self.counter, "timestamp": self.timestamp}


@dataclass(frozen=True, slots=True, repr=False)
class Account:
    """One account, ready to check requests against (``PlainAccessResource``).

    Attributes:
        access_key: The account name.
        secret_key: Its HMAC key (bytes: what the MAC uses); never shown by ``repr``.
        white_remote_address: The raw pattern, as written.
        address: The parsed pattern; a match skips the signature check.
        admin: May send the admin request codes.
        default_topic_perm: Bits for topics not in ``perms``.
        default_group_perm: Bits for groups not in ``perms``.
        perms: Resource (topic, or ``%RETRY%group``) to bits; ``None`` when the file
            lists none (an admin without a map may touch everything).
        source: The file that defines it.
    """

    access_key: str
    secret_key: bytes
    white_remote_address: str | None
    address: AddressPattern
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: Mapping[str, int] | None
    source: Path

    def __repr__(self) -> str:
        return f"Account(access_key={self.access_key!r}, admin={self.admin}, source={self.source})"


@dataclass(frozen=True, slots=True)
class AclFile:
    """One file as read: its accounts (as written), white list and version."""

    path: Path
    accounts: tuple[Mapping[str, Any], ...] = ()
    global_white: tuple[str, ...] = ()
    data_version: DataVersion = field(default_factory=DataVersion)


@dataclass(frozen=True, slots=True)
class AclTable:
    """Every account and the global white list, merged from all files.

    Attributes:
        accounts: Access key to account; the first file defining a key wins.
        global_white: Patterns whose peers skip every check.
        files: The files, in load order (the default file last).
    """

    accounts: Mapping[str, Account]
    global_white: tuple[AddressPattern, ...]
    files: tuple[AclFile, ...]


def _strings(value: object, what: str, path: Path) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list):
        raise AclConfigError(f"{path}: {what} must be a list")
    return tuple("" if item is None else str(item) for item in value)


def _as_bool(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def check_keys(access_key: object, secret_key: object) -> None:
    """``checkPlainAccessConfig``: both keys present and longer than 6 characters.

    Raises:
        AclConfigError: Not so; the message names the access key, never the secret.
    """
    if (
        not isinstance(access_key, str)
        or not isinstance(secret_key, str)
        or len(access_key) <= MIN_KEY_LENGTH
        or len(secret_key) <= MIN_KEY_LENGTH
    ):
        raise AclConfigError(
            f"The accessKey={access_key} and secretKey=<hidden> cannot be null and "
            "length should longer than 6"
        )


def build_account(raw: Mapping[str, Any], source: Path) -> Account:
    """Check and parse one ``accounts`` entry (``buildPlainAccessResource``).

    Args:
        raw: The entry as read from YAML.
        source: Its file.

    Returns:
        The account.

    Raises:
        AclConfigError: Bad keys, resource lines or address pattern.
    """
    access_key, secret_key = raw.get("accessKey"), raw.get("secretKey")
    if isinstance(access_key, int | float) and not isinstance(access_key, bool):
        access_key = str(access_key)  # YAML reads 12345678 as a number; Java as text
    if isinstance(secret_key, int | float) and not isinstance(secret_key, bool):
        secret_key = str(secret_key)
    check_keys(access_key, secret_key)
    assert isinstance(access_key, str) and isinstance(secret_key, str)
    white = raw.get("whiteRemoteAddress")
    white_text = None if white is None else str(white)
    try:
        address = parse_pattern(white_text)
    except AddressPatternError as exc:
        raise AclConfigError(f"{source}: account {access_key}: {exc}") from None
    topic_lines = _strings(raw.get("topicPerms"), "topicPerms", source)
    group_lines = _strings(raw.get("groupPerms"), "groupPerms", source)
    perms: dict[str, int] | None = None
    if topic_lines or group_lines:
        perms = parse_resource_perms(group_lines, topic=False)
        perms.update(parse_resource_perms(topic_lines, topic=True))
    return Account(
        access_key=access_key,
        secret_key=secret_key.encode("utf-8"),
        white_remote_address=white_text,
        address=address,
        admin=_as_bool(raw.get("admin", False)),
        default_topic_perm=parse_perm(raw.get("defaultTopicPerm")),
        default_group_perm=parse_perm(raw.get("defaultGroupPerm")),
        perms=perms,
        source=source,
    )


def parse_acl_document(data: object, path: Path) -> AclFile:
    """One file's parsed YAML as an :class:`AclFile` (accounts kept as written).

    Args:
        data: What ``yaml.safe_load`` returned (``None`` for an empty file).
        path: The file.

    Returns:
        The file's content.

    Raises:
        AclConfigError: The document is not a mapping, or a list is not a list.
    """
    if data is None:
        return AclFile(path)
    if not isinstance(data, dict):
        raise AclConfigError(f"{path}: an ACL file must be a YAML mapping")
    accounts = data.get("accounts") or []
    if not isinstance(accounts, list) or not all(isinstance(a, dict) for a in accounts):
        raise AclConfigError(f"{path}: accounts must be a list of mappings")
    # A file no admin request has edited yet carries no dataVersion: RocketMQ then
    # reports counter 0 stamped with the time it loaded the file (mqadmin
    # clusterAclConfigVersion prints it as the last update), not the epoch.
    version = DataVersion(0, int(time.time() * 1000))
    versions = data.get("dataVersion")
    if isinstance(versions, list) and versions and isinstance(versions[0], dict):
        first = versions[0]
        try:
            version = DataVersion(int(first.get("counter", 0)), int(first.get("timestamp", 0)))
        except (TypeError, ValueError):
            raise AclConfigError(f"{path}: dataVersion must hold numbers") from None
    white = _strings(data.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses", path)
    return AclFile(path, tuple(accounts), white, version)


def build_table(files: Sequence[AclFile]) -> AclTable:
    """Merge files into one table (``PlainPermissionManager.load``).

    Args:
        files: In load order; an access key defined twice keeps its first account.

    Returns:
        The table.

    Raises:
        AclConfigError: An account or a white-list pattern is invalid.
    """
    accounts: dict[str, Account] = {}
    white: list[AddressPattern] = []
    for acl_file in files:
        for pattern in acl_file.global_white:
            try:
                white.append(parse_pattern(pattern))
            except AddressPatternError as exc:
                raise AclConfigError(
                    f"{acl_file.path}: globalWhiteRemoteAddresses: {exc}"
                ) from None
        for raw in acl_file.accounts:
            try:
                account = build_account(raw, acl_file.path)
            except AclConfigError as exc:
                text = str(exc)
                raise AclConfigError(
                    text if text.startswith(str(acl_file.path)) else f"{acl_file.path}: {text}"
                ) from None
            accounts.setdefault(account.access_key, account)
    return AclTable(accounts, tuple(white), tuple(files))
