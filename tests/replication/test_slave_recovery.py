"""A slave killed with kill -9 recovers from its checkpoint, not from its first segment.

Replication advances the slave's checkpoint times as a master's puts do (the commitlog
time by ``store/replica.py``, the consume queue and index times by the dispatch), so the
slave's crash recovery re-checks only the segments from the checkpoint's time on.
"""

from __future__ import annotations

import re
import struct
import time
from pathlib import Path

from tests.replication.nodes import (
    SlaveProcess,
    ha_port,
    master_props,
    running_master,
    slave_props,
    until,
)
from tests.replication.test_replication import (
    QUEUES,
    bodies,
    caught_up,
    max_offset,
    send_some,
)

_RECOVERED = re.compile(r"store recovered.*clean=(\w+).*redispatched=(\d+)")
#: physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp (store/_checkpoint.py).
_FIELDS = struct.Struct(">qqq")


def _checkpoint(store: Path) -> tuple[int, int, int]:
    path = store / "checkpoint"
    if not path.exists():
        return 0, 0, 0
    return _FIELDS.unpack(path.read_bytes()[: _FIELDS.size])


async def test_killed_slave_rechecks_only_what_follows_its_checkpoint(tmp_path: Path) -> None:
    async with running_master(tmp_path / "m", master_props()) as master:
        await ha_port(master)
        slave = SlaveProcess(tmp_path / "s", master.namesrv_addr, slave_props())
        try:
            await slave.start()
            early = 400  # about 4 segments of 64 KiB
            await send_some(master.broker_addr, early)
            sent_by = int(time.time() * 1000)
            await caught_up(master, slave)
            later = early

            async def checkpoint_past_the_early_messages() -> bool:
                # Keep the master storing (and the slave replicating) until the slave's
                # checkpoint, all three times, is 3 s (recovery's margin) past them.
                nonlocal later
                await send_some(master.broker_addr, 1, start=later)
                later += 1
                return min(_checkpoint(slave.store)) > sent_by + 3000

            await until("the slave's checkpoint advancing", checkpoint_past_the_early_messages)
            await caught_up(master, slave)
            total = later
            await slave.kill9()
            await slave.start()
            match = await slave.wait_line(_RECOVERED, 30)
            assert match[1] == "False"  # a crash, not a clean stop
            # Every record from the first segment on would be re-dispatched (all
            # ``total``) if the checkpoint's commitlog time had stayed 0.
            assert int(match[2]) < total - 200, match[0]
            # And recovered correctly: same end, same queues; and it follows on.
            await send_some(master.broker_addr, 20, start=total)
            await caught_up(master, slave)
            assert await max_offset(slave.broker_addr) == await max_offset(master.broker_addr)
            for q in range(QUEUES):
                assert await bodies(slave.broker_addr, q) == await bodies(master.broker_addr, q)
        finally:
            await slave.close()
