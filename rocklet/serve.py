"""Long-running commands: run servers until SIGTERM/SIGINT, then stop them cleanly.

Each first raises the process's open-file limit to its hard limit and logs it
(:func:`rocklet.broker.fd_limit.raise_fd_limit`): connections and mapped store files
each hold a descriptor. Once up, each freezes its start-up objects
(:func:`rocklet.transport.heap.freeze_startup_objects`), so the garbage collector's full
collections, which run on the event loop, skip them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import platform
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import structlog

from rocklet.broker.app import Broker, claim_store_directory
from rocklet.broker.config import BrokerConfig, NamesrvConfig
from rocklet.broker.fd_limit import raise_fd_limit
from rocklet.broker.namesrv import NamesrvServer
from rocklet.broker.tls_config import TlsSettings
from rocklet.protocol import compiled
from rocklet.transport.heap import freeze_startup_objects

__all__ = ["serve_broker", "serve_namesrv", "serve_standalone"]

log = structlog.get_logger(__name__)


@contextlib.asynccontextmanager
async def _stop_signal() -> AsyncIterator[asyncio.Event]:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        yield stop
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


async def serve_namesrv(config: NamesrvConfig, *, tls: TlsSettings | None = None) -> None:
    """Run a name server until SIGTERM or SIGINT, then stop it cleanly."""
    raise_fd_limit()
    async with _stop_signal() as stop:
        server = await NamesrvServer.start(
            config.listen_host, config.listen_port, config=config, tls=tls
        )
        log.info(
            "namesrv listening", host=config.listen_host, port=server.port, tls=server.tls_mode
        )
        log.debug("heap", frozen_objects=freeze_startup_objects())
        await stop.wait()
        log.info("namesrv stopping")
        await server.stop()
        log.info("namesrv stopped")


def _runtime() -> dict[str, str]:
    """The start line's runtime fields: the codecs in use and the interpreter.

    The interpreter's binary is named because builds of one Python version differ by
    ~12 % in CPU per message (docs/operations.md, "The Python interpreter").
    """
    return {
        "codecs": compiled.describe(),
        "python": platform.python_version(),
        "interpreter": str(Path(sys.executable).resolve()),
    }


async def serve_broker(config: BrokerConfig, *, tls: TlsSettings | None = None) -> None:
    """Run a broker on ``listenHost`` until SIGTERM or SIGINT; the stop closes the store."""
    raise_fd_limit()
    async with _stop_signal() as stop:
        broker = await Broker.start(config, host=config.listen_host, tls=tls)
        log.info(
            "broker listening",
            host=config.listen_host,
            port=broker.port,
            addr=broker.addr,
            **_runtime(),
        )
        log.debug("heap", frozen_objects=freeze_startup_objects())
        await stop.wait()
        log.info("broker stopping")
        await broker.stop()
        log.info("broker stopped")


async def serve_standalone(
    config: BrokerConfig,
    namesrv_port: int,
    *,
    tls: TlsSettings | None = None,
) -> None:
    """Run a name server and a broker registered with it, in one process.

    The broker advertises 127.0.0.1 unless ``brokerIP1`` is set, so a laptop's
    standalone broker is reachable by local clients whatever the machine's network.
    Both servers bind ``listenHost`` (the CLI defaults it to loopback, so nothing
    outside this machine reaches them until asked: ``--host 0.0.0.0`` plus a
    ``brokerIP1`` clients can use).
    The store directory is claimed first: a second standalone on the same directory
    names the first one (and an unwritable one is named) before a port is bound. Both
    servers take the same TLS settings, as two JVMs given the same ``-D`` would.
    """
    raise_fd_limit()
    host = config.listen_host
    lock = await claim_store_directory(
        config.store_path_root_dir, "rocklet standalone", config.commit_log_dir
    )
    async with _stop_signal() as stop:
        try:
            # The KV table beside the store, as RocketMQ keeps it under user.home.
            kv_file = config.store_path_root_dir / "namesrv" / "kvConfig.json"
            namesrv = await NamesrvServer.start(
                host, namesrv_port, config=NamesrvConfig(kv_config_path=kv_file), tls=tls
            )
        except BaseException:
            lock.release()
            raise
        log.info("namesrv listening", host=host, port=namesrv.port, tls=namesrv.tls_mode)
        config = dataclasses.replace(
            config,
            namesrv_addr=f"127.0.0.1:{namesrv.port}",
            broker_ip1=config.broker_ip1 or "127.0.0.1",
        )
        try:
            broker = await Broker.start(config, host=host, store_lock=lock, tls=tls)
        except BaseException:
            await namesrv.stop()
            raise
        log.info(
            "broker listening",
            port=broker.port,
            addr=broker.addr,
            data=str(config.store_path_root_dir),
            **_runtime(),
        )
        log.debug("heap", frozen_objects=freeze_startup_objects())
        await stop.wait()
        log.info("standalone stopping")
        await broker.stop()
        await namesrv.stop()
        log.info("standalone stopped")
