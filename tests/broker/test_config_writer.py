"""Group commit of the config files: durable before the answer, one write per burst."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from rocklet.broker.config_writer import ConfigWriteError, ConfigWriter
from rocklet.broker.json_file import load_json, persist_json


class _Table:
    """A dict written to a real file, recording which thread each write ran in."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, int] = {}
        self.threads: list[int] = []
        #: Set by a write as it starts; while ``gate`` is clear, writes wait for it.
        self.writing = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self.writer: ConfigWriter[dict[str, Any]] = ConfigWriter(
            path.name, lambda: dict(self.data), self._write
        )

    def _write(self, snapshot: dict[str, Any]) -> None:
        self.threads.append(threading.get_ident())
        self.writing.set()
        assert self.gate.wait(10)
        persist_json(self.path, snapshot)

    def set(self, key: str, value: int, *, urgent: bool = True) -> int:
        self.data[key] = value
        return self.writer.changed(urgent=urgent)


async def test_a_burst_of_changes_costs_one_write_off_the_loop(tmp_path: Path) -> None:
    table = _Table(tmp_path / "t.json")

    async def change(n: int) -> None:
        await table.writer.durable(table.set(f"k{n}", n))

    await asyncio.gather(*(change(n) for n in range(1000)))
    # Every change is on disk once its waiter returns, and they shared one write.
    assert load_json(table.path) == {f"k{n}": n for n in range(1000)}
    assert table.writer.writes == 1
    assert table.threads and threading.get_ident() not in table.threads
    # Nothing new: waiting again writes nothing.
    await table.writer.durable()
    assert table.writer.writes == 1


async def test_changes_during_a_write_share_the_next_one(tmp_path: Path) -> None:
    table = _Table(tmp_path / "t.json")
    table.gate.clear()
    waiting = asyncio.ensure_future(table.writer.durable(table.set("a", 1)))
    assert await asyncio.to_thread(table.writing.wait, 10)  # "a" is being written
    later = [table.set(f"b{n}", n) for n in range(50)]
    table.gate.set()
    await asyncio.gather(waiting, *(table.writer.durable(g) for g in later))
    assert table.writer.writes == 2
    assert table.writer.saved == table.writer.generation == 51
    assert json.loads(table.path.read_text())["b49"] == 49


async def test_lazy_changes_wait_for_a_waiter_or_a_flush(tmp_path: Path) -> None:
    table = _Table(tmp_path / "t.json")
    for n in range(100):
        table.set(f"k{n}", n, urgent=False)
    # An urgent change would have started a write by now; a lazy one starts none.
    assert not await asyncio.to_thread(table.writing.wait, 0.5)
    assert table.writer.writes == 0 and not table.path.exists()
    await table.writer.flush()
    assert table.writer.writes == 1 and load_json(table.path) == table.data


async def test_a_failed_write_fails_its_waiters_and_the_next_one_retries(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    table = _Table(path)
    await table.writer.durable(table.set("before", 1))
    # A directory where the temp file goes: a real write error (EISDIR), as a
    # broken disk would give.
    blocker = path.with_name("topics.json.tmp")
    blocker.mkdir()
    with pytest.raises(ConfigWriteError, match=r"topics\.json could not be saved"):
        await table.writer.durable(table.set("lost", 2))
    assert load_json(path) == {"before": 1}  # the previous version is intact
    assert table.writer.saved < table.writer.generation
    blocker.rmdir()
    await table.writer.flush()
    assert load_json(path) == {"before": 1, "lost": 2}


async def test_a_cancelled_waiter_does_not_stop_the_write(tmp_path: Path) -> None:
    table = _Table(tmp_path / "t.json")
    table.gate.clear()
    waiter = asyncio.ensure_future(table.writer.durable(table.set("a", 1)))
    assert await asyncio.to_thread(table.writing.wait, 10)
    waiter.cancel()  # e.g. its connection closed
    table.gate.set()
    await table.writer.durable(table.set("b", 2))
    assert load_json(table.path) == {"a": 1, "b": 2}


def test_persist_json_keeps_the_previous_version_as_bak(tmp_path: Path) -> None:
    path = tmp_path / "config" / "x.json"
    persist_json(path, {"v": 1})
    persist_json(path, {"v": 2})
    assert load_json(path) == {"v": 2}
    assert json.loads(path.with_name("x.json.bak").read_text()) == {"v": 1}
    # A crash between the two renames leaves only the .bak: it is read instead.
    path.unlink()
    assert load_json(path) == {"v": 1}
    assert not path.with_name("x.json.tmp").exists()


def test_managers_without_a_loop_still_record_changes(tmp_path: Path) -> None:
    # Managers are usable outside a loop (tools, tests); the change waits for a flush.
    table = _Table(tmp_path / "t.json")
    table.set("a", 1)
    assert table.writer.generation == 1 and table.writer.saved == 0
    asyncio.run(table.writer.flush())
    assert load_json(table.path) == {"a": 1}
