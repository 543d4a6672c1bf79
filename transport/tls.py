"""TLS for remoting connections: server settings, reloading contexts, client contexts.

RocketMQ 4.9 serves TLS and plain TCP on one port and tells them apart by the first
byte a client sends (``0x16`` opens a TLS handshake record); ``tls.server.mode`` says
which of the two a server accepts. This module holds what that needs apart from the
sockets (:mod:`rocklet.transport.tls_accept` accepts and sniffs):

- :class:`TlsMode` and :class:`ClientAuth`, the values of ``tls.server.mode`` and
  ``tls.server.need.client.auth``;
- :class:`ServerTlsConfig`, the server's files and settings, checked when made;
- :class:`ServerTls`, the server's :class:`ssl.SSLContext`, rebuilt when its files
  change (each TLS accept compares the files' ``stat``; a handshake costs a thousand
  times more);
- :func:`client_context`, a client context that verifies the server by default.

Nothing here reads the environment or RocketMQ's property names: the broker's
configuration does (:mod:`rocklet.broker.tls_config`), the SDK takes arguments.
"""

from __future__ import annotations

import enum
import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from rocklet.transport.logs import get_logger

__all__ = [
    "DEFAULT_HANDSHAKE_TIMEOUT_S",
    "TLS_RECORD_HANDSHAKE",
    "ClientAuth",
    "ServerTls",
    "ServerTlsConfig",
    "TlsConfigError",
    "TlsMode",
    "client_context",
]

_log = get_logger(__name__)

#: The first byte of a TLS handshake record (a ClientHello); RocketMQ's
#: ``HandshakeHandler.HANDSHAKE_MAGIC_CODE``.
TLS_RECORD_HANDSHAKE: Final = 0x16
#: How long an accepted socket may take to send its first byte and, for TLS, to finish
#: the handshake, before it is closed (RocketMQ has no such limit; see docs/security.md).
DEFAULT_HANDSHAKE_TIMEOUT_S: Final = 10.0


class TlsConfigError(ValueError):
    """TLS settings that cannot work: a bad value, a missing or unreadable file."""


class TlsMode(enum.StrEnum):
    """``tls.server.mode``: which connections a server accepts on its port."""

    DISABLED = "disabled"  #: plain TCP only; a TLS handshake is refused
    PERMISSIVE = "permissive"  #: TLS and plain TCP, told apart by the first byte
    ENFORCING = "enforcing"  #: TLS only; plain TCP is refused


class ClientAuth(enum.StrEnum):
    """``tls.server.need.client.auth``: whether a client must show a certificate."""

    NONE = "none"  #: no client certificate is asked for
    OPTIONAL = "optional"  #: asked for; one that is sent must verify
    REQUIRE = "require"  #: a client without a verifying certificate is refused


_VERIFY_MODE: Final = {
    ClientAuth.NONE: ssl.CERT_NONE,
    ClientAuth.OPTIONAL: ssl.CERT_OPTIONAL,
    ClientAuth.REQUIRE: ssl.CERT_REQUIRED,
}


@dataclass(frozen=True, slots=True)
class ServerTlsConfig:
    """A server's TLS settings, checked when made.

    Attributes:
        mode: Which connections are accepted.
        cert_path: PEM certificate chain, the server's own certificate first.
        key_path: PEM private key (PKCS#8 as RocketMQ wants, or traditional).
        key_password: Password of an encrypted key; never logged.
        trust_cert_path: PEM CA certificates client certificates are verified with.
        need_client_auth: Whether clients must present a certificate.
        handshake_timeout_s: Longest wait for a new socket's first byte and its TLS
            handshake.

    Raises:
        TlsConfigError: TLS is on without a certificate and key, or client
            certificates are asked for without a CA to verify them with.
    """

    mode: TlsMode = TlsMode.DISABLED
    cert_path: Path | None = None
    key_path: Path | None = None
    key_password: str | None = field(default=None, repr=False)
    trust_cert_path: Path | None = None
    need_client_auth: ClientAuth = ClientAuth.NONE
    handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S

    def __post_init__(self) -> None:
        if not self.handshake_timeout_s > 0:
            raise TlsConfigError(f"the TLS handshake timeout must be positive: {self}")
        if self.mode is TlsMode.DISABLED:
            return
        if self.cert_path is None or self.key_path is None:
            raise TlsConfigError(
                f"tls.server.mode={self.mode} needs tls.server.certPath and "
                "tls.server.keyPath (Rocklet makes no self-signed certificate)"
            )
        if self.need_client_auth is not ClientAuth.NONE and self.trust_cert_path is None:
            raise TlsConfigError(
                f"tls.server.need.client.auth={self.need_client_auth} needs "
                "tls.server.trustCertPath, the CA certificates client certificates are "
                "verified with"
            )

    @property
    def enabled(self) -> bool:
        """Whether TLS connections are accepted at all."""
        return self.mode is not TlsMode.DISABLED

    def files(self) -> tuple[Path, ...]:
        """The files the context is built from (watched for changes)."""
        paths = (self.cert_path, self.key_path, self.trust_cert_path)
        return tuple(p for p in paths if p is not None)


