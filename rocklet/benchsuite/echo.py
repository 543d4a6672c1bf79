"""The Python ceiling: a minimal uvloop server echoing 4-byte-length-prefixed frames.

Nothing a broker does (no decoding, no storage), only what every request costs in
Python on this machine: finding the frames in the bytes read, and writing the answers.

* ``frame`` mode writes each frame back with its own ``transport.write()``, as a
  server answering one request per write;
* ``batch`` mode parses every frame just the same but writes all the answers of one
  read with a single ``transport.write()`` (coalesced replies).

Usage (the suite runs both ends as child processes)::

    python -m rocklet.benchsuite.echo server PORT MODE
    python -m rocklet.benchsuite.echo client PORT SIZE SECONDS

The client keeps a window of frames in flight, counts the echoed bytes, and prints
``{"frames": n, "seconds": s, "rate": r}``.
"""

from __future__ import annotations

import asyncio
import json
import signal
import struct
import sys
import time
from typing import Final, cast

import uvloop

__all__ = ["EchoProtocol", "main"]

_LENGTH: Final = struct.Struct(">I")
_HOST: Final = "127.0.0.1"
_BURST_BYTES: Final = 64 * 1024  #: about this much per client write
_WINDOW_BYTES: Final = 2 * 1024 * 1024  #: about this much in flight


class EchoProtocol(asyncio.Protocol):
    """Echo length-prefixed frames, one write per frame or one per read."""

    def __init__(self, batch: bool) -> None:
        self._batch = batch
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport."""
        # uvloop's transports do not subclass asyncio.Transport; they implement it.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        """Find the frames in the bytes read and echo them."""
        assert self._transport is not None
        buf = self._buffer
        buf += data
        pos, end = 0, len(buf)
        while end - pos >= 4:
            (length,) = _LENGTH.unpack_from(buf, pos)
            if end - pos - 4 < length:
                break
            if not self._batch:
                self._transport.write(bytes(buf[pos : pos + 4 + length]))
            pos += 4 + length
        if self._batch and pos:
            self._transport.write(bytes(buf[:pos]))  # every answer of this read at once
        del buf[:pos]


async def _serve(port: int, batch: bool) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    server = await loop.create_server(lambda: EchoProtocol(batch), _HOST, port)
    await stop.wait()
    server.close()


class _Client(asyncio.Protocol):
    def __init__(self, size: int) -> None:
        frame = _LENGTH.pack(size) + b"x" * size
        self._frame_len = len(frame)
        self._per_burst = max(1, _BURST_BYTES // len(frame))
        self._window = max(self._per_burst, _WINDOW_BYTES // len(frame))
        self._burst = frame * self._per_burst
        self.received = 0
        self._sent = 0
        self.stopping = False
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; they implement it.
        self._transport = cast(asyncio.Transport, transport)
        self._fill()

    def _fill(self) -> None:
        assert self._transport is not None
        while not self.stopping and self._sent - self.frames < self._window:
            self._transport.write(self._burst)
            self._sent += self._per_burst

    @property
    def frames(self) -> int:
        return self.received // self._frame_len

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        self._fill()


async def _measure(port: int, size: int, seconds: float) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    transport, client = await loop.create_connection(lambda: _Client(size), _HOST, port)
    await asyncio.sleep(0.2)  # warm-up: the window fills, the loop settles
    first, began = client.frames, time.monotonic()
    await asyncio.sleep(seconds)  # a measurement window, not synchronisation
    frames, ended = client.frames - first, time.monotonic()
    client.stopping = True
    transport.close()
    return {"frames": frames, "seconds": ended - began, "rate": frames / (ended - began)}


def main(argv: list[str] | None = None) -> None:
    """``server PORT MODE`` or ``client PORT SIZE SECONDS``."""
    args = sys.argv[1:] if argv is None else argv
    if args[0] == "server":
        uvloop.run(_serve(int(args[1]), args[2] == "batch"))
        return
    result = uvloop.run(_measure(int(args[1]), int(args[2]), float(args[3])))
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
