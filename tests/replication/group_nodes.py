"""A broker group as separate processes: a name server, a master and its slave.

Failover tests kill the master, so the name server cannot live in the master's process
(``rocklet standalone``): here it is ``rocklet namesrv`` and each broker ``rocklet
broker``, all on free loopback ports, readiness read from their "listening" log lines.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.adversity.procs import BrokerProcess
from tests.compat.harness import create_topic
from tests.replication.nodes import SEGMENT, SlaveProcess, broker_status, until

__all__ = ["BrokerNode", "Group", "NamesrvProcess", "running_group"]


class NamesrvProcess(BrokerProcess):
    """``rocklet namesrv`` on a free loopback port (the store arguments go unused)."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        super().__init__(root, {})

    READY = ("namesrv",)

    def command(self) -> list[str]:
        """``rocklet namesrv`` on a free loopback port."""
        return ["namesrv", "--host", "127.0.0.1", "--port", "0"]


class BrokerNode(SlaveProcess):
    """``rocklet broker`` on loopback, registered with a name server (any role).

    Args:
        root: Holds ``broker.conf`` and the store.
        namesrv_addr: The name server.
        properties: broker.conf (role, id, segment size, ...).
    """

    def __init__(self, root: Path, namesrv_addr: str, properties: Mapping[str, str]) -> None:
        super().__init__(root, namesrv_addr, {"brokerIP1": "127.0.0.1", **properties})


@dataclass
class Group:
    """The three processes of a running group."""

    namesrv: NamesrvProcess
    master: BrokerNode
    slave: BrokerNode


async def _kill(proc: BrokerProcess) -> None:
    if proc.proc is not None and proc.proc.returncode is None:
        proc.proc.kill()
        await proc.proc.wait()
    if proc._reader is not None:
        with contextlib.suppress(Exception):
            await proc._reader


@asynccontextmanager
async def running_group(
    root: Path, role: str, topics: Sequence[tuple[str, int]] = ()
) -> AsyncIterator[Group]:
    """A name server, a master of ``role`` and its slave, the slave connected over HA.

    ``topics`` (name, queues) are created on the master before the slave starts, so the
    slave copies them at once rather than at its next 10 s metadata sync.
    """
    common = {"brokerName": "broker-fo", "mappedFileSizeCommitLog": str(SEGMENT)}
    namesrv = NamesrvProcess(root / "ns")
    master = BrokerNode(root / "m", "", {**common, "brokerId": "0", "brokerRole": role})
    slave = BrokerNode(root / "s", "", {**common, "brokerId": "1", "brokerRole": "SLAVE"})
    try:
        await namesrv.start()
        master._namesrv = slave._namesrv = namesrv.namesrv_addr
        await master.start()
        for topic, queues in topics:
            await create_topic(master.broker_addr, topic, queues)
        await slave.start()

        async def connected() -> bool:
            return (await broker_status(master.broker_addr)).get("haConnectedSlaves") == "1"

        await until("the slave connecting to the master", connected)
        yield Group(namesrv, master, slave)
    finally:
        for proc in (slave, master, namesrv):
            await _kill(proc)
