"""A full disk is an answer, not a crash: a real broker on a small tmpfs.

The store lives on an 8 MiB tmpfs with 1 MiB commitlog segments. Sends go until the
broker refuses one; then every acknowledged message must be readable (pulls go on while
the disk is full), the broker must restart on the full disk (cleanly and after kill -9,
also with the disk filled to the last byte), and sends must resume without a restart
once there is room again: the operator deletes a ballast file placed beforehand, or
retention deletes the oldest segments (cleanFileForciblyEnable).

``ROCKLET_ADVERSITY=long`` restarts more times while the disk is full. The figures of
docs/reliability.md ("A full disk") are printed by the tests (``pytest -s``).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

import pytest

from rocklet.protocol.bodies.cluster import KVTable
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.message import iter_messages
from rocklet.protocol.properties import encode_properties
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.adversity.conftest import rounds
from tests.adversity.procs import BrokerProcess, running_broker
from tests.tmpfs import fill, mounted_tmpfs

MIB: Final = 1024 * 1024
FS_SIZE: Final = 8 * MIB
TOPIC: Final = "FullDisk"
BODY: Final = 1000
TIMEOUT_S: Final = 10.0
#: Sends in flight at once (SYNC_FLUSH answers after a group commit).
WINDOW: Final = 16
#: Far more sends than fit: the fill loop must end with a refusal, not this.
MAX_SENDS: Final = 20_000
PROPERTIES: Final = {
    "flushDiskType": "SYNC_FLUSH",
    "mappedFileSizeCommitLog": str(MIB),
    "mappedFileSizeConsumeQueue": str(1000 * 20),
    "maxHashSlotNum": "1000",
    "maxIndexNum": "4000",
    # topics.json is saved this often: the topic must be on disk before the disk fills
    # (a topic first saved on a full disk is lost at restart: docs/reliability.md).
    "flushConsumerOffsetInterval": "200",
}
_FULL_LINE: Final = re.compile(r"diskSpaceWarningLevelRatio: the disk is full|no room for a new")
_RESUMED_LINE: Final = re.compile(r"disk space available again: sends are accepted")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs holding the broker's configuration and store."""
    with mounted_tmpfs(tmp_path / "fs", FS_SIZE) as mount:
        yield mount


def _body(n: int) -> bytes:
    return f"{n:08d}-".encode().ljust(BODY, b"x")


def _send(n: int) -> RemotingCommand:
    props = {"TAGS": "T", "KEYS": f"k{n}"}
    ext = {
        "producerGroup": "PG",
        "topic": TOPIC,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": str(int(time.time() * 1000)),
        "flag": "0",
        "properties": encode_properties(props).decode(),
    }
    return RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields=ext, body=_body(n))


def _pull(offset: int) -> RemotingCommand:
    ext = {
        "consumerGroup": "CG",
        "topic": TOPIC,
        "queueId": "0",
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": "4",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
    }
    return RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=ext)


class Sender:
    """Sends numbered messages to queue 0 and keeps what the broker acknowledged."""

    def __init__(self) -> None:
        self.acked: dict[int, bytes] = {}  # queue offset -> body
        self.next = 0
        self.refusal: RemotingCommand | None = None

    async def until_refused(self, conn: Connection) -> int:
        """Send until an answer is not SUCCESS; return how many were acknowledged."""
        before = len(self.acked)
        self.refusal = None

        async def one() -> None:
            while self.refusal is None and self.next < MAX_SENDS:
                n, self.next = self.next, self.next + 1
                answer = await conn.request(_send(n), TIMEOUT_S)
                if answer.code != ResponseCode.SUCCESS:
                    self.refusal = answer
                    return
                self.acked[int(answer.ext_fields["queueOffset"])] = _body(n)

        await asyncio.gather(*(one() for _ in range(WINDOW)))
        assert self.refusal is not None, "the disk never filled"
        return len(self.acked) - before

    async def one(self, conn: Connection) -> RemotingCommand:
        """Send one message; record it if acknowledged."""
        n, self.next = self.next, self.next + 1
        answer = await conn.request(_send(n), TIMEOUT_S)
        if answer.code == ResponseCode.SUCCESS:
            self.acked[int(answer.ext_fields["queueOffset"])] = _body(n)
        return answer


