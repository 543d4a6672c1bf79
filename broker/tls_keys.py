"""The TLS property names, as RocketMQ 4.9.4's ``TlsSystemConfig`` spells them (data only).

RocketMQ reads them only as JVM system properties (``-Dtls.server.mode=enforcing``) or
from the file ``tls.config.file`` names; Rocklet reads them there too (``-D`` on the
server commands) and from ``broker.conf`` or the name server's file
(:mod:`rocklet.broker.tls_config`). Kept apart so that the configuration loader can
count them as known keys without importing the TLS code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = [
    "SECRET_KEYS",
    "TLS_CLIENT_KEYS",
    "TLS_CONFIG_FILE",
    "TLS_ENABLE",
    "TLS_KEYS",
    "TLS_SERVER_KEYS",
    "TLS_SERVER_MODE",
    "USE_TLS",
    "without_secrets",
]

TLS_SERVER_MODE: Final = "tls.server.mode"
TLS_ENABLE: Final = "tls.enable"
TLS_CONFIG_FILE: Final = "tls.config.file"
#: ``NettyClientConfig.useTLS``: broker.conf's way to set ``tls.enable`` for the broker.
USE_TLS: Final = "useTLS"

#: Keys of the server side (the name server's and the broker's port).
TLS_SERVER_KEYS: Final = frozenset(
    {
        TLS_SERVER_MODE,
        "tls.server.certPath",
        "tls.server.keyPath",
        "tls.server.keyPassword",
        "tls.server.trustCertPath",
        "tls.server.need.client.auth",
        "tls.server.authClient",
        # Rocklet only: longest wait for a socket's first byte and TLS handshake.
        "tls.server.handshakeTimeoutMillis",
    }
)
#: Keys of the client side (the broker's connections to its name servers).
TLS_CLIENT_KEYS: Final = frozenset(
    {
        TLS_ENABLE,
        "tls.client.certPath",
        "tls.client.keyPath",
        "tls.client.keyPassword",
        "tls.client.trustCertPath",
        "tls.client.authServer",
    }
)
#: Keys whose values are never logged nor sent to anyone (GET_BROKER_CONFIG).
SECRET_KEYS: Final = frozenset({"tls.server.keyPassword", "tls.client.keyPassword"})
#: Every TLS key Rocklet reads (``tls.test.mode.enable`` is read to warn about it).
TLS_KEYS: Final = TLS_SERVER_KEYS | TLS_CLIENT_KEYS | {TLS_CONFIG_FILE, "tls.test.mode.enable"}


def without_secrets(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` without the keys whose values are secret (key passwords).

    Args:
        props: Property name to value (a config's ``extra``).

    Returns:
        A copy without :data:`SECRET_KEYS`.
    """
    return {k: v for k, v in props.items() if k not in SECRET_KEYS}
