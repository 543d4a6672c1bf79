"""Turning the ACL on for a remoting server: load the files, gate the registry, watch.

Used by the broker (every request checked, as RocketMQ 4.9) and by the name server
(only its write requests checked, a Rocklet addition: :data:`NAMESRV_CHECKED_CODES`).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Final

from rocklet.broker.acl.accounts import AclConfigError
from rocklet.broker.acl.admin import AclAdmin, register
from rocklet.broker.acl.files import WATCH_INTERVAL_S, AclFiles
from rocklet.broker.acl.validator import ACL_ADMIN_CODES, ADMIN_CODES, AccessValidator
from rocklet.broker.config import ConfigError
from rocklet.protocol.codes import RequestCode
from rocklet.transport import ProcessorRegistry
from rocklet.transport.tasks import BackgroundTasks

__all__ = ["NAMESRV_CHECKED_CODES", "enable_acl", "open_acl_files"]

#: The name server requests that change routes or settings: with ACL on they need a
#: valid signature from an ``admin: true`` account. Route and cluster lookups, KV
#: reads and QUERY_DATA_VERSION stay open.
NAMESRV_CHECKED_CODES: Final = frozenset(
    {
        RequestCode.REGISTER_BROKER,
        RequestCode.UNREGISTER_BROKER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.PUT_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        *ACL_ADMIN_CODES,
    }
)


def open_acl_files(path: Path) -> AclFiles:
    """Load the ACL files at start.

    Args:
        path: The default file.

    Returns:
        The loaded files.

    Raises:
        ConfigError: The file is missing or invalid (the server must not start).
    """
    try:
        return AclFiles(path)
    except AclConfigError as exc:
        raise ConfigError(str(exc)) from None


def enable_acl(
    registry: ProcessorRegistry,
    files: AclFiles,
    tasks: BackgroundTasks,
    *,
    name: str,
    addr: str,
    cluster: str,
    checked_codes: Collection[int] | None = None,
    admin_codes: Collection[int] = ADMIN_CODES | ACL_ADMIN_CODES,
) -> AccessValidator:
    """Check requests against ``files``, serve the ACL admin codes and watch the files.

    Args:
        registry: The server's processors; its gate is set.
        files: The loaded ACL files.
        tasks: Owns the watcher (cancelled with the server's tasks).
        name: Server name for GET_BROKER_CLUSTER_ACL_INFO.
        addr: Server address, likewise.
        cluster: Cluster name, likewise.
        checked_codes: Only these codes are checked; ``None``: all.
        admin_codes: Codes that need ``admin: true``.

    Returns:
        The validator in use.
    """
    validator = AccessValidator(
        lambda: files.table, admin_codes=admin_codes, checked_codes=checked_codes
    )
    registry.gate = validator.gate
    register(registry, AclAdmin(files, broker_name=name, broker_addr=addr, cluster_name=cluster))
    tasks.every(WATCH_INTERVAL_S, files.check_once, "acl-watch")
    return validator
