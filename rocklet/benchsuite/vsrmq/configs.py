"""The config files the benchmark's RocketMQ name server and broker start with, and ports.

The broker is what the comparison needs and no more: one master (ASYNC_MASTER), pages
flushed in the background (ASYNC_FLUSH), advertised on loopback (brokerIP1), a fresh
store, topics and groups created on first use.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Final

__all__ = ["broker_conf", "free_broker_port", "namesrv_properties"]

_LOOPBACK: Final = "127.0.0.1"
_TRIES: Final = 200


def namesrv_properties(port: int) -> str:
    """``NamesrvStartup -c`` file: the port it listens on."""
    return f"listenPort={port}\n"


def broker_conf(*, listen_port: int, namesrv_port: int, store: Path) -> str:
    """``BrokerStartup -c`` file: one ASYNC_MASTER with ASYNC_FLUSH on ``listen_port``.

    Args:
        listen_port: Its remoting port (it also binds ``listen_port - 2``, the VIP
            channel, and ``listen_port + 1``, the HA port).
        namesrv_port: The name server on loopback it registers with.
        store: Its storePathRootDir (a fresh, empty directory).

    Returns:
        The file's text, Java properties.
    """
    lines = {
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": "0",
        "brokerRole": "ASYNC_MASTER",
        "flushDiskType": "ASYNC_FLUSH",
        "brokerIP1": _LOOPBACK,
        "brokerIP2": _LOOPBACK,
        "namesrvAddr": f"{_LOOPBACK}:{namesrv_port}",
        "listenPort": str(listen_port),
        "storePathRootDir": str(store),
        "storePathCommitLog": str(store / "commitlog"),
        "autoCreateTopicEnable": "true",
        "autoCreateSubscriptionGroup": "true",
        # A benchmark's store is thrown away afterwards; never delete files during a run.
        "deleteWhen": "04",
        "fileReservedTime": "48",
    }
    return "".join(f"{key}={value}\n" for key, value in lines.items())


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            # RocketMQ binds the wildcard address: check that, not only loopback.
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_broker_port() -> int:
    """A port P free right now with P-2 and P+1 free too (a 4.x broker binds all three).

    Raises:
        RuntimeError: No such port found in a few hundred tries.
    """
    for _ in range(_TRIES):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((_LOOPBACK, 0))
            port = int(sock.getsockname()[1])
        if 1026 < port < 65534 and all(_bindable(p) for p in (port, port - 2, port + 1)):
            return port
    raise RuntimeError("no free port P with P-2 and P+1 free as well")
