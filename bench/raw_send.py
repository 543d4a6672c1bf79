"""Raw pipelined SEND_MESSAGE_V2 frames on one socket: the broker's cost per send alone.

No SDK in the way: the frames are made once per message with the one-letter V2 keys
and JSON header the SDK and the Java client send, ``window`` of them kept in flight,
optionally signed with an ACL account. Used by ``hotpath.py`` and ``acl_bench.py``.
"""

from __future__ import annotations

import asyncio
import time
from typing import cast

from rocklet.client.message import UniqKeyGenerator
from rocklet.protocol.acl import Credentials, sign
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.frame import FrameDecoder, encode_command_parts

__all__ = ["run_raw"]


class _RawSender(asyncio.Protocol):
    """Keeps ``window`` SEND_MESSAGE_V2 requests in flight on one socket."""

    def __init__(
        self,
        total: int,
        window: int,
        topic: str,
        queues: int,
        body: bytes,
        credentials: Credentials | None,
        done: asyncio.Future[float],
    ) -> None:
        self._total, self._window, self._done = total, window, done
        self._topic, self._queues, self._body = topic, queues, body
        self._credentials = credentials
        self._decoder = FrameDecoder()
        self._ids = UniqKeyGenerator()
        self._sent = self._answered = 0
        self._transport: asyncio.Transport | None = None
        self._began = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def start(self) -> None:
        self._began = time.perf_counter()
        self._send(min(self._window, self._total))

    def _send(self, n: int) -> None:
        assert self._transport is not None
        parts: list[bytes | bytearray | memoryview] = []
        for _ in range(n):
            self._sent += 1
            fields = {
                "a": "PG_raw",
                "b": self._topic,
                "c": "TBW102",
                "d": "4",
                "e": str(self._sent % self._queues),
                "f": "0",
                "g": str(int(time.time() * 1000)),
                "h": "0",
                "i": f"UNIQ_KEY\x01{self._ids.next()}\x02WAIT\x01true",
                "j": "0",
                "k": "false",
                "m": "false",
            }
            cmd = RemotingCommand(
                RequestCode.SEND_MESSAGE_V2, opaque=self._sent, ext_fields=fields, body=self._body
            )
            if self._credentials is not None:
                cmd = sign(cmd, self._credentials)
            parts += encode_command_parts(cmd)
        self._transport.writelines(parts)

    def data_received(self, data: bytes) -> None:
        self._decoder.feed(data)
        answered = 0
        for cmd in self._decoder.commands():
            if cmd.code != ResponseCode.SUCCESS:
                if not self._done.done():
                    self._done.set_exception(RuntimeError(f"send failed: {cmd.code} {cmd.remark}"))
                return
            answered += 1
        self._answered += answered
        if self._answered >= self._total:
            if not self._done.done():
                self._done.set_result(time.perf_counter() - self._began)
            return
        self._send(min(answered, self._total - self._sent))


async def run_raw(
    port: int,
    total: int,
    *,
    topic: str,
    queues: int,
    body: bytes,
    window: int = 256,
    credentials: Credentials | None = None,
) -> tuple[int, float]:
    """Send ``total`` messages to the broker on 127.0.0.1:``port``.

    Args:
        port: The broker's port.
        total: Messages to send.
        topic: Their topic (it must exist with ``queues`` write queues).
        queues: Queues the messages are spread over.
        body: Every message's body.
        window: Requests in flight.
        credentials: Sign every request with this ACL account; ``None``: unsigned.

    Returns:
        ``(total, seconds from the first send to the last answer)``.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[float] = loop.create_future()
    transport, sender = await loop.create_connection(
        lambda: _RawSender(total, window, topic, queues, body, credentials, done),
        "127.0.0.1",
        port,
    )
    try:
        sender.start()
        return total, await asyncio.wait_for(done, 600)
    finally:
        transport.close()