def _server_context(config: ServerTlsConfig) -> ssl.SSLContext:
    """Build the server context, or raise :class:`TlsConfigError` naming the file."""
    assert config.cert_path is not None and config.key_path is not None
    # Purpose.CLIENT_AUTH: server-side defaults (TLS 1.2 at least, no weak ciphers).
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(
            config.cert_path, config.key_path, password=_password(config.key_password)
        )
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(
            f"cannot load certificate {config.cert_path} with key {config.key_path}: {_reason(exc)}"
        ) from None
    if config.trust_cert_path is not None:
        try:
            ctx.load_verify_locations(cafile=config.trust_cert_path)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(
                f"cannot load trusted certificates {config.trust_cert_path}: {_reason(exc)}"
            ) from None
    ctx.verify_mode = _VERIFY_MODE[config.need_client_auth]
    _warn_if_out_of_date(config.cert_path)
    return ctx


def _warn_if_out_of_date(cert_path: Path) -> None:
    """Log a warning when the server certificate has expired or is not valid yet.

    OpenSSL loads such a certificate without a word, and the first sign is every
    verifying client failing with "certificate has expired". The dates come from the
    ``ssl`` module's own PEM decoder (undocumented, as the module's tests use it);
    without it, nothing is said.
    """
    decode = getattr(ssl._ssl, "_test_decode_cert", None)  # type: ignore[attr-defined]
    if decode is None:
        return
    try:
        info = decode(str(cert_path))
        not_before = ssl.cert_time_to_seconds(info["notBefore"])
        not_after = ssl.cert_time_to_seconds(info["notAfter"])
    except (OSError, ssl.SSLError, KeyError, ValueError):
        return
    now = time.time()
    if now > not_after:
        _log.warning(
            "the server certificate has expired: clients that verify it refuse to connect",
            path=str(cert_path),
            not_after=info["notAfter"],
        )
    elif now < not_before:
        _log.warning(
            "the server certificate is not valid yet: clients that verify it refuse to connect",
            path=str(cert_path),
            not_before=info["notBefore"],
        )


def _password(password: str | None) -> str | Callable[[], str]:
    # None would let OpenSSL prompt on the terminal for an encrypted key; an empty
    # answer makes such a key fail to load instead (an unencrypted key ignores it).
    return password if password is not None else (lambda: "")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror and not isinstance(exc, ssl.SSLError):
        return exc.strerror
    return str(exc)


#: What identifies a version of a file: device, inode, size, modification and change
#: times. A rename over the file (the atomic way to rotate) changes the inode.
_Stamp = tuple[int, int, int, int, int]


def _stamps(paths: tuple[Path, ...]) -> tuple[_Stamp | None, ...]:
    out: list[_Stamp | None] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append(None)
            continue
        out.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(out)


class ServerTls:
    """A server's TLS context, rebuilt when its certificate, key or CA files change.

    :meth:`context` compares the files' ``stat`` with those the context was built
    from and, when one differs, builds a new one for the connections accepted from
    then on (open connections keep theirs). A new set of files that does not load (a
    certificate written before its key, say) leaves the old context in force, logged
    once; the next change is tried again.

    Args:
        config: The settings; must have TLS enabled.

    Raises:
        TlsConfigError: TLS is disabled in ``config``, or the files do not load.
    """

    def __init__(self, config: ServerTlsConfig) -> None:
        if not config.enabled:
            raise TlsConfigError("TLS is disabled in this configuration")
        self.config = config
        self._files = config.files()
        self._stamp = _stamps(self._files)
        self._context = _server_context(config)
        self._failed_stamp: tuple[_Stamp | None, ...] | None = None
        #: How many times the context was rebuilt after a file changed (a metric).
        self.reloads = 0

    @property
    def mode(self) -> TlsMode:
        """The server's mode."""
        return self.config.mode

    @property
    def handshake_timeout_s(self) -> float:
        """Longest wait for a socket's first byte and its TLS handshake."""
        return self.config.handshake_timeout_s

    def context(self) -> ssl.SSLContext:
        """The context for a connection accepted now, rebuilt first if a file changed."""
        stamp = _stamps(self._files)
        if stamp != self._stamp and stamp != self._failed_stamp:
            try:
                context = _server_context(self.config)
            except TlsConfigError as exc:
                self._failed_stamp = stamp
                _log.warning(
                    "TLS files changed but do not load; keeping the old ones", error=str(exc)
                )
            else:
                self._context, self._stamp, self._failed_stamp = context, stamp, None
                self.reloads += 1
                _log.info("TLS certificate reloaded", files=[str(p) for p in self._files])
        return self._context


def client_context(
    *,
    ca_file: str | os.PathLike[str] | None = None,
    cert_file: str | os.PathLike[str] | None = None,
    key_file: str | os.PathLike[str] | None = None,
    key_password: str | None = None,
    verify: bool = True,
) -> ssl.SSLContext:
    """A client TLS context; it verifies the server unless told not to.

    With ``verify`` (the default) the server's certificate must chain to ``ca_file``
    (or, without one, to the system's CAs) and name the host connected to
    (``check_hostname``), as in any HTTPS client.

    Args:
        ca_file: PEM CA certificates to trust instead of the system's.
        cert_file: PEM client certificate chain, for servers that ask for one (mutual
            TLS); needs ``key_file`` unless the file holds the key too.
        key_file: PEM private key of ``cert_file``.
        key_password: Password of an encrypted ``key_file``.
        verify: ``False`` accepts any certificate from any server: the connection is
            encrypted but an attacker in the middle can read and change it. Insecure;
            only for tests and for servers that cannot get a proper certificate.

    Returns:
        The context.

    Raises:
        TlsConfigError: A file is missing or does not load.
    """
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    try:
        if ca_file is not None:
            ctx.load_verify_locations(cafile=ca_file)
        if cert_file is not None:
            ctx.load_cert_chain(cert_file, key_file, password=_password(key_password))
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load TLS client files: {_reason(exc)}") from None
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
