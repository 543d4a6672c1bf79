"""A fault-injecting TCP proxy for the adversity tier (asyncpg's TCPFuzzingProxy is the model).

:class:`FaultyProxy` listens on one address and forwards every connection to a target,
chunk by chunk in both directions, with faults a test switches on and off while traffic
flows:

- ``delay_s``: each chunk waits this long before it is forwarded;
- ``split_bytes``: each chunk is forwarded in pieces of this many bytes, each written
  and drained on its own (with ``delay_s`` between pieces), so frames reach the peer
  cut at arbitrary points;
- :meth:`stall` / :meth:`restore` (``trigger_connectivity_loss`` /
  ``restore_connectivity`` in asyncpg): stop forwarding; bytes wait in the proxy, the
  sockets stay open. A single :class:`Link` stalls and restores on its own too;
- :meth:`reset_all` or :meth:`Link.reset`: both sides get a TCP reset (SO_LINGER 0);
- :meth:`Link.truncate_next`: forward only the first bytes of the next chunk from the
  client, then reset, so the server sees a frame cut short.

To put the proxy between the SDK and a broker, the broker advertises an address the
proxy owns: start it with ``--broker-ip1 127.0.0.2`` (it binds 127.0.0.1) and the proxy
on ``127.0.0.2`` and the broker's port (:func:`broker_proxy`); routes from the name
server then send clients through the proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

__all__ = ["PROXY_HOST", "FaultyProxy", "Link", "broker_proxy"]

#: The loopback address the proxy owns; a broker started with ``--broker-ip1`` set to
#: it is reached through the proxy.
PROXY_HOST: Final = "127.0.0.2"
_CHUNK: Final = 64 * 1024
_TIMEOUT_S: Final = 10.0


class Link:
    """One proxied connection: the client's socket and ours to the target.

    Attributes:
        forwarded: Bytes forwarded so far, client to server and server to client.
        pieces: Writes made so far (more than chunks read when splitting).
        held: Bytes read from the client and not forwarded yet (e.g. while stalled).
    """

    def __init__(
        self,
        proxy: FaultyProxy,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        server: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self._proxy = proxy
        self._client = client
        self._server = server
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._truncate_at: int | None = None
        self.forwarded = [0, 0]
        self.pieces = 0
        self.held = 0
        self.closed = asyncio.Event()
        self._pumps = [
            asyncio.create_task(self._pump(client[0], server[1], 0)),
            asyncio.create_task(self._pump(server[0], client[1], 1)),
        ]

    def stall(self) -> None:
        """Stop forwarding on this connection (both ways); its sockets stay open."""
        self._flowing.clear()

    def restore(self) -> None:
        """Forward again what this connection holds and what comes next."""
        self._flowing.set()

    def truncate_next(self, keep: int) -> None:
        """Forward only ``keep`` bytes of the client's next chunk, then reset both sides."""
        self._truncate_at = keep

    def reset(self) -> None:
        """Reset both sockets (RST, not FIN): the peers see the connection break."""
        for _reader, writer in (self._client, self._server):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        self.closed.set()
        self._flowing.set()  # a pump held by a stall wakes up and sees the reset

    async def wait_held(self, count: int = 1) -> None:
        """Wait until at least ``count`` client bytes are held (read, not forwarded)."""
        async with self._proxy.changed:
            await asyncio.wait_for(
                self._proxy.changed.wait_for(lambda: self.held >= count), _TIMEOUT_S
            )

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, way: int
    ) -> None:
        proxy = self._proxy
        try:
            while data := await reader.read(_CHUNK):
                if way == 0:
                    self.held += len(data)
                    await proxy.notify()
                await self._flowing.wait()
                await proxy.flowing.wait()
                if self.closed.is_set():
                    return
                if way == 0 and self._truncate_at is not None:
                    writer.write(data[: self._truncate_at])
                    await writer.drain()
                    self.reset()
                    return
                await self._forward(writer, data)
                self.forwarded[way] += len(data)
                if way == 0:
                    self.held -= len(data)
            writer.close()  # an orderly end is passed on as one
        except (ConnectionError, OSError):
            self.reset()  # a broken one as a reset
        finally:
            await proxy.notify()

    async def _forward(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        proxy = self._proxy
        if proxy.delay_s:
            await asyncio.sleep(proxy.delay_s)  # the injected fault, not synchronisation
        step = proxy.split_bytes or len(data)
        for start in range(0, len(data), step):
            if start and proxy.delay_s:
                await asyncio.sleep(proxy.delay_s)
            writer.write(data[start : start + step])
            await writer.drain()
            self.pieces += 1

    async def close(self) -> None:
        """Reset the connection and end both pumps (stalled ones included)."""
        self.reset()
        for pump in self._pumps:
            pump.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)


class FaultyProxy:
    """A TCP proxy that forwards to ``target`` with switchable faults.

    Args:
        target_host: Where connections are forwarded.
        target_port: Its port.
        listen_host: The proxy's address. Default: 127.0.0.1.
        listen_port: The proxy's port; 0 picks a free one (see :attr:`port`).

    Attributes:
        delay_s: Seconds each chunk (and each split piece) waits before it is sent.
        split_bytes: Forward chunks in pieces of this size; 0 forwards them whole.
        links: The connections accepted so far, oldest first.
    """

    def __init__(
        self,
        target_host: str,
        target_port: int,
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
    ) -> None:
        self._target = (target_host, target_port)
        self._listen = (listen_host, listen_port)
        self._server: asyncio.Server | None = None
        self.port = 0
        self.delay_s = 0.0
        self.split_bytes = 0
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.links: list[Link] = []
        self.changed = asyncio.Condition()

    @property
    def address(self) -> str:
        """``host:port`` clients connect to."""
        return f"{self._listen[0]}:{self.port}"

    async def start(self) -> None:
        """Listen (returns once the socket is bound)."""
        self._server = await asyncio.start_server(self._accept, *self._listen)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening and reset every connection."""
        if self._server is not None:
            self._server.close()
        await asyncio.gather(*(link.close() for link in self.links))
        if self._server is not None:
            await self._server.wait_closed()

    def stall(self) -> None:
        """Stop forwarding on every connection (asyncpg's trigger_connectivity_loss)."""
        self.flowing.clear()

    def restore(self) -> None:
        """Forward again (asyncpg's restore_connectivity)."""
        self.flowing.set()

    def reset_all(self) -> None:
        """Reset every open connection."""
        for link in self.links:
            if not link.closed.is_set():
                link.reset()

    async def notify(self) -> None:
        """Wake whoever waits on :attr:`changed` (links call it as bytes move)."""
        async with self.changed:
            self.changed.notify_all()

    async def wait_links(self, count: int) -> list[Link]:
        """Wait until ``count`` connections were accepted; return them all."""
        async with self.changed:
            await asyncio.wait_for(
                self.changed.wait_for(lambda: len(self.links) >= count), _TIMEOUT_S
            )
        return list(self.links)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        for w in (writer, upstream[1]):
            sock = w.get_extra_info("socket")
            if sock is not None:  # pieces leave as separate segments
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.links.append(Link(self, (reader, writer), upstream))
        await self.notify()


@asynccontextmanager
async def broker_proxy(broker_port: int) -> AsyncIterator[FaultyProxy]:
    """A proxy on :data:`PROXY_HOST` and the broker's port, to 127.0.0.1 and that port.

    The broker must advertise :data:`PROXY_HOST` (``--broker-ip1``), so clients routed
    by the name server connect here.
    """
    proxy = FaultyProxy("127.0.0.1", broker_port, listen_host=PROXY_HOST, listen_port=broker_port)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
