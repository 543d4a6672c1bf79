"""TLS for the SDK: what the ``tls=`` argument of producers, consumers and Admin takes.

``tls=True`` connects to name servers and brokers over TLS and verifies their
certificates against the system's CAs, host names included, as an HTTPS client does.
For a private CA, client certificates (mutual TLS) or, explicitly and insecurely, no
verification, build a context with :func:`tls_context` (or pass any
:class:`ssl.SSLContext` of your own)::

    from rocklet.client import Producer, tls_context

    ctx = tls_context(ca_file="ca.pem", cert_file="client.pem", key_file="client.key")
    async with Producer("group", "ns.example.com:9876", tls=ctx) as producer:
        ...

Certificates must name the addresses clients connect to: the name server address
given to the client, and each broker's advertised address (``brokerIP1``).
"""

from __future__ import annotations

import functools
import ssl
from typing import TypeAlias

from rocklet.transport.tls import TlsConfigError, client_context

__all__ = ["TlsConfigError", "TlsOption", "resolve_tls", "tls_context"]

#: What ``tls=`` takes: ``None``/``False`` plain TCP, ``True`` TLS verified against the
#: system's CAs, or a context of your own.
TlsOption: TypeAlias = ssl.SSLContext | bool | None

#: Builds a client context; verifies the server unless ``verify=False`` (insecure).
tls_context = client_context


@functools.cache
def _system_default() -> ssl.SSLContext:
    # One per process, so ``tls=True`` everywhere shares one client instance.
    return client_context()


def resolve_tls(tls: TlsOption) -> ssl.SSLContext | None:
    """The context a ``tls=`` argument stands for.

    Args:
        tls: ``None``/``False``, ``True`` or a context.

    Returns:
        ``None`` for plain TCP, else the context.

    Raises:
        TypeError: ``tls`` is something else.
    """
    if tls is None or tls is False:
        return None
    if tls is True:
        return _system_default()
    if isinstance(tls, ssl.SSLContext):
        return tls
    raise TypeError(f"tls must be a bool or an ssl.SSLContext, not {type(tls).__name__}")
