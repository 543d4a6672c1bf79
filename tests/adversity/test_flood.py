"""Floods and slow readers: a client that pipelines requests and never (or slowly) reads
the answers must neither starve another client nor make the broker's memory grow.

Each test floods a real ``rocklet standalone`` process from a child process
(:mod:`tests.adversity.flood`) while an SDK producer sends one message at a time and
asks the name server for a route. Before flow control, a SYNC_FLUSH broker flooded by
two connections answered the producer after ~40 s and grew by half a GiB. The answer
times measured here are recorded in docs/reliability.md, not asserted tightly: the
asserted bound is only that every answer came before the flood ended.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tests.adversity.conftest import rounds
from tests.adversity.flood import MIB, FloodReport, measure_flood
from tests.adversity.procs import running_broker

#: Seconds each flood lasts: a few in make test, half a minute with ROCKLET_ADVERSITY=long.
FLOOD_S: Final = float(rounds(4, 30))
#: Growth of the broker's anonymous memory a flood may cause. Unbounded buffering grew
#: it by over 500 MiB in 15 s; bounded work in flight keeps it within a few MiB.
MAX_GROWTH: Final = 64 * MIB
#: Small segments: a flood of a few seconds must not need a 1 GiB commitlog file.
STORE: Final = {"mappedFileSizeCommitLog": str(64 * MIB)}


def check(report: FloodReport) -> None:
    """The probe was served throughout the flood and the broker's heap stayed bounded."""
    print(report.summary())  # the figures for docs/reliability.md (pytest -s)
    assert report.sends > 0 and report.send_failures == 0, report.summary()
    assert report.route_queries > 0 and report.route_failures == 0, report.summary()
    assert report.worst_send_s < FLOOD_S, report.summary()
    assert report.worst_route_s < FLOOD_S, report.summary()
    assert report.peak_anon - report.anon_before < MAX_GROWTH, report.summary()
    assert report.flooded_bytes > 0


async def test_flooders_that_never_read_do_not_starve_a_sync_flush_broker(tmp_path: Path) -> None:
    # SYNC_FLUSH: every send waits for its group commit, so unanswered requests pile
    # up as handlers in flight, not only as bytes in the write buffer.
    props = {**STORE, "flushDiskType": "SYNC_FLUSH"}
    async with running_broker(tmp_path, props) as broker:
        check(await measure_flood(broker, FLOOD_S, flooders=2))


async def test_flooders_that_never_read_do_not_starve_an_async_flush_broker(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path, STORE) as broker:
        check(await measure_flood(broker, FLOOD_S, flooders=4))


async def test_a_slow_reader_does_not_starve_the_broker(tmp_path: Path) -> None:
    props = {**STORE, "flushDiskType": "SYNC_FLUSH"}
    async with running_broker(tmp_path, props) as broker:
        check(await measure_flood(broker, FLOOD_S, read_bytes_per_s=20_000))


async def test_flooders_do_not_starve_the_name_server(tmp_path: Path) -> None:
    async with running_broker(tmp_path, STORE) as broker:
        check(await measure_flood(broker, FLOOD_S, flooders=2, flood_namesrv=True))
