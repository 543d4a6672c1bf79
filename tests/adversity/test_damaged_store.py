"""Damaged store files under a real ``rocklet standalone`` process.

Acknowledged messages are sent (SYNC_FLUSH), the process is stopped or killed, files are
damaged on disk, and the next start is what is judged: does it start, what does it
report (log, brokerStatus, ``rocklet admin storeCheck``), and which acknowledged messages
can be read. A missing segment must stop the start with one line naming it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rocklet.client import Message, Producer
from rocklet.client.pull_api import PullStatus
from rocklet.client.pull_consumer import PullConsumer
from rocklet.protocol.message_id import parse_offset_msg_id
from tests.adversity.procs import running_broker
from tests.conftest import GOLDEN_STORE
from tests.store.helpers import copy_golden
from tests.store.layout_checker import check_store

SEG = 64 * 1024
PROPS = {"flushDiskType": "SYNC_FLUSH", "mappedFileSizeCommitLog": str(SEG)}
DAMAGE_LINE = re.compile(r"damaged commitlog bytes skipped.*offset=(\d+)")


async def _send(addr: str, topic: str, count: int, prefix: str) -> dict[int, bytes]:
    """Send ``count`` acknowledged messages; their bodies by commitlog offset."""
    sent: dict[int, bytes] = {}
    async with Producer(f"adv-damage-{prefix}", addr) as producer:
        for n in range(count):
            body = f"{prefix}-{n}-".encode() * 80
            result = await producer.send(Message(topic, body))
            sent[parse_offset_msg_id(result.offset_msg_id).offset] = body
    return sent


async def _read(addr: str, topic: str) -> list[bytes]:
    """Every message of every queue of ``topic``, read as a consumer moves on."""
    bodies: list[bytes] = []
    async with PullConsumer("adv-damage-reader", addr) as reader:
        for mq in await reader.fetch_queues(topic):
            offset = 0
            while True:
                got = await reader.pull(mq, offset, 32)
                bodies += [m.body for m in got.messages]
                moved = got.status is PullStatus.OFFSET_ILLEGAL and got.next_begin_offset > offset
                if not (got.messages or moved or got.status is PullStatus.NO_MATCHED_MSG):
                    break
                offset = got.next_begin_offset
    return bodies


def _overwrite(segment: Path, pos: int, data: bytes) -> None:
    with open(segment, "r+b") as f:
        f.seek(pos)
        f.write(data)


def _rocklet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocklet", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("ending", ["stop", "kill9"])
async def test_a_damaged_record_in_the_oldest_segment_costs_only_that_record(
    tmp_path: Path, ending: str
) -> None:
    # Before: a clean start truncated the log at the bad record (every later segment
    # deleted), or, with more segments, the re-dispatch raised and the broker did not
    # start.
    async with running_broker(tmp_path, PROPS) as broker:
        sent = await _send(broker.namesrv_addr, "Damaged", 300, "a")
        assert await broker.stop() == 0
        if ending == "kill9":  # the next start runs crash recovery (the abort marker)
            await broker.restart()  # (a clean stop first: the topic's config is on disk)
            await broker.kill9()
        segments = sorted((broker.store / "commitlog").iterdir())
        assert len(segments) >= 3
        victim = sorted(sent)[3]  # the fourth record of the oldest segment
        _overwrite(segments[0], victim, b"\xff" * 8)  # its size and magic

        await broker.restart()
        assert int((await broker.wait_line(DAMAGE_LINE, 10))[1]) == victim
        bodies = await _read(broker.namesrv_addr, "Damaged")
        assert sorted(bodies) == sorted(b for off, b in sent.items() if off != victim)

        target = ("-n", broker.namesrv_addr, "-b", broker.broker_addr)
        status = json.loads(_rocklet("admin", "brokerStatus", *target, "--json").stdout)
        assert status["storeRecoveryClean"] == ("true" if ending == "stop" else "false")
        assert status["storeRecoveryDamagedRanges"] == "1"
        assert status["storeRecoveryDamage"].startswith(f"{victim}+")
        assert status["storeRecoveryTruncatedBytes"] == "0"

        check = _rocklet("admin", "storeCheck", *target)
        assert check.returncode == 1, check.stdout + check.stderr
        problems = [
            line.split()[:4] for line in check.stdout.splitlines() if line.startswith("problem")
        ]
        assert problems == [["problem", "commitlog", f"commitlog/{segments[0].name}", str(victim)]]

        more = await _send(broker.namesrv_addr, "Damaged", 50, "b")
        assert set(more.values()) <= set(await _read(broker.namesrv_addr, "Damaged"))


async def test_a_missing_segment_stops_the_start_with_one_line(tmp_path: Path) -> None:
    async with running_broker(tmp_path, PROPS) as broker:
        await _send(broker.namesrv_addr, "Gap", 300, "g")
        assert await broker.stop() == 0
        segments = sorted((broker.store / "commitlog").iterdir())
        missing = segments[1]
        missing.unlink()
        with pytest.raises(AssertionError, match=r"no .broker listening"):
            await broker.restart()
        assert broker.proc is not None and broker.proc.returncode == 1
        named = [line for line in broker.lines if str(missing) in line]
        start = int(missing.name)
        assert named == [
            f"rocklet standalone: {missing} is missing (offsets {start} to {start + SEG - 1}, "
            f"before {segments[2].name}): restore it from a backup before starting; offsets "
            "past it would be read from the wrong file\n"
        ]
        assert not any("Traceback" in line for line in broker.lines)


async def test_stray_files_are_ignored_with_a_warning_naming_each(tmp_path: Path) -> None:
    async with running_broker(tmp_path, PROPS) as broker:
        sent = await _send(broker.namesrv_addr, "Stray", 100, "s")
        assert await broker.stop() == 0
        first = sorted((broker.store / "commitlog").iterdir())[0]
        strays = [
            first.with_name(first.name + "~"),
            broker.store / "commitlog" / "segment.tmp",
            broker.store / "consumequeue" / "README",
            broker.store / "consumequeue" / "Stray" / "0" / "old",
        ]
        for path in strays:
            path.write_bytes(b"not a store file")
        (broker.store / "commitlog" / f"{10**15:020d}").mkdir()
        strays.append(broker.store / "commitlog" / f"{10**15:020d}")
        await broker.restart()
        for path in strays:
            line = await broker.wait_line(re.compile(re.escape(f"path={path}")), 10)
            assert "ignoring a file that is not a store file" in line.string
        assert sorted(await _read(broker.namesrv_addr, "Stray")) == sorted(sent.values())


async def test_a_golden_rocketmq_store_with_a_damaged_record_starts(tmp_path: Path) -> None:
    # RocketMQ 4.9.4 wrote it (3 segments); 8 bytes of a record of its oldest are lost.
    golden = copy_golden(GOLDEN_STORE, tmp_path / "store")
    records = check_store(golden, 1048576, 300, 1000, 4000).records
    victim = [
        r.offset
        for r in sorted(records.values(), key=lambda r: r.offset)
        if r.topic == "GoldenTopic"
    ][100]
    _overwrite(golden / "commitlog" / f"{0:020d}", victim, b"\x00\x00\x00\x00\xba\xdb\xad\x00")
    props = {
        "mappedFileSizeCommitLog": "1048576",
        "mappedFileSizeConsumeQueue": "6000",
        "maxHashSlotNum": "1000",
        "maxIndexNum": "4000",
    }
    async with running_broker(tmp_path, props) as broker:
        assert int((await broker.wait_line(DAMAGE_LINE, 10))[1]) == victim
        bodies = await _read(broker.namesrv_addr, "GoldenTopic")
        assert len(bodies) == 2000  # of its 2001 messages
        assert await broker.stop() == 0
