"""Certificates for the TLS tests, made fresh in a temporary directory (trustme).

Nothing here is committed: each test gets its own CA and keys, written under its
``tmp_path``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme

__all__ = ["Pki", "make_pki"]


@dataclass
class Pki:
    """A CA and the files of one server certificate (and one client certificate)."""

    ca: trustme.CA
    dir: Path
    ca_file: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def client_context(self, *, with_cert: bool = False) -> ssl.SSLContext:
        """A client context trusting this CA, with the client certificate if asked."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        if with_cert:
            ctx.load_cert_chain(self.client_cert, self.client_key)
        return ctx

    def rotate(self, names: tuple[str, ...] = ("localhost", "127.0.0.1")) -> trustme.CA:
        """Replace the server's certificate and key with ones from a new CA.

        Each file is written beside its final name and renamed over it, as a
        certificate manager does, so a reader never sees half a file.

        Returns:
            The new CA (trust it to verify the new certificate).
        """
        ca = trustme.CA()
        leaf = ca.issue_cert(*names)
        for path, pem in (
            (self.server_cert, leaf.cert_chain_pems[0]),
            (self.server_key, leaf.private_key_pem),
        ):
            staging = path.with_suffix(".new")
            pem.write_to_path(str(staging))
            staging.replace(path)
        return ca


def make_pki(where: Path, names: tuple[str, ...] = ("localhost", "127.0.0.1")) -> Pki:
    """A new CA with a server certificate for ``names`` and a client certificate.

    Args:
        where: Directory for the PEM files (created).
        names: Host names and IP addresses the server certificate is valid for.

    Returns:
        The files.
    """
    where.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    server = ca.issue_cert(*names)
    client = ca.issue_cert("rocklet-test-client")
    pki = Pki(
        ca=ca,
        dir=where,
        ca_file=where / "ca.pem",
        server_cert=where / "server.pem",
        server_key=where / "server.key",
        client_cert=where / "client.pem",
        client_key=where / "client.key",
    )
    ca.cert_pem.write_to_path(str(pki.ca_file))
    server.cert_chain_pems[0].write_to_path(str(pki.server_cert))
    server.private_key_pem.write_to_path(str(pki.server_key))
    client.cert_chain_pems[0].write_to_path(str(pki.client_cert))
    client.private_key_pem.write_to_path(str(pki.client_key))
    return pki
