"""The connector's TLS options: parsed on the driver, turned into a context where used.

An :class:`ssl.SSLContext` cannot travel to executors, so the options carry file paths
(which must exist on every executor) and each task builds its own context. As
everywhere in Rocklet, TLS verifies the servers unless ``tlsInsecure`` says otherwise.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Final

from rocklet.spark.option_values import OptionMap, RockletOptionError

__all__ = ["NO_TLS", "TLS_OPTION_NAMES", "TlsOptions", "parse_tls_options"]

#: Options of every connector that talks to a name server.
TLS_OPTION_NAMES: Final = (
    "tls",
    "tlsCaFile",
    "tlsCertFile",
    "tlsKeyFile",
    "tlsKeyPassword",
    "tlsInsecure",
)


@dataclass(frozen=True)
class TlsOptions:
    """How the connector's clients connect.

    Attributes:
        enabled: Connect over TLS (``tls``; implied by any other TLS option).
        ca_file: CA certificates servers are verified with (``tlsCaFile``); ``None``:
            the system's.
        cert_file: Client certificate for mutual TLS (``tlsCertFile``).
        key_file: Its private key (``tlsKeyFile``).
        key_password: The key's password (``tlsKeyPassword``); never shown.
        insecure: Do not verify the servers (``tlsInsecure``; insecure).
    """

    enabled: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: str | None = field(default=None, repr=False)
    insecure: bool = False

    def context(self) -> ssl.SSLContext | None:
        """A client context for these options, or ``None`` for plain TCP.

        Raises:
            RockletOptionError: A file is missing or does not load (on this machine).
        """
        if not self.enabled:
            return None
        from rocklet.transport.tls import TlsConfigError, client_context

        try:
            return client_context(
                ca_file=self.ca_file,
                cert_file=self.cert_file,
                key_file=self.key_file,
                key_password=self.key_password,
                verify=not self.insecure,
            )
        except TlsConfigError as exc:
            raise RockletOptionError(f"tlsCaFile/tlsCertFile/tlsKeyFile: {exc}") from None


#: Plain TCP (the default).
NO_TLS: Final = TlsOptions()


def parse_tls_options(opts: OptionMap) -> TlsOptions:
    """Read ``tls`` and its companions.

    Args:
        opts: The user's options.

    Returns:
        The TLS options.

    Raises:
        RockletOptionError: ``tls=false`` with other TLS options, or a bad flag.
    """
    files = {name: opts.text(name) or None for name in ("tlsCaFile", "tlsCertFile", "tlsKeyFile")}
    insecure = opts.flag("tlsInsecure", False)
    implied = insecure or any(files.values())
    if opts.has("tls") and not opts.flag("tls", False) and implied:
        raise RockletOptionError(
            "tls=false contradicts tlsCaFile/tlsCertFile/tlsKeyFile/tlsInsecure"
        )
    return TlsOptions(
        enabled=opts.flag("tls", False) or implied,
        ca_file=files["tlsCaFile"],
        cert_file=files["tlsCertFile"],
        key_file=files["tlsKeyFile"],
        key_password=opts.text("tlsKeyPassword") or None,
        insecure=insecure,
    )
