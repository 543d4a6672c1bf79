"""Fixtures the name server modules share: a name server on a manual clock, and a
connection to it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from rocklet.broker.namesrv import NamesrvServer
from rocklet.transport.clock import ManualClock
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection


@pytest.fixture
async def clock() -> AsyncIterator[ManualClock]:
    """The clock the name server's route expiry reads; tests move it by hand."""
    yield ManualClock()


@pytest.fixture
async def namesrv(clock: ManualClock) -> AsyncIterator[NamesrvServer]:
    """A name server on an ephemeral loopback port, stopped after the test."""
    server = await NamesrvServer.start("127.0.0.1", 0, clock=clock)
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def conn(namesrv: NamesrvServer) -> AsyncIterator[Connection]:
    """A client connection to :func:`namesrv`."""
    c = await open_connection("127.0.0.1", namesrv.port)
    try:
        yield c
    finally:
        await c.close()