async def _read_all(conn: Connection, start: int = 0) -> dict[int, bytes]:
    """Every message of queue 0 from ``start``, by queue offset."""
    out: dict[int, bytes] = {}
    offset = start
    while True:
        answer = await conn.request(_pull(offset), TIMEOUT_S)
        moved_to = int(answer.ext_fields.get("nextBeginOffset", offset))
        if answer.code == ResponseCode.PULL_OFFSET_MOVED and moved_to > offset:
            offset = moved_to  # retention deleted the start of the queue
            continue
        if answer.code != ResponseCode.SUCCESS:
            assert answer.code == ResponseCode.PULL_NOT_FOUND, answer.remark
            return out
        for msg in iter_messages(answer.body):
            out[msg.queue_offset] = msg.body
        offset = int(answer.ext_fields["nextBeginOffset"])


async def _runtime_info(conn: Connection) -> Mapping[str, str]:
    answer = await conn.request(RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO), TIMEOUT_S)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return KVTable.from_json(answer.body).table


def _assert_refused_for_disk(answer: RemotingCommand | None, broker: BrokerProcess) -> None:
    assert answer is not None
    assert answer.code == ResponseCode.SERVICE_NOT_AVAILABLE, (answer.code, answer.remark)
    remark = answer.remark or ""
    assert remark.startswith("service not available now: the broker's disk is full [CL: "), remark
    assert str(broker.store) in remark  # the path, and the usage
    assert re.search(r"\d+% used|no room for .* \(\d+ bytes\)", remark), remark


async def _topic_saved(broker: BrokerProcess, conn: Connection, sender: Sender) -> None:
    """Create the topic with a first send and wait until topics.json holds it."""
    assert (await sender.one(conn)).code == ResponseCode.SUCCESS
    topics = broker.store / "config" / "topics.json"
    deadline = time.monotonic() + TIMEOUT_S
    while not (topics.exists() and TOPIC in topics.read_text()):
        assert time.monotonic() < deadline, "topics.json was never saved"
        await asyncio.sleep(0.05)  # the persist tick: a file, no event to wait on


def _assert_no_crash(broker: BrokerProcess) -> None:
    assert broker.proc is not None and broker.proc.returncode is None, "the broker died"
    log = "".join(broker.lines)
    assert "Traceback" not in log and "SIGBUS" not in log, log[-4000:]


async def _restart_while_full(broker: BrokerProcess, sender: Sender, kill: bool) -> None:
    if kill:
        await broker.kill9()
    else:
        assert await broker.stop() == 0
        assert not (broker.store / "abort").exists()  # closed cleanly on a full disk
    await broker.restart()
    await broker.wait_line(_FULL_LINE, TIMEOUT_S)  # full from the first measurement
    async with await open_connection("127.0.0.1", broker.broker_port) as conn:
        assert await _read_all(conn) == sender.acked
        _assert_refused_for_disk(await sender.one(conn), broker)
    _assert_no_crash(broker)


async def test_full_disk_refuses_sends_keeps_everything_and_resumes(small_fs: Path) -> None:
    """Refused with the path and usage; 0 crashes, 0 acked lost; restarts; resumes."""
    ballast = small_fs / "ballast"
    fill(ballast, leave=FS_SIZE - MIB)  # 1 MiB the operator can delete later
    props = {**PROPERTIES, "cleanFileForciblyEnable": "false"}  # nothing acked is deleted
    sender = Sender()
    async with running_broker(small_fs, props) as broker:
        async with await open_connection("127.0.0.1", broker.broker_port) as conn:
            await _topic_saved(broker, conn, sender)
            first_fill = 1 + await sender.until_refused(conn)
            _assert_refused_for_disk(sender.refusal, broker)
            await broker.wait_line(_FULL_LINE, TIMEOUT_S)
            _assert_no_crash(broker)
            # Reads go on while full; every acknowledged message is there, once.
            assert await _read_all(conn) == sender.acked
            info = await _runtime_info(conn)
            assert info["diskFull"] == "true", info
            assert str(broker.store) in info["diskFullReason"]
            assert float(info["commitLogDiskRatio"]) > 0.90
            assert "diskSpaceWarningLevelRatio (90%)" in info["diskFullReason"]
            _assert_refused_for_disk(await sender.one(conn), broker)
        # The last bytes too: a restart must cope with a disk that is 100 % full.
        fill(small_fs / "filler")
        restarts = rounds(2, 10)
        for n in range(restarts):
            await _restart_while_full(broker, sender, kill=n % 2 == 1)
        # The operator frees room: sends resume without a restart.
        freed_at = time.monotonic()
        (small_fs / "filler").unlink()
        ballast.unlink()
        await broker.wait_line(_RESUMED_LINE, TIMEOUT_S)
        async with await open_connection("127.0.0.1", broker.broker_port) as conn:
            answer = await sender.one(conn)
            resumed_s = time.monotonic() - freed_at
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            second_fill = await sender.until_refused(conn)
            _assert_refused_for_disk(sender.refusal, broker)
            assert await _read_all(conn) == sender.acked
        _assert_no_crash(broker)
        await broker.kill9()
        await broker.restart()
        async with await open_connection("127.0.0.1", broker.broker_port) as conn:
            assert await _read_all(conn) == sender.acked
            assert sorted(sender.acked) == list(range(len(sender.acked)))  # no gaps
    print(
        f"\nfull disk: {FS_SIZE // MIB} MiB tmpfs, 1 MiB segments, {BODY}-byte bodies: "
        f"{first_fill} acks before the refusal (1 MiB ballast), {restarts} restarts while "
        f"full, sends resumed {resumed_s:.2f} s after the ballast was deleted, "
        f"{second_fill} more acks, {len(sender.acked)} acked = {len(sender.acked)} read"
    )


