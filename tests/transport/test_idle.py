"""Connections silent both ways for ``serverChannelMaxIdleTimeSeconds`` are closed.

A peer that vanished without a FIN or a reset, or one that connected and never spoke,
used to keep its descriptor and connection for the life of the server.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rocklet.protocol import RemotingCommand
from rocklet.protocol.frame import encode_command
from rocklet.transport import ProcessorRegistry, RemotingServer, RequestContext
from rocklet.transport.connection import HandlerResult
from rocklet.transport.idle import silent_ms
from rocklet.transport.tls import TlsMode
from tests.tlscerts import make_pki
from tests.transport.test_tls import server_tls

PING = 1000
IDLE_S = 0.6
#: The longest a silent connection may stay: the period and one sweep (a quarter) late,
#: and room for a busy machine.
WITHIN_S = IDLE_S * 1.25 + 2.0


def _registry() -> ProcessorRegistry:
    async def ping(_ctx: RequestContext, cmd: RemotingCommand) -> HandlerResult:
        return cmd.make_response(0)

    registry = ProcessorRegistry()
    registry.register(PING, ping)
    return registry


async def _closed_by_server(reader: asyncio.StreamReader, within_s: float) -> bool:
    """Whether the server closes the connection within ``within_s``."""
    try:
        async with asyncio.timeout(within_s):
            return await reader.read(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


async def test_a_silent_connection_is_closed_and_a_talking_one_kept() -> None:
    server = RemotingServer("127.0.0.1", 0, _registry(), idle_s=IDLE_S)
    await server.start()
    try:
        silent_reader, silent_writer = await asyncio.open_connection("127.0.0.1", server.port)
        talk_reader, talk_writer = await asyncio.open_connection("127.0.0.1", server.port)

        talking = asyncio.create_task(_drain_while_talking(talk_reader, talk_writer))
        assert await _closed_by_server(silent_reader, WITHIN_S)
        assert not talking.done()  # the talking one is still served
        talking.cancel()
        silent_writer.close()
        talk_writer.close()
    finally:
        await server.stop()


async def _drain_while_talking(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    # A request and its answer every IDLE_S / 3, as a client's heartbeats are.
    opaque = 0
    while True:
        opaque += 1
        writer.write(encode_command(RemotingCommand(PING, opaque=opaque)))
        size = int.from_bytes(await reader.readexactly(4), "big")
        await reader.readexactly(size)  # the answer
        await asyncio.sleep(IDLE_S / 3)


async def test_idle_zero_closes_nothing() -> None:
    server = RemotingServer("127.0.0.1", 0, _registry(), idle_s=0)
    await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        assert not await _closed_by_server(reader, WITHIN_S)
        writer.close()
    finally:
        await server.stop()


async def test_the_kernel_tells_how_long_a_socket_has_been_silent() -> None:
    server = RemotingServer("127.0.0.1", 0, _registry())
    await server.start()
    try:
        _reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        first = silent_ms(writer.transport)
        assert first is not None and first < 1000
        await asyncio.sleep(0.3)  # the quantity measured is time itself
        later = silent_ms(writer.transport)
        assert later is not None and later >= first + 250
        writer.write(b"\x00")  # data out: the count starts again
        await writer.drain()
        again = silent_ms(writer.transport)
        assert again is not None and again < later
        writer.close()
    finally:
        await server.stop()


async def test_a_silent_tls_connection_is_closed_too(tmp_path: Path) -> None:
    # The kernel's figures come from the socket under the TLS transport.
    pki = make_pki(tmp_path)
    tls = server_tls(pki, TlsMode.ENFORCING)
    server = RemotingServer("127.0.0.1", 0, _registry(), idle_s=IDLE_S, tls=tls)
    await server.start()
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", server.port, ssl=pki.client_context(), server_hostname="127.0.0.1"
        )
        assert await _closed_by_server(reader, WITHIN_S)
        writer.close()
    finally:
        await server.stop()
