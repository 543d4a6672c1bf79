"""A client sending garbage on connection after connection gets a few log lines a minute."""

from __future__ import annotations

import asyncio

import pytest

from rocklet.transport import ProcessorRegistry, RemotingServer
from rocklet.transport import connection as connection_module
from rocklet.transport.log_limit import LimitedWarnings
from tests.logcapture import capture_sdk_logs

#: A frame length below the 4 bytes of the header-length field: broken.
GARBAGE = b"\x00\x00\x00\x02\xff\xff\xff\xff"


async def test_broken_frames_are_logged_at_most_twenty_a_minute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    limited = LimitedWarnings(connection_module._log, "left out", clock=lambda: now[0])
    monkeypatch.setattr(connection_module, "_BROKEN_FRAMES", limited)
    server = RemotingServer("127.0.0.1", 0, ProcessorRegistry())
    await server.start()
    try:
        with capture_sdk_logs() as logs:
            for _ in range(30):
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(GARBAGE)
                assert await reader.read() == b""  # closed by the server
                writer.close()
            assert sum(e["event"] == "closing connection: broken frame" for e in logs) == 20
            assert limited.suppressed == 10
            now[0] = 60.0
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(GARBAGE)
            assert await reader.read() == b""
            writer.close()
        assert [e.get("count") for e in logs if e["event"] == "left out"] == [10]
    finally:
        await server.stop()