async def test_retention_frees_a_full_disk_and_sends_resume(small_fs: Path) -> None:
    """With cleanFileForciblyEnable (the default) retention makes room by itself."""
    props = {**PROPERTIES, "cleanResourceInterval": "500"}
    sender = Sender()
    async with running_broker(small_fs, props) as broker:
        async with await open_connection("127.0.0.1", broker.broker_port) as conn:
            await _topic_saved(broker, conn, sender)
            # Retention may already delete old segments (above 85 %) while this fills.
            await sender.until_refused(conn)
            _assert_refused_for_disk(sender.refusal, broker)
            refused_at = time.monotonic()
            # Retention may have freed the disk (and it filled again) while this filled,
            # so the log holds earlier "available again" lines: ask the broker instead.
            while (await _runtime_info(conn))["diskFull"] == "true":
                assert time.monotonic() - refused_at < TIMEOUT_S, "retention made no room"
                await asyncio.sleep(0.1)  # each round trip measures the disk again
            answer = await sender.one(conn)
            resumed_s = time.monotonic() - refused_at
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            kept = await _read_all(conn, 0)  # from the queue's new min offset
            low = min(kept)
            assert low > 0  # the oldest messages were deleted: RocketMQ's trade-off
            assert kept == {q: b for q, b in sender.acked.items() if q >= low}
        _assert_no_crash(broker)
    print(f"\nretention made room {resumed_s:.2f} s after the refusal; min offset now {low}")


async def test_no_room_for_a_segment_below_the_warning_level(small_fs: Path) -> None:
    """2 MiB segments, 2 MiB ballast, 8 MiB: the third segment finds no room at ~80 %."""
    ballast = small_fs / "ballast"
    fill(ballast, leave=FS_SIZE - 2 * MIB)
    props = {**PROPERTIES, "mappedFileSizeCommitLog": str(2 * MIB)}
    sender = Sender()
    async with running_broker(small_fs, props) as broker:
        async with await open_connection("127.0.0.1", broker.broker_port) as conn:
            await _topic_saved(broker, conn, sender)
            await sender.until_refused(conn)
            _assert_refused_for_disk(sender.refusal, broker)
            remark = sender.refusal.remark if sender.refusal else ""
            assert f"no room for {broker.store / 'commitlog'}" in (remark or "")
            assert float((await _runtime_info(conn))["commitLogDiskRatio"]) < 0.90
            assert not list(broker.store.rglob("*.allocating"))  # no half-made segment
            assert await _read_all(conn) == sender.acked
            refused_at_end = len(sender.acked)
            freed_at = time.monotonic()
            ballast.unlink()
            await broker.wait_line(_RESUMED_LINE, TIMEOUT_S)
            answer = await sender.one(conn)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            assert int(answer.ext_fields["queueOffset"]) == refused_at_end
            resumed_s = time.monotonic() - freed_at
        _assert_no_crash(broker)
    print(f"\nENOSPC at a roll: {refused_at_end} acks, resumed {resumed_s:.2f} s after freeing")
