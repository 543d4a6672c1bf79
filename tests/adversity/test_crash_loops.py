"""kill -9 under load, over and over: nothing acknowledged is ever lost.

Each cycle starts a load (producers sending, some to topics their send creates; an
admin creating topics and groups; a consumer committing offsets), kills the broker
process with SIGKILL after a random number of acknowledgements, starts it again over
the same directory and checks that every message, topic, group and committed offset it
acknowledged is there (and routed by the name server), and that the store's files pass
the layout checker and the broker's own store check. The figures in
docs/reliability.md ("Crash loops") are the long counts:
``ROCKLET_ADVERSITY=long pytest -s tests/adversity/test_crash_loops.py``.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.adversity.conftest import rounds
from tests.adversity.crash_load import Acked, CrashLoad, live_store_check, verify
from tests.adversity.procs import running_broker
from tests.store.layout_checker import check_store

SEGMENT = 1024 * 1024
CQ_ENTRIES = 1000
SLOTS = 1000
INDEX_ENTRIES = 4000


@pytest.mark.timeout(rounds(240, 4 * 3600))
@pytest.mark.parametrize(
    ("flush", "cycles"),
    [("SYNC_FLUSH", rounds(3, 100)), ("ASYNC_FLUSH", rounds(2, 20))],
)
async def test_kill9_under_load_loses_nothing_acknowledged(
    tmp_path: Path, flush: str, cycles: int
) -> None:
    props = {
        "flushDiskType": flush,
        "mappedFileSizeCommitLog": str(SEGMENT),
        "mappedFileSizeConsumeQueue": str(CQ_ENTRIES * 20),
        "maxHashSlotNum": str(SLOTS),
        "maxIndexNum": str(INDEX_ENTRIES),
    }
    rng = random.Random(20_240_601)
    acked = Acked()
    async with running_broker(tmp_path, props) as broker:
        for cycle in range(cycles):
            load = CrashLoad(broker, acked, cycle)
            await load.start()
            await load.wait_acks(rng.randint(20, 400))
            await broker.kill9()
            await load.stop()
            await broker.restart()
            lost = await verify(broker, acked, load.queues, load.new_topics)
            assert lost == [], f"cycle {cycle}: lost {lost[:20]}"
            layout = check_store(broker.store, SEGMENT, CQ_ENTRIES, SLOTS, INDEX_ENTRIES)
            assert layout.errors == [], f"cycle {cycle}: {layout.errors[:20]}"
            # And by the broker's own check (rocklet store check's rules), while it runs.
            report = await live_store_check(broker)
            assert report["ok"] is True, f"cycle {cycle}: {report['findings']}"
            print(f"{flush} cycle {cycle}: {acked.message_count} messages so far, intact")
        # Every message again, against the last run: no later crash lost an earlier one.
        lost = await verify(broker, acked, set(acked.messages), set())
        assert lost == []
    print(
        f"\n{flush}: {cycles} kill -9 cycles; acknowledged and found after restart: "
        f"{acked.message_count} messages, {len(acked.topics)} topics "
        f"({sum(1 for n in acked.topics.values() if n == 0)} created by sends), "
        f"{len(acked.groups)} groups, {acked.commits} offset commits; lost: 0"
    )
