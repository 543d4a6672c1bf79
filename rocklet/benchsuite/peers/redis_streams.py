"""Redis Streams: Debian's ``redis-server`` and redis-py (with hiredis) on asyncio.

Durability as BENCHMARKS.md sets it for a fair comparison: ``appendonly yes``
with ``appendfsync everysec`` (an fsync a second, like Rocklet's ASYNC_FLUSH), no RDB
snapshots, no AOF rewrites. Producing is a pipeline of ``XADD`` (one round trip per
request); consuming is ``XREADGROUP`` of up to 1000 entries, each batch's ``XACK`` pipelined
with the next read: the usual consumer-group pattern.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from rocklet.benchsuite.peers.base import Sink, Unsupported, client_library, finish_reader
from rocklet.benchsuite.procs import LOOPBACK, ServerProcess, free_port

__all__ = ["RedisClient", "RedisServer"]

_GROUP: Final = "bench"
_READ_COUNT: Final = 1000
_BLOCK_MS: Final = 100


class RedisServer:
    """``redis-server`` on loopback with an append-only file in a temporary directory."""

    name = "redis"

    def __init__(self) -> None:
        self._proc: ServerProcess | None = None
        self._port = 0

    @staticmethod
    def available() -> str | None:
        """Why it cannot run here, or None."""
        return None if shutil.which("redis-server") else "redis-server is not installed"

    def start(self, workdir: Path, timeout_s: float) -> None:
        """Start it with AOF everysec; return once its port accepts."""
        workdir.mkdir(parents=True, exist_ok=True)
        self._port = free_port()
        argv = ["redis-server", "--bind", LOOPBACK, "--port", str(self._port)]
        argv += ["--dir", str(workdir), "--appendonly", "yes", "--appendfsync", "everysec"]
        argv += ["--save", "", "--auto-aof-rewrite-percentage", "0", "--daemonize", "no"]
        argv += ["--protected-mode", "yes", "--logfile", ""]
        self._proc = ServerProcess(self.name, argv, workdir / "server.log", cwd=workdir)
        self._proc.require_ports([self._port], timeout_s)

    def stop(self) -> None:
        """SIGTERM (Redis writes the AOF tail and exits), SIGKILL after 30 s."""
        if self._proc is not None:
            self._proc.stop()
            self._proc = None

    @property
    def pgid(self) -> int | None:
        """The server's process group."""
        return None if self._proc is None else self._proc.pid

    @property
    def address(self) -> Mapping[str, Any]:
        """Host and port."""
        return {"host": LOOPBACK, "port": self._port}


class RedisClient:
    """redis-py's asyncio client on one stream."""

    def __init__(self, address: Mapping[str, Any]) -> None:
        aioredis = client_library("redis.asyncio")
        # redis-py takes a connection per command in flight: a blocking pool makes the
        # paced latency case queue for one instead of failing with "Too many connections".
        pool = aioredis.BlockingConnectionPool(
            host=address["host"], port=int(address["port"]), max_connections=64, timeout=None
        )
        self._redis = aioredis.Redis(connection_pool=pool)
        self._stream = ""
        self._reader: asyncio.Task[None] | None = None
        self._stopping = False

    async def open(self, channel: str, *, create: bool) -> None:
        """With ``create``, delete the stream (a fresh, empty one appears on first XADD)."""
        self._stream = channel
        if create:
            await self._redis.delete(channel)
        await self._redis.ping()

    async def send(self, bodies: Sequence[bytes], tag: str | None = None) -> None:
        """A pipeline of one ``XADD`` per body."""
        if tag is not None:
            raise Unsupported("Redis Streams have no tags")
        async with self._redis.pipeline(transaction=False) as pipe:
            for body in bodies:
                pipe.xadd(self._stream, {b"b": body})
            await pipe.execute()

    async def start_consumer(
        self, sink: Sink, *, from_start: bool, tag: str | None = None, **_: Any
    ) -> None:
        """A consumer group from the stream's start (``0``) or its end (``$``)."""
        if tag is not None:
            raise Unsupported("Redis Streams have no tags")
        with contextlib.suppress(Exception):  # a group left from an earlier case
            await self._redis.xgroup_destroy(self._stream, _GROUP)
        start = "0" if from_start else "$"
        await self._redis.xgroup_create(self._stream, _GROUP, id=start, mkstream=True)
        self._reader = asyncio.create_task(self._read(sink), name="redis-reader")

    async def _read(self, sink: Sink) -> None:
        acks: list[bytes] = []
        while not self._stopping:
            # The previous batch's XACK rides in the same round trip as the next read.
            async with self._redis.pipeline(transaction=False) as pipe:
                if acks:
                    pipe.xack(self._stream, _GROUP, *acks)
                pipe.xreadgroup(
                    _GROUP, "c1", {self._stream: ">"}, count=_READ_COUNT, block=_BLOCK_MS
                )
                answer = (await pipe.execute())[-1] or []
            acks = []
            for _stream, entries in answer:
                acks.extend(entry_id for entry_id, _ in entries)
                sink([fields[b"b"] for _, fields in entries])

    async def close(self) -> None:
        """Stop reading; disconnect."""
        if self._reader is not None:
            self._stopping = True
            await finish_reader(self._reader)
        await self._redis.aclose()
