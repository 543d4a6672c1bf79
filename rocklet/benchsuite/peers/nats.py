"""NATS JetStream: Debian's ``nats-server`` (file storage) and nats-py.

NATS 2.9 has no fsync-interval setting: its file store flushes in the background,
which is weaker than Redis's ``everysec`` (see BENCHMARKS.md). Producing is
``publish_async`` of each body and awaiting every acknowledgement of the request;
consuming a backlog is a durable pull consumer with ``AckPolicy.ALL`` and
``max_ack_pending=-1`` (otherwise batches are throttled), ``fetch(1000)`` and one ack
for each batch; the live (latency) case uses a push subscription acknowledging every
100th message.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from rocklet.benchsuite.peers.base import Sink, Unsupported, client_library, finish_reader
from rocklet.benchsuite.procs import LOOPBACK, ServerProcess, free_port

__all__ = ["JetStreamClient", "NatsServer"]

_FETCH: Final = 1000
_FETCH_TIMEOUT_S: Final = 0.5
_PENDING: Final = 20_000
_ACK_EVERY: Final = 100


class NatsServer:
    """``nats-server -js`` on loopback with its store in a temporary directory."""

    name = "nats"

    def __init__(self) -> None:
        self._proc: ServerProcess | None = None
        self._port = 0

    @staticmethod
    def available() -> str | None:
        """Why it cannot run here, or None."""
        return None if shutil.which("nats-server") else "nats-server is not installed"

    def start(self, workdir: Path, timeout_s: float) -> None:
        """Start it with JetStream file storage; return once its port accepts."""
        workdir.mkdir(parents=True, exist_ok=True)
        self._port = free_port()
        argv = ["nats-server", "-a", LOOPBACK, "-p", str(self._port), "-js"]
        argv += ["-sd", str(workdir / "jetstream")]
        self._proc = ServerProcess(self.name, argv, workdir / "server.log", cwd=workdir)
        self._proc.require_ports([self._port], timeout_s)

    def stop(self) -> None:
        """SIGTERM, SIGKILL after 30 s."""
        if self._proc is not None:
            self._proc.stop()
            self._proc = None

    @property
    def pgid(self) -> int | None:
        """The server's process group."""
        return None if self._proc is None else self._proc.pid

    @property
    def address(self) -> Mapping[str, Any]:
        """The client URL."""
        return {"url": f"nats://{LOOPBACK}:{self._port}"}


class JetStreamClient:
    """nats-py's JetStream context on one stream (subject = stream name)."""

    def __init__(self, address: Mapping[str, Any]) -> None:
        self._url = str(address["url"])
        self._nc: Any = None
        self._js: Any = None
        self._subject = ""
        self._reader: asyncio.Task[None] | None = None
        self._stopping = False

    async def open(self, channel: str, *, create: bool) -> None:
        """Connect; with ``create``, replace the stream by an empty file-backed one."""
        nats, api = client_library("nats"), client_library("nats.js.api")
        self._subject = channel
        self._nc = await nats.connect(self._url, allow_reconnect=False)
        self._js = self._nc.jetstream(publish_async_max_pending=_PENDING)
        if create:
            with contextlib.suppress(Exception):  # not there yet
                await self._js.delete_stream(channel)
            await self._js.add_stream(
                name=channel, subjects=[channel], storage=api.StorageType.FILE
            )

    async def send(self, bodies: Sequence[bytes], tag: str | None = None) -> None:
        """``publish_async`` each body, then await all their acknowledgements."""
        if tag is not None:
            raise Unsupported("JetStream has subjects, not tags")
        acks = [await self._js.publish_async(self._subject, body) for body in bodies]
        await asyncio.gather(*acks)

    async def start_consumer(
        self, sink: Sink, *, from_start: bool, tag: str | None = None, **_: Any
    ) -> None:
        """A backlog: a durable pull consumer. Live: a push subscription from now on.

        nats-py's ``fetch`` waits for its whole batch once a lingering pull request
        is open, up to its timeout, so a live stream is read the usual push way.
        """
        api = client_library("nats.js.api")
        if tag is not None:
            raise Unsupported("JetStream has subjects, not tags")
        config = api.ConsumerConfig(
            ack_policy=api.AckPolicy.ALL,
            max_ack_pending=-1,
            deliver_policy=api.DeliverPolicy.ALL if from_start else api.DeliverPolicy.NEW,
        )
        if not from_start:
            unacked = 0

            async def on_message(msg: Any) -> None:
                nonlocal unacked
                sink((msg.data,))
                unacked += 1
                if unacked >= _ACK_EVERY:  # AckPolicy.ALL: acknowledges all before it
                    unacked = 0
                    await msg.ack()

            await self._js.subscribe(self._subject, cb=on_message, manual_ack=True, config=config)
            return
        durable = f"bench{time.monotonic_ns()}"
        sub = await self._js.pull_subscribe(self._subject, durable=durable, config=config)
        self._reader = asyncio.create_task(self._read(sub, sink), name="nats-reader")

    async def _read(self, sub: Any, sink: Sink) -> None:
        while not self._stopping:
            try:
                msgs = await sub.fetch(_FETCH, timeout=_FETCH_TIMEOUT_S)
            except TimeoutError:
                continue
            if not msgs:
                continue
            sink([m.data for m in msgs])
            await msgs[-1].ack()  # AckPolicy.ALL: acknowledges the whole batch

    async def close(self) -> None:
        """Stop reading; disconnect."""
        self._stopping = True
        await finish_reader(self._reader)
        if self._nc is not None:
            await self._nc.close()
