"""Connections are read as BufferedProtocol: by both event loops, plain and over TLS.

uvloop only uses ``get_buffer``/``buffer_updated`` for a protocol that is not an
``asyncio.Protocol``; otherwise it silently falls back to ``data_received`` (a bytes
object per read, copied again into the decoder). These run a real server and client on
loopback under asyncio's loop and under uvloop, with and without TLS, and check both
that answers of every size come back intact and which read path carried them.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import uvloop

from rocklet.protocol import RemotingCommand
from rocklet.transport import ProcessorRegistry, RemotingServer, RequestContext
from rocklet.transport.connection import Connection, HandlerResult
from rocklet.transport.dial import open_connection
from rocklet.transport.tls import ServerTls, ServerTlsConfig, TlsMode
from tests.tlscerts import Pki, make_pki

ECHO = 1000
TIMEOUT = 10.0
#: Empty, tiny, one cut by the first read, beyond RESERVE_AHEAD (grows as it arrives).
SIZES = (0, 1, 70_000, 3 * 1024 * 1024)

Runner = Callable[[Coroutine[Any, Any, None]], None]
RUNNERS: dict[str, Runner] = {"asyncio": asyncio.run, "uvloop": uvloop.run}


def test_a_connection_is_a_buffered_protocol_and_not_a_plain_one() -> None:
    assert issubclass(Connection, asyncio.BufferedProtocol)
    assert not issubclass(Connection, asyncio.Protocol)


async def exchange(tls: ServerTls | None, client_ctx: Any) -> None:
    registry = ProcessorRegistry()

    async def echo(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        return cmd.make_response(0, body=cmd.body)

    registry.register(ECHO, echo)
    server = RemotingServer("127.0.0.1", 0, registry, name="test", tls=tls)
    await server.start()
    try:
        async with await open_connection(
            "127.0.0.1", server.port, tls=client_ctx, connect_timeout_s=TIMEOUT
        ) as conn:
            bodies = [bytes([n % 251]) * n for n in SIZES]
            answers = await asyncio.gather(
                *(conn.request(RemotingCommand(ECHO, body=b), TIMEOUT) for b in bodies)
            )
            assert [a.body for a in answers] == bodies
    finally:
        await server.stop(grace_s=1)


@pytest.mark.parametrize("loop", sorted(RUNNERS))
@pytest.mark.parametrize("secure", [False, True], ids=["plain", "tls"])
def test_reads_go_through_get_buffer_on_every_loop(
    loop: str, secure: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: Counter[str] = Counter()
    buffered, plain = Connection.buffer_updated, Connection.data_received

    def count_buffered(self: Connection, nbytes: int) -> None:
        calls["buffer_updated"] += 1
        buffered(self, nbytes)

    def count_plain(self: Connection, data: bytes) -> None:
        calls["data_received"] += 1
        plain(self, data)

    monkeypatch.setattr(Connection, "buffer_updated", count_buffered)
    monkeypatch.setattr(Connection, "data_received", count_plain)
    tls, ctx = None, None
    if secure:
        pki: Pki = make_pki(tmp_path / "pki")
        config = ServerTlsConfig(
            mode=TlsMode.ENFORCING, cert_path=pki.server_cert, key_path=pki.server_key
        )
        tls, ctx = ServerTls(config), pki.client_context()
    RUNNERS[loop](exchange(tls, ctx))
    assert calls["buffer_updated"] > 0
    assert calls["data_received"] == 0
