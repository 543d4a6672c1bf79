"""A real name server + broker on loopback (port 0) for integration tests."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocklet.broker.app import Broker
from rocklet.broker.config import BrokerConfig
from rocklet.broker.namesrv import NamesrvServer
from rocklet.broker.tls_config import TlsSettings

__all__ = ["Cluster", "running_cluster", "small_broker_config"]


@dataclass
class Cluster:
    """A running name server and broker."""

    namesrv: NamesrvServer
    broker: Broker

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv.port}"


def small_broker_config(store: Path, namesrv_addr: str | None, **overrides: Any) -> BrokerConfig:
    """A broker config with test-sized files, bound to a free port on loopback."""
    config = BrokerConfig(
        store_path_root_dir=store,
        listen_port=0,
        namesrv_addr=namesrv_addr,
        broker_ip1="127.0.0.1",
        mapped_file_size_commit_log=4 * 1024 * 1024,
        mapped_file_size_consume_queue=1000 * 20,
        max_hash_slot_num=1000,
        max_index_num=4000,
    )
    return dataclasses.replace(config, **overrides)


@asynccontextmanager
async def running_cluster(
    store: Path, *, tls: TlsSettings | None = None, **overrides: Any
) -> AsyncIterator[Cluster]:
    """Start a name server and a broker registered with it; stop both afterwards.

    ``tls`` gives both the same TLS settings (default: none, whatever the machine's
    ``/etc/rocketmq/tls.properties`` says).
    """
    tls = TlsSettings() if tls is None else tls
    namesrv = await NamesrvServer.start("127.0.0.1", 0, tls=tls)
    try:
        config = small_broker_config(store, f"127.0.0.1:{namesrv.port}", **overrides)
        broker = await Broker.start(config, host="127.0.0.1", tls=tls)
        try:
            yield Cluster(namesrv, broker)
        finally:
            await broker.stop()
    finally:
        await namesrv.stop()
