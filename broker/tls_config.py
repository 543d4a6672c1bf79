"""A server's TLS settings from RocketMQ's ``tls.*`` properties.

Three places may set them, later ones winning:

1. ``broker.conf`` (or the name server's properties file), a Rocklet addition;
2. ``-D key=value`` on the ``rocklet`` server commands, RocketMQ's JVM system
   properties;
3. the file named by ``tls.config.file`` (default ``/etc/rocketmq/tls.properties``,
   read when it exists, as RocketMQ does). As in RocketMQ it cannot set
   ``tls.server.mode`` nor ``tls.enable``: those are ignored there, with a warning.

Where Rocklet differs from RocketMQ 4.9.4, and why (docs/security.md has the whole
list):

- No test mode. RocketMQ's ``tls.test.mode.enable`` (on by default) makes the server
  present a fresh self-signed certificate and its clients trust anything. Rocklet never
  makes a certificate: ``tls.server.mode`` left unset means ``permissive`` when a
  certificate and key are configured (RocketMQ's default mode) and ``disabled``
  otherwise; ``permissive`` or ``enforcing`` set without them stop the start.
- Unknown values are errors. RocketMQ reads ``tls.server.mode=enforce`` as
  ``permissive`` and an unknown ``need.client.auth`` as ``none``, silently.
- Client certificates that are asked for are always verified, against
  ``tls.server.trustCertPath`` (Python's ``ssl`` has no "ask but trust any" mode;
  RocketMQ trusts any unless ``tls.server.authClient=true``).
- The broker verifies its name servers' certificates (``tls.client.authServer``
  defaults to ``true``; RocketMQ's is ``false``).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

import structlog

from rocklet.broker.config import ConfigError, parse_properties
from rocklet.broker.tls_keys import (
    TLS_CONFIG_FILE,
    TLS_ENABLE,
    TLS_KEYS,
    TLS_SERVER_MODE,
    USE_TLS,
)
from rocklet.transport.tls import (
    ClientAuth,
    ServerTls,
    ServerTlsConfig,
    TlsConfigError,
    TlsMode,
    client_context,
)

__all__ = ["DEFAULT_TLS_CONFIG_FILE", "TlsSettings", "parse_system_properties", "tls_settings"]

_log = structlog.get_logger(__name__)

#: ``TlsSystemConfig.tlsConfigFile``'s default.
DEFAULT_TLS_CONFIG_FILE: Final = Path("/etc/rocketmq/tls.properties")
#: Keys the TLS file may not set (RocketMQ reads them from system properties only).
_NOT_FROM_FILE: Final = frozenset({TLS_SERVER_MODE, TLS_ENABLE, TLS_CONFIG_FILE})
_E = TypeVar("_E", TlsMode, ClientAuth)


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """What a server process does with TLS: its port, and the broker's own connections.

    Attributes:
        server: The port's mode and files.
        client_enabled: Whether the broker's connections to its name servers use TLS
            (``tls.enable``, or broker.conf's ``useTLS``; default: the mode is
            ``enforcing``, as in RocketMQ).
        client_trust_cert_path: CA certificates the name servers' certificates are
            verified with; ``None``: the system's.
        client_cert_path: The broker's client certificate, for name servers that
            require one.
        client_key_path: Its private key.
        client_key_password: The key's password; never logged.
        client_auth_server: Verify the name servers' certificates and host names.
        config_file: The ``tls.config.file`` that was read, if any.
    """

    server: ServerTlsConfig = field(default_factory=ServerTlsConfig)
    client_enabled: bool = False
    client_trust_cert_path: Path | None = None
    client_cert_path: Path | None = None
    client_key_path: Path | None = None
    client_key_password: str | None = field(default=None, repr=False)
    client_auth_server: bool = True
    config_file: Path | None = None

    def server_tls(self) -> ServerTls | None:
        """The port's TLS context (the files are loaded here), or ``None`` if disabled.

        Raises:
            ConfigError: A file is missing or does not load.
        """
        if not self.server.enabled:
            return None
        try:
            return ServerTls(self.server)
        except TlsConfigError as exc:
            raise ConfigError(str(exc)) from None

    def client_context(self) -> ssl.SSLContext | None:
        """The context of the broker's connections to name servers, or ``None`` (plain).

        Raises:
            ConfigError: A file is missing or does not load.
        """
        if not self.client_enabled:
            return None
        try:
            return client_context(
                ca_file=self.client_trust_cert_path,
                cert_file=self.client_cert_path,
                key_file=self.client_key_path,
                key_password=self.client_key_password,
                verify=self.client_auth_server,
            )
        except TlsConfigError as exc:
            raise ConfigError(f"tls.client.*: {exc}") from None


def parse_system_properties(items: list[str] | None) -> dict[str, str]:
    """Read ``-D key=value`` arguments (RocketMQ's system properties).

    Args:
        items: The values given to ``-D``, each ``key=value``.

    Returns:
        Key to value.

    Raises:
        ConfigError: An item is not ``key=value``, or not a TLS key (the only
            system properties Rocklet reads).
    """
    props: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"-D takes key=value, not {item!r}")
        if key not in TLS_KEYS:
            raise ConfigError(
                f"-D {key}: Rocklet reads only the TLS properties from -D "
                f"({', '.join(sorted(TLS_KEYS))}); put other keys in the config file"
            )
        props[key] = value.strip()
    return props


def tls_settings(
    conf: Mapping[str, str],
    system: Mapping[str, str],
    *,
    default_file: Path = DEFAULT_TLS_CONFIG_FILE,
) -> TlsSettings:
    """Work out the TLS settings from the config file, ``-D`` and ``tls.config.file``.

    Args:
        conf: The config file's properties (only TLS keys are looked at).
        system: The ``-D`` properties (:func:`parse_system_properties`).
        default_file: The TLS file read when ``tls.config.file`` is not set (and it
            exists).

    Returns:
        The settings; files are not loaded yet (:meth:`TlsSettings.server_tls`).

    Raises:
        ConfigError: A value is invalid, ``tls.config.file`` names a file that cannot
            be read, or TLS is on without a certificate.
    """
    merged = {k: v for k, v in conf.items() if k in TLS_KEYS}
    merged.update(system)
    named = merged.get(TLS_CONFIG_FILE)
    path = Path(named).expanduser() if named else default_file
    config_file: Path | None = None
    if named or path.is_file():
        merged.update(_read_tls_file(path))
        config_file = path

    def text(key: str) -> str | None:
        value = merged.get(key, "").strip()
        return value or None

    def file(key: str) -> Path | None:
        value = text(key)
        return None if value is None else Path(value).expanduser()

    mode_text = system.get(TLS_SERVER_MODE) or conf.get(TLS_SERVER_MODE)
    cert, key = file("tls.server.certPath"), file("tls.server.keyPath")
    if mode_text:
        mode = _choice(TlsMode, TLS_SERVER_MODE, mode_text)
    else:  # RocketMQ's default is permissive, which needs a certificate here
        mode = TlsMode.PERMISSIVE if cert and key else TlsMode.DISABLED
    need = _choice(
        ClientAuth, "tls.server.need.client.auth", text("tls.server.need.client.auth") or "none"
    )
    timeout_ms = _int(merged, "tls.server.handshakeTimeoutMillis", 10_000)
    try:
        server = ServerTlsConfig(
            mode=mode,
            cert_path=cert,
            key_path=key,
            key_password=merged.get("tls.server.keyPassword") or None,
            trust_cert_path=file("tls.server.trustCertPath"),
            need_client_auth=need,
            handshake_timeout_s=timeout_ms / 1000,
        )
    except TlsConfigError as exc:
        raise ConfigError(str(exc)) from None
    enable_text = system.get(TLS_ENABLE) or conf.get(USE_TLS) or conf.get(TLS_ENABLE)
    settings = TlsSettings(
        server=server,
        client_enabled=(
            _bool(TLS_ENABLE, enable_text) if enable_text else mode is TlsMode.ENFORCING
        ),
        client_trust_cert_path=file("tls.client.trustCertPath"),
        client_cert_path=file("tls.client.certPath"),
        client_key_path=file("tls.client.keyPath"),
        client_key_password=merged.get("tls.client.keyPassword") or None,
        client_auth_server=_bool("tls.client.authServer", text("tls.client.authServer") or "true"),
        config_file=config_file,
    )
    _warn_differences(merged, settings)
    return settings


def _read_tls_file(path: Path) -> dict[str, str]:
    try:
        props = parse_properties(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {TLS_CONFIG_FILE} {path}: {exc}") from None
    out: dict[str, str] = {}
    for key, value in props.items():
        if key in _NOT_FROM_FILE:
            _log.warning(
                "ignored in the TLS config file, as in RocketMQ; set it with -D or in the "
                "config file",
                key=key,
                file=str(path),
            )
        elif key not in TLS_KEYS:
            _log.warning("unknown TLS config key ignored", key=key, file=str(path))
        else:
            out[key] = value
    return out


def _warn_differences(merged: Mapping[str, str], settings: TlsSettings) -> None:
    if merged.get("tls.test.mode.enable", "").strip().lower() == "true":
        _log.warning(
            "tls.test.mode.enable=true is ignored: Rocklet has no TLS test mode (it makes "
            "no self-signed certificate and verifies what it is told to)"
        )
    server = settings.server
    if (
        server.need_client_auth is not ClientAuth.NONE
        and merged.get("tls.server.authClient", "").strip().lower() == "false"
    ):
        _log.warning(
            "tls.server.authClient=false is ignored: client certificates are verified "
            "against tls.server.trustCertPath"
        )
    if settings.client_enabled and not settings.client_auth_server:
        _log.warning(
            "tls.client.authServer=false: the name servers' certificates are not "
            "verified; anyone in the middle can read and change the registrations"
        )


def _choice(kind: type[_E], key: str, value: str) -> _E:
    try:
        return kind(value.strip().lower())
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise ConfigError(f"{key} must be one of {allowed}: {value!r}") from None


def _bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"{key} must be true or false: {value!r}")
    return lowered == "true"


def _int(merged: Mapping[str, str], key: str, default: int) -> int:
    raw = merged.get(key, "").strip()
    if not raw:
        return default
    try:
        value = int(raw, 10)
    except ValueError:
        raise ConfigError(f"{key} must be a whole number: {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"{key} must be positive: {value}")
    return value
