"""The name server's configuration as RocketMQ's ``Configuration`` serves it (318 / 319).

RocketMQ 4.9.4 registers ``NamesrvConfig`` and ``NettyServerConfig`` with a
``Configuration``: GET_NAMESRV_CONFIG answers their 20 fields (plus every key of the
``-c`` file) as ``key=value`` lines, and UPDATE_NAMESRV_CONFIG sets the fields named in a
properties body, ignores keys it does not have, and writes the result to
``configStorePath``, which ``NamesrvStartup`` points at the ``-c`` file.

Here the same keys are served from Rocklet's :class:`NamesrvConfig`:

- keys Rocklet implements show the value in force (``listenPort``: the bound port);
  ``orderMessageEnable`` and ``unquotedRouteKeysForOldClients`` change at once, the
  others (ports, host, flow limits, socket buffers, ``aclEnable``, ...) are recorded,
  shown and written to the file, and take effect at the next start, as a RocketMQ
  field nothing reads again after start;
- RocketMQ keys with no meaning in Rocklet (thread pools, semaphores, Netty allocator,
  ``clusterTest``, ``productEnvName``) show RocketMQ's defaults, or the value the file
  or an update gave; they change nothing (:data:`NO_EFFECT_DEFAULTS`);
- ``rocketmqHome`` is ``$ROCKETMQ_HOME`` (left out when unset, as Java leaves out a null
  field); the keys of the file Rocklet does not read are shown as they are, key
  passwords never.

Differences from 4.9.4, on purpose: the paths cannot be changed remotely
(``kvConfigPath``, ``configStorePath``, as RocketMQ 4.9.7 refuses after CVE-2023-37582,
and Rocklet's ``aclFile`` and TLS file keys): NO_PERMISSION "Can not update config
path"; a value that does not parse (``listenPort=abc``) is refused with SYSTEM_ERROR
naming it, where Java keeps the old value silently; an update is written before it is
applied, so a file that cannot be written leaves everything as it was (SYSTEM_ERROR).
The file is edited in place: the lines of the updated keys are replaced, new keys
appended, everything else (comments, order, other keys) kept; the previous content
goes to ``FILE.bak``, as RocketMQ's ``MixAll.string2File`` does. A name server started
without a file (``rocklet standalone``, tests) applies updates in memory only and has
no ``configStorePath``: RocketMQ would write ``~/namesrv/namesrv.properties``, a file it
never reads back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from rocklet.broker.config import (
    ConfigError,
    NamesrvConfig,
    property_names,
    typed_properties,
    with_overrides,
)
from rocklet.broker.properties_file import save_properties
from rocklet.broker.tls_keys import SECRET_KEYS, TLS_CONFIG_FILE, TLS_KEYS, without_secrets
from rocklet.protocol.codes import ResponseCode
from rocklet.protocol.properties_text import format_properties, parse_properties

__all__ = [
    "LIVE_KEYS",
    "NO_EFFECT_DEFAULTS",
    "PATH_KEYS",
    "NamesrvConfiguration",
    "UpdateResult",
]

#: RocketMQ 4.9.4's name server keys with no meaning in Rocklet, and their defaults
#: (``NettyServerConfig``, ``NettySystemConfig``, ``NamesrvConfig``). Rocklet's port has
#: no thread pools or semaphores (one event loop), never closes idle connections, lets
#: asyncio derive the low-water mark from the high one, listens with a fixed backlog of
#: 1024 and has no cluster-test mode.
NO_EFFECT_DEFAULTS: Final = {
    "serverWorkerThreads": "8",
    "serverCallbackExecutorThreads": "0",
    "serverSelectorThreads": "3",
    "serverOnewaySemaphoreValue": "256",
    "serverAsyncSemaphoreValue": "64",
    "serverChannelMaxIdleTimeSeconds": "120",
    "writeBufferLowWaterMark": "0",
    "serverSocketBacklog": "1024",
    "serverPooledByteBufAllocatorEnable": "true",
    "useEpollNativeSelector": "false",
    "clusterTest": "false",
    "productEnvName": "center",
}
_NO_EFFECT_BOOLS: Final = frozenset(
    {"serverPooledByteBufAllocatorEnable", "useEpollNativeSelector", "clusterTest"}
)
_NO_EFFECT_STRINGS: Final = frozenset({"productEnvName", "rocketmqHome"})
#: Keys of Rocklet's config that take effect as soon as they are updated.
LIVE_KEYS: Final = frozenset({"orderMessageEnable", "unquotedRouteKeysForOldClients"})
#: Files the name server reads or writes: never changed by a request. RocketMQ 4.9.7
#: refuses ``kvConfigPath`` and ``configStorePath`` (CVE-2023-37582: 4.9.4 lets anyone
#: point ``configStorePath`` at any file, which the update then writes).
PATH_KEYS: Final = frozenset(
    {"kvConfigPath", "configStorePath", "aclFile", TLS_CONFIG_FILE}
    | {k for k in TLS_KEYS if k.endswith("Path")}
)
#: RocketMQ 4.9.7's remark for an update naming a path.
PATH_REFUSED: Final = "Can not update config path"
_CONFIG_STORE_PATH: Final = "configStorePath"
_LISTEN_PORT: Final = "listenPort"
#: Mode of the file when it is gone (deleted since the start) and has to be created.
_NEW_FILE_MODE: Final = 0o644


@dataclass(frozen=True, slots=True)
class UpdateResult:
    """What an UPDATE_NAMESRV_CONFIG did.

    Attributes:
        code: The response code.
        remark: Why it was refused, or what a success left for later.
        applied: The keys set, with their new text (empty when refused).
        ignored: Keys the configuration does not have (ignored, as in RocketMQ).
    """

    code: int
    remark: str | None = None
    applied: Mapping[str, str] = dataclasses.field(default_factory=dict)
    ignored: tuple[str, ...] = ()


def _check_no_effect(key: str, raw: str) -> str:
    """The normalised text of a no-effect RocketMQ key, or ConfigError like a file value."""
    if key in _NO_EFFECT_STRINGS:
        return raw
    if key in _NO_EFFECT_BOOLS:
        if raw.lower() not in ("true", "false"):
            raise ConfigError(f"invalid value for {key}: {raw!r} (expected true or false)")
        return raw.lower()
    try:
        number = int(raw, 10)
    except ValueError:
        raise ConfigError(f"invalid value for {key}: {raw!r} (expected an integer)") from None
    if not -(2**31) <= number < 2**31:
        raise ConfigError(f"invalid value for {key}: {raw!r} (out of the int range)")
    return str(number)


class NamesrvConfiguration:
    """The properties GET_NAMESRV_CONFIG shows and UPDATE_NAMESRV_CONFIG changes.

    Event loop only; updates are serialized.

    Args:
        config: The configuration the name server started with; updates are written
            to its ``config_file`` (``rocklet namesrv -c``), or stay in memory.
        environ: The environment (``ROCKETMQ_HOME``). Default: ``os.environ``.
    """

    def __init__(
        self,
        config: NamesrvConfig,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._config = config
        #: Where updates are written (``configStorePath``), or ``None``.
        self.store_path = config.config_file
        env = os.environ if environ is None else environ
        defaults = dict(NO_EFFECT_DEFAULTS)
        if env.get("ROCKETMQ_HOME"):
            defaults["rocketmqHome"] = env["ROCKETMQ_HOME"]
        self._defaults = defaults
        #: Restart-only values set by updates (shown; the running server keeps the old).
        self._pending: dict[str, str] = {}
        self._bound_port: int | None = None
        self._lock = asyncio.Lock()

    @property
    def config(self) -> NamesrvConfig:
        """The configuration in force (live updates included)."""
        return self._config

    def bind(self, port: int) -> None:
        """Record the port the server bound (``listenPort=0`` picks one)."""
        self._bound_port = port

    def properties(self) -> dict[str, str]:
        """Every key and value, sorted, secrets left out (GET_NAMESRV_CONFIG).

        Returns:
            Property name to text.
        """
        props = dict(self._defaults)
        props.update(without_secrets(self._config.extra))
        props.update(typed_properties(self._config))
        if self._bound_port is not None:
            props[_LISTEN_PORT] = str(self._bound_port)
        if self.store_path is not None:
            props[_CONFIG_STORE_PATH] = str(self.store_path)
        props.update(self._pending)
        for key in SECRET_KEYS:
            props.pop(key, None)
        return dict(sorted(props.items()))

    def text(self) -> str:
        """The GET_NAMESRV_CONFIG body: ``key=value`` lines (``MixAll.properties2String``)."""
        return format_properties(self.properties())

    def _known(self) -> frozenset[str]:
        return frozenset(self.properties()) | frozenset(self._config.extra)

    async def update(self, body: str) -> UpdateResult:
        """Apply an UPDATE_NAMESRV_CONFIG body (Java properties text).

        Args:
            body: The body, decoded.

        Returns:
            What was done; on refusal nothing changed. A success's remark says which
            keys wait for a restart, have no effect, were ignored, or were not saved.
        """
        wanted = parse_properties(body)
        if any(k in PATH_KEYS for k in wanted):
            return UpdateResult(ResponseCode.NO_PERMISSION, PATH_REFUSED)
        async with self._lock:
            known = self._known()
            ignored = sorted(k for k in wanted if k not in known)
            wanted = {k: v for k, v in wanted.items() if k in known}
            try:
                live, applied = self._plan(wanted)
            except ConfigError as exc:
                return UpdateResult(ResponseCode.SYSTEM_ERROR, str(exc))
            if applied and self.store_path is not None:
                try:
                    await asyncio.to_thread(
                        save_properties, self.store_path, applied, new_mode=_NEW_FILE_MODE
                    )
                except (OSError, UnicodeError) as exc:
                    return UpdateResult(
                        ResponseCode.SYSTEM_ERROR,
                        f"name server config not changed: cannot save {self.store_path}: {exc}",
                    )
            self._config = live
            self._pending.update({k: v for k, v in applied.items() if k not in LIVE_KEYS})
            return UpdateResult(
                ResponseCode.SUCCESS, self._summary(applied, ignored), applied, tuple(ignored)
            )

    def _plan(self, wanted: Mapping[str, str]) -> tuple[NamesrvConfig, dict[str, str]]:
        """Check every value: the new live config, and every key's new text.

        Raises:
            ConfigError: A value does not parse or is out of range.
        """
        typed = property_names(NamesrvConfig)
        live = with_overrides(self._config, {k: v for k, v in wanted.items() if k in LIVE_KEYS})
        # Restart-only fields are checked together with the earlier ones (ranges).
        later = {k: v for k, v in self._pending.items() if k in typed}
        later.update({k: v for k, v in wanted.items() if k in typed and k not in LIVE_KEYS})
        shown = typed_properties(with_overrides(live, later))
        applied: dict[str, str] = {}
        for key, raw in wanted.items():
            if key in typed:
                applied[key] = shown.get(key, raw.strip())
            elif key in NO_EFFECT_DEFAULTS or key in _NO_EFFECT_STRINGS:
                applied[key] = _check_no_effect(key, raw.strip())
            else:  # a key of the file Rocklet does not read (TLS: read at start)
                applied[key] = raw.strip()
        return live, applied

    def _summary(self, applied: Mapping[str, str], ignored: list[str]) -> str | None:
        typed = property_names(NamesrvConfig)
        restart = [k for k in applied if k not in LIVE_KEYS and (k in typed or k in TLS_KEYS)]
        no_effect = [k for k in applied if k not in LIVE_KEYS and k not in restart]
        parts = []
        if restart:
            parts.append(f"takes effect after a restart: {', '.join(sorted(restart))}")
        if no_effect:
            parts.append(f"no effect in Rocklet: {', '.join(sorted(no_effect))}")
        if ignored:
            parts.append(f"unknown, ignored: {', '.join(ignored)}")
        if applied and self.store_path is None:
            parts.append("not saved: the name server was started without a config file")
        return "; ".join(parts) or None
