"""The ACL files: where they are, loading them, noticing changes, editing them.

Which files, as RocketMQ 4.9.3+ reads them: every ``*.yml`` / ``*.yaml`` under the
``acl/`` directory beside the default file (recursively, in name order), then the
default file itself (``$ROCKETMQ_HOME/conf/plain_acl.yml`` in RocketMQ; ``aclFile`` in
Rocklet). An access key defined in two files keeps the first.

Reloading: :meth:`AclFiles.check_once` compares each file's (mtime, size, inode) and
the set of files with what was loaded, and reloads everything when anything differs.
The broker runs it every 500 ms (RocketMQ 4.9.0-4.9.2's ``FileWatchService`` period;
4.9.3+ polls every 5 s). A file that no longer parses is reported and the previous
table stays in force: a typo never opens or closes the broker by accident.

Edits (the ACL admin requests) rewrite one file (a deletion: every file defining the
account) with :func:`~rocklet.store.durable_file.replace_file` (temp file, fsync,
rename, fsync of the directory) keeping its permission bits, bump its ``dataVersion``
as Java does, and reload at once. They run one at a time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import structlog
import yaml

from rocklet.broker.acl.accounts import (
    AclConfigError,
    AclTable,
    DataVersion,
    build_account,
    build_table,
    check_keys,
    parse_acl_document,
    parse_resource_perms,
)
from rocklet.broker.acl.addresses import AddressPatternError, parse_pattern
from rocklet.store.durable_file import replace_file

__all__ = ["WATCH_INTERVAL_S", "AccountEdit", "AclFiles"]

log = structlog.get_logger(__name__)

#: How often the files are looked at (RocketMQ's ``FileWatchService``, 500 ms).
WATCH_INTERVAL_S: Final = 0.5
_SUFFIXES: Final = (".yml", ".yaml")
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

Fingerprint = tuple[tuple[str, int, int, int], ...]


class AccountEdit(Mapping[str, Any]):
    """What UPDATE_AND_CREATE_ACL_CONFIG asks: the account fields it sets.

    A read-only mapping of plain_acl.yml account keys to values; fields the request
    did not carry are absent (they keep the account's current values).
    """

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self._fields = dict(fields)

    def __getitem__(self, key: str) -> Any:
        return self._fields[key]

    def __iter__(self) -> Any:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __repr__(self) -> str:
        shown = {k: ("<hidden>" if k == "secretKey" else v) for k, v in self._fields.items()}
        return f"AccountEdit({shown!r})"


def _read_yaml(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise AclConfigError(f"cannot read ACL file {path}: {exc}") from None
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise AclConfigError(f"ACL file {path} is not valid YAML: {exc}") from None


def _is_account(raw: object, access_key: str) -> bool:
    """Whether ``raw`` (an ``accounts`` entry as read) is ``access_key``'s."""
    return isinstance(raw, Mapping) and str(raw.get("accessKey")) == access_key


class AclFiles:
    """The ACL files of one broker or name server, and the table they make.

    Args:
        default_file: The default file (``plain_acl.yml``); it must exist.

    Raises:
        AclConfigError: The default file is missing, or a file is invalid.
    """

    def __init__(self, default_file: Path) -> None:
        self.default_file = default_file.absolute()
        self.acl_dir = self.default_file.parent / "acl"
        if not self.default_file.is_file():
            raise AclConfigError(
                f"aclEnable is on but the ACL file {self.default_file} does not exist"
            )
        self._lock = asyncio.Lock()
        self._fingerprint: Fingerprint = ()
        self._table = self._load()
        #: How many tables were loaded (1 after the first load); each reload adds one.
        self.generation = 1
        self._reloaded = asyncio.Condition()

    @property
    def table(self) -> AclTable:
        """The table in force (replaced whole on reload; safe to hold)."""
        return self._table

    def paths(self) -> list[Path]:
        """The files read, in load order: the ``acl/`` directory's, then the default."""
        found: list[Path] = []
        if self.acl_dir.is_dir():
            for path in sorted(self.acl_dir.rglob("*")):
                if path.suffix in _SUFFIXES and path.is_file() and path.name != "tools.yml":
                    found.append(path)
        if self.default_file not in found:
            found.append(self.default_file)
        return found

    def _acl_file_named(self, text: str | None) -> Path | None:
        """The ACL file ``text`` names (blank: the default file), or ``None``."""
        path = self.default_file if not text else Path(text).absolute()
        return path if path in self.paths() else None

    def _fingerprint_of(self, paths: Sequence[Path]) -> Fingerprint:
        out = []
        for path in paths:
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            out.append((str(path), st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(out)

    def _load(self) -> AclTable:
        paths = self.paths()
        fingerprint = self._fingerprint_of(paths)
        files = [parse_acl_document(_read_yaml(path), path) for path in paths]
        table = build_table(files)
        self._fingerprint = fingerprint
        log.info(
            "ACL loaded",
            files=len(files),
            accounts=len(table.accounts),
            global_white=len(table.global_white),
        )
        return table

    def changed(self) -> bool:
        """Whether a file was changed, added or removed since the last load."""
        return self._fingerprint_of(self.paths()) != self._fingerprint

    async def check_once(self) -> bool:
        """Reload if a file changed (one watcher step).

        Returns:
            Whether a new table is in force.
        """
        async with self._lock:
            if not await asyncio.to_thread(self.changed):
                return False
            return await self._reload()

    async def wait_generation(self, generation: int) -> None:
        """Return once :attr:`generation` reaches ``generation`` (wrap it in a timeout)."""
        async with self._reloaded:
            await self._reloaded.wait_for(lambda: self.generation >= generation)

    async def _reload(self) -> bool:
        try:
            self._table = await asyncio.to_thread(self._load)
            async with self._reloaded:
                self.generation += 1
                self._reloaded.notify_all()
        except AclConfigError as exc:
            # Remember the bad state, so the same error is reported once, not twice a second.
            self._fingerprint = await asyncio.to_thread(self._fingerprint_of, self.paths())
            log.error("ACL files not reloaded; the previous ACL stays in force", error=str(exc))
            return False
        return True

    # -- edits (the ACL admin requests) ---------------------------------------------

    async def update_account(self, edit: Mapping[str, Any]) -> None:
        """Add an account to the default file, or change it where it is defined.

        Args:
            edit: The fields to set (``accessKey`` and ``secretKey`` required).

        Raises:
            AclConfigError: The keys, a resource line or the address are invalid, or
                the file cannot be written.
        """
        check_keys(edit.get("accessKey"), edit.get("secretKey"))
        for key, topic in (("topicPerms", True), ("groupPerms", False)):
            parse_resource_perms(edit.get(key) or [], topic=topic, strict=True)
        access_key = str(edit["accessKey"])
        async with self._lock:
            owner = self._table.accounts.get(access_key)
            path = self.default_file if owner is None else owner.source

            def change(doc: dict[str, Any]) -> bool:
                accounts = doc.get("accounts")
                if not isinstance(accounts, list):
                    accounts = doc["accounts"] = []
                for account in accounts:
                    if isinstance(account, dict) and str(account.get("accessKey")) == access_key:
                        account.update(edit)
                        build_account(account, path)
                        return True
                account = dict(edit)
                build_account(account, path)
                accounts.append(account)
                return True

            await self._edit(path, change)

    async def delete_account(self, access_key: str) -> bool:
        """Remove an account from every file that defines it.

        The first definition is the one in force, and removing it alone would let the
        next file's copy take over (RocketMQ 4.9.4 removes only the first). The
        shadowed copies are removed first and the one in force last, each file
        rewritten durably as any edit: should a write fail, the account in force is
        still the one it was, and the caller hears of the failure.

        Returns:
            Whether it existed.

        Raises:
            AclConfigError: A file cannot be written.
        """
        async with self._lock:
            if access_key not in self._table.accounts:
                return False
            sources = [
                f.path
                for f in self._table.files
                if any(_is_account(a, access_key) for a in f.accounts)
            ]

            def change(doc: dict[str, Any]) -> bool:
                accounts = doc.get("accounts")
                if not isinstance(accounts, list):
                    return False
                kept = [a for a in accounts if not _is_account(a, access_key)]
                doc["accounts"] = kept
                return len(kept) != len(accounts)

            deleted = False
            try:
                for path in reversed(sources):
                    deleted = await self._rewrite(path, change) or deleted
            finally:
                if deleted:
                    await self._reload()
            return deleted

    async def update_global_white(self, addresses: Sequence[str], path_text: str | None) -> None:
        """Replace one file's ``globalWhiteRemoteAddresses``.

        Args:
            addresses: The new list.
            path_text: The file (one of the ACL files); blank: the default file.

        Raises:
            AclConfigError: Not an ACL file, an address pattern is invalid, or the
                file cannot be written.
        """
        path = await asyncio.to_thread(self._acl_file_named, path_text)
        if path is None:
            raise AclConfigError(f"{path_text} is not one of this server's ACL files")
        for address in addresses:
            try:
                parse_pattern(address)
            except AddressPatternError as exc:
                raise AclConfigError(str(exc)) from None
        async with self._lock:

            def change(doc: dict[str, Any]) -> bool:
                doc["globalWhiteRemoteAddresses"] = list(addresses)
                return True

            await self._edit(path, change)

    async def _edit(self, path: Path, change: Any) -> bool:
        """Read ``path``, apply ``change``, bump its version, write it durably, reload.

        Must be called with the lock held.
        """
        if not await self._rewrite(path, change):
            return False
        await self._reload()
        return True

    async def _rewrite(self, path: Path, change: Any) -> bool:
        """:meth:`_edit` without the reload: whether ``change`` changed the file.

        Must be called with the lock held.
        """

        def rewrite() -> bool:
            doc = _read_yaml(path)
            if doc is None:
                doc = {}
            if not isinstance(doc, dict):
                raise AclConfigError(f"{path}: an ACL file must be a YAML mapping")
            if not change(doc):
                return False
            old = parse_acl_document(doc, path).data_version
            new = DataVersion(old.counter + 1, int(time.time() * 1000))
            doc["dataVersion"] = [new.to_dict()]
            data = yaml.dump(doc, Dumper=_Dumper, default_flow_style=False, sort_keys=False)
            try:
                mode = path.stat().st_mode & 0o777
            except FileNotFoundError:
                mode = 0o600
            try:
                replace_file(path, data.encode("utf-8"), mode=mode)
            except OSError as exc:
                raise AclConfigError(f"cannot write ACL file {path}: {exc}") from None
            return True

        return await asyncio.to_thread(rewrite)

    # -- views ----------------------------------------------------------------------

    def versions(self) -> dict[str, DataVersion]:
        """Each file's data version, by full path (GET_BROKER_CLUSTER_ACL_INFO)."""
        return {str(f.path): f.data_version for f in self._table.files}

    def all_config(self) -> tuple[list[str], list[dict[str, Any]]]:
        """The white lists and the accounts as written (GET_BROKER_CLUSTER_ACL_CONFIG).

        Returns:
            ``(global white addresses, accounts)``; an access key in two files is
            listed once, as Java's ``getAllAclConfig`` does.
        """
        white: list[str] = []
        accounts: list[dict[str, Any]] = []
        seen: set[str] = set()
        for acl_file in self._table.files:
            white.extend(acl_file.global_white)
            for raw in acl_file.accounts:
                key = str(raw.get("accessKey"))
                if key in seen:
                    continue
                seen.add(key)
                accounts.append(dict(raw))
        return white, accounts
