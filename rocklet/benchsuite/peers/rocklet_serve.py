"""Run a Rocklet name server and broker in one process, bound to loopback only.

The same pair as ``rocklet standalone`` (same classes, uvloop, heap settings), except
that both listen on 127.0.0.1 alone: the suite never opens a port on another interface. Usage::

    python -m rocklet.benchsuite.peers.rocklet_serve CONF NAMESRV_PORT BROKER_PORT DATA_DIR

SIGTERM or SIGINT stops the broker (flushing the store) and then the name server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sys
from pathlib import Path

import structlog

from rocklet.broker.app import Broker
from rocklet.broker.config import load_broker_config
from rocklet.broker.namesrv import NamesrvServer
from rocklet.logging import configure_logging
from rocklet.transport.heap import freeze_startup_objects, retain_freed_memory
from rocklet.transport.loop import run as run_loop

__all__ = ["main", "serve"]

_HOST = "127.0.0.1"
log = structlog.get_logger(__name__)


async def serve(conf: Path, namesrv_port: int, broker_port: int, data_dir: Path) -> None:
    """Serve until SIGTERM or SIGINT, then stop both cleanly."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    namesrv = await NamesrvServer.start(_HOST, namesrv_port)
    config = load_broker_config(
        conf, {"listen_port": broker_port, "store_path_root_dir": data_dir}, environ={}
    )
    config = dataclasses.replace(config, namesrv_addr=f"{_HOST}:{namesrv.port}", broker_ip1=_HOST)
    try:
        broker = await Broker.start(config, host=_HOST)
    except BaseException:
        await namesrv.stop()
        raise
    log.info("bench broker listening", namesrv=namesrv.port, broker=broker.port)
    freeze_startup_objects()  # as the server commands do
    await stop.wait()
    await broker.stop()
    await namesrv.stop()


def main() -> None:
    """Parse the four positional arguments and serve."""
    conf, namesrv_port, broker_port, data_dir = sys.argv[1:5]
    configure_logging(level="WARNING")
    retain_freed_memory()  # as the server commands do
    run_loop(serve(Path(conf), int(namesrv_port), int(broker_port), Path(data_dir)))


if __name__ == "__main__":
    main()
