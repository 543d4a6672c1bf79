"""The name server's KV table on disk (``kvConfigPath``): what was answered survives kill -9.

Each test runs ``rocklet namesrv`` as a process on loopback with its own file, changes the
table over the wire, kills the process with SIGKILL and reads the table back from a new
one started on the same file. The file is RocketMQ's ``kvConfig.json``, both ways.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from rocklet.broker.config import NamesrvConfig
from rocklet.broker.namesrv import NamesrvServer
from rocklet.protocol import RemotingCommand, RequestCode, ResponseCode
from rocklet.transport.connection import Connection
from rocklet.transport.dial import open_connection
from tests.test_cli import LISTENING, TIMEOUT, run_to_end, spawn, wait_for_line
from tests.tmpfs import fill, mounted_tmpfs

ORDER = "ORDER_TOPIC_CONFIG"


@asynccontextmanager
async def namesrv(kv_file: Path) -> AsyncIterator[Connection]:
    """``rocklet namesrv`` on ``kv_file``, killed with SIGKILL at the end (no clean stop)."""
    proc = await spawn("namesrv", "--port", "0", "--host", "127.0.0.1", "--kv-config", str(kv_file))
    try:
        match = await wait_for_line(proc, LISTENING)
        async with await open_connection("127.0.0.1", int(match.group(2))) as conn:
            yield conn
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


def kv(code: int, namespace: str, key: str, value: str | None = None) -> RemotingCommand:
    fields = {"namespace": namespace, "key": key}
    if value is not None:
        fields["value"] = value
    return RemotingCommand(code=code, ext_fields=fields)


async def get(conn: Connection, namespace: str, key: str) -> str | None:
    answer = await conn.request(kv(RequestCode.GET_KV_CONFIG, namespace, key), TIMEOUT)
    if answer.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return answer.ext_fields["value"]


async def put_answer(conn: Connection, namespace: str, key: str, value: str) -> RemotingCommand:
    return await conn.request(kv(RequestCode.PUT_KV_CONFIG, namespace, key, value), TIMEOUT)


async def put(conn: Connection, namespace: str, key: str, value: str) -> None:
    answer = await put_answer(conn, namespace, key, value)
    assert answer.code == ResponseCode.SUCCESS, answer.remark


async def test_answered_puts_and_deletes_survive_kill_9(tmp_path: Path) -> None:
    kv_file = tmp_path / "namesrv" / "kvConfig.json"
    async with namesrv(kv_file) as conn:
        await put(conn, ORDER, "Ordered", "broker-a:4;broker-b:4")
        await put(conn, "NS", "gone", "soon")
        await put(conn, "NS", "kept", "v1")
        await put(conn, "NS", "kept", "v2")
    # RocketMQ's KVConfigSerializeWrapper, readable by a RocketMQ name server.
    assert json.loads(kv_file.read_text()) == {
        "configTable": {
            ORDER: {"Ordered": "broker-a:4;broker-b:4"},
            "NS": {"gone": "soon", "kept": "v2"},
        }
    }
    async with namesrv(kv_file) as conn:
        assert await get(conn, ORDER, "Ordered") == "broker-a:4;broker-b:4"
        assert await get(conn, "NS", "kept") == "v2"
        deleted = await conn.request(kv(RequestCode.DELETE_KV_CONFIG, "NS", "gone"), TIMEOUT)
        assert deleted.code == ResponseCode.SUCCESS
        deleted = await conn.request(kv(RequestCode.DELETE_KV_CONFIG, "NS", "kept"), TIMEOUT)
        assert deleted.code == ResponseCode.SUCCESS
    async with namesrv(kv_file) as conn:
        assert await get(conn, "NS", "gone") is None
        assert await get(conn, "NS", "kept") is None
        listed = await conn.request(
            RemotingCommand(
                code=RequestCode.GET_KVLIST_BY_NAMESPACE, ext_fields={"namespace": "NS"}
            ),
            TIMEOUT,
        )
        assert listed.code == ResponseCode.QUERY_NOT_FOUND  # the emptied namespace is gone
        assert await get(conn, ORDER, "Ordered") == "broker-a:4;broker-b:4"


async def test_a_rocketmq_file_is_read_and_a_damaged_one_falls_back_to_its_backup(
    tmp_path: Path,
) -> None:
    kv_file = tmp_path / "kvConfig.json"
    # As RocketMQ 4.9.4's name server leaves it (MixAll.string2File keeps the .bak).
    kv_file.write_text('{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"broker-a:8"}}}')
    async with namesrv(kv_file) as conn:
        assert await get(conn, ORDER, "T") == "broker-a:8"
        await put(conn, ORDER, "U", "broker-a:2")
    # The previous version is the .bak; the new file torn in half (a damaged disk).
    text = kv_file.read_text()
    kv_file.write_text(text[: len(text) // 2])
    async with namesrv(kv_file) as conn:
        assert await get(conn, ORDER, "T") == "broker-a:8"
        assert await get(conn, ORDER, "U") is None  # only the .bak was readable


async def test_a_damaged_file_without_a_good_backup_stops_the_start(tmp_path: Path) -> None:
    kv_file = tmp_path / "kvConfig.json"
    for content in ("{not json", '{"configTable": {"NS": {"k": 1}}}'):
        kv_file.write_text(content)
        code, out = await run_to_end(
            "namesrv", "--port", "0", "--host", "127.0.0.1", "--kv-config", str(kv_file)
        )
        assert code != 0, out
        assert f"the KV config file {kv_file} is damaged" in out, out
        assert "namesrv listening" not in out
        assert kv_file.read_text() == content  # never overwritten


async def test_a_full_disk_refuses_the_change_and_the_next_one_saves_both(
    tmp_path: Path,
) -> None:
    with mounted_tmpfs(tmp_path / "fs", 64 * 1024) as disk:
        kv_file = disk / "namesrv" / "kvConfig.json"
        server = await NamesrvServer.start(
            "127.0.0.1", 0, config=NamesrvConfig(kv_config_path=kv_file)
        )
        try:
            async with await open_connection("127.0.0.1", server.port) as conn:
                await put(conn, "NS", "before", "1")
                fill(disk / "ballast")
                answer = await put_answer(conn, "NS", "k", "v" * 8192)
                assert answer.code == ResponseCode.SYSTEM_ERROR
                assert answer.remark is not None
                assert "kvConfig.json could not be saved" in answer.remark, answer.remark
                assert "kept in memory" in answer.remark
                assert await get(conn, "NS", "k") == "v" * 8192  # as the remark says
                # The file on disk is the last good one, whole.
                assert json.loads(kv_file.read_text()) == {"configTable": {"NS": {"before": "1"}}}
                (disk / "ballast").unlink()
                await put(conn, "NS", "after", "2")
        finally:
            await server.stop()
        saved = json.loads(kv_file.read_text())
    assert saved == {"configTable": {"NS": {"before": "1", "k": "v" * 8192, "after": "2"}}}


async def test_standalone_keeps_the_table_beside_its_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rocklet", "standalone", "--data-dir", str(data),
        "--namesrv-port", "0", "--listen-port", "0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        match = await wait_for_line(proc, LISTENING)
        async with await open_connection("127.0.0.1", int(match.group(2))) as conn:
            await put(conn, "NS", "k", "v")
    finally:
        proc.kill()
        await proc.wait()
    saved = json.loads((data / "namesrv" / "kvConfig.json").read_text())
    assert saved == {"configTable": {"NS": {"k": "v"}}}
