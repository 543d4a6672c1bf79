"""The first hour, as real ``rocklet`` processes: what stops a broker at start, and why.

A second process on a live store directory, a store or config directory that cannot be
written, and a ``broker.conf`` with typos or keys Rocklet does not implement: each is
reported at start with a line a person can act on.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from rocklet.port_holders import explain_bind_error, port_holders
from rocklet.protocol import ResponseCode
from rocklet.transport.dial import open_connection
from tests.readonly import read_only_directory
from tests.test_cli import (
    BROKER_LISTENING,
    TIMEOUT,
    run_to_end,
    send_request,
    spawn,
    wait_for_line,
)
from tests.test_cli_messages import running_standalone


def standalone_args(data: Path) -> tuple[str, ...]:
    return ("standalone", "--data-dir", str(data), "--namesrv-port", "0", "--listen-port", "0")


async def stop(proc: asyncio.subprocess.Process) -> int:
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout is not None
    await asyncio.wait_for(proc.stdout.read(), TIMEOUT)  # drain until it exits
    return await asyncio.wait_for(proc.wait(), TIMEOUT)


async def test_a_second_process_on_a_live_store_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = await spawn(*standalone_args(data))
    try:
        port = int((await wait_for_line(first, BROKER_LISTENING)).group(1))
        abort = data / "abort"
        marker = abort.stat().st_mtime_ns

        code, out = await run_to_end(*standalone_args(data))

        assert code == 1, out
        assert (
            f"the store {data} is in use by pid {first.pid} (rocklet standalone started " in out
        ), out
        assert "stop it or choose another data directory (--data-dir" in out
        # It touched nothing: no recovery, no name server, no listener.
        assert "store recovered" not in out and "listening" not in out
        assert abort.exists() and abort.stat().st_mtime_ns == marker
        async with await open_connection("127.0.0.1", port) as conn:
            answer = await conn.request(send_request("StillServing", b"hi"), TIMEOUT)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert await stop(first) == 0
        assert not abort.exists()  # the first one's clean stop
    finally:
        if first.returncode is None:
            first.kill()
            await first.wait()


async def test_a_second_broker_on_the_same_commitlog_is_refused(tmp_path: Path) -> None:
    """storePathCommitLog outside the root: another root must not append to it too."""
    commitlog = tmp_path / "fast" / "commitlog"
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={tmp_path / 'root'}\nstorePathCommitLog={commitlog}\n")
    first = await spawn("standalone", "-c", str(conf), "--namesrv-port", "0", "--listen-port", "0")
    try:
        await wait_for_line(first, BROKER_LISTENING)
        other = tmp_path / "other"
        code, out = await run_to_end("standalone", "-c", str(conf), *standalone_args(other)[1:])

        assert code == 1, out
        assert f"the commitlog directory {commitlog} is in use by pid {first.pid} (" in out, out
        assert "stop it or choose another one (storePathCommitLog)" in out
        assert "store recovered" not in out and "listening" not in out
        assert not (other / "abort").exists()
        assert await stop(first) == 0
        # Stopped, it lets go: the same command now starts.
        second = await spawn("standalone", "-c", str(conf), *standalone_args(other)[1:])
        try:
            await wait_for_line(second, BROKER_LISTENING)
        finally:
            assert await stop(second) == 0
    finally:
        if first.returncode is None:
            first.kill()
            await first.wait()


async def test_a_topic_table_of_the_wrong_shape_is_read_from_its_backup_or_refused(
    tmp_path: Path,
) -> None:
    # Valid JSON, but not a table: loading it as empty would forget every topic and
    # overwrite the intact backup at the next change.
    config = tmp_path / "data" / "config"
    config.mkdir(parents=True)
    (config / "topics.json").write_text("[]")
    kept = {"topicName": "Kept", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
    (config / "topics.json.bak").write_text(json.dumps({"topicConfigTable": {"Kept": kept}}))
    async with running_standalone(tmp_path) as standalone:
        code, out = await run_to_end("admin", "topicRoute", "-n", standalone.namesrv, "-t", "Kept")
        assert code == 0 and "broker-a      2             2              RW" in out, out

    (config / "topics.json").write_text('{"topicConfigTable": {"Kept": {"readQueueNums": 1}}}')
    (config / "topics.json.bak").unlink()
    code, out = await run_to_end(*standalone_args(tmp_path / "data"))
    assert code == 1, out
    assert f"{config / 'topics.json'} cannot be read (topics.json: entry 'Kept': " in out
    assert "repair it or restore it from a backup" in out
    assert "broker listening" not in out and "Traceback" not in out
    assert not (tmp_path / "data" / "abort").exists()  # the store it opened was closed
    assert "readQueueNums" in (config / "topics.json").read_text()  # left as it was


@pytest.mark.parametrize("where", ["store", "config"])
async def test_an_unwritable_directory_stops_the_start(tmp_path: Path, where: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    target = data if where == "store" else data / "config"
    with read_only_directory(target):
        code, out = await run_to_end(*standalone_args(data))
    assert code == 1, out
    assert f"cannot write to {target} (" in out, out
    assert "make it writable for the user running rocklet" in out
    assert "broker listening" not in out
    if where == "config":
        # Said before the store was opened: nothing was created that would be lost.
        assert "store recovered" not in out
        assert not (data / "commitlog").exists()


async def test_config_typos_and_unimplemented_keys_are_warned_about(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerClusterName=FirstHour\n"
        "mapedFileSizeCommitLog=1048576\n"  # RocketMQ 3.x's spelling: a typo in 4.9.4
        "sendMessageThreadPoolNums=16\n"  # RocketMQ's, not Rocklet's
        "maxHashSlotNum=100\nmaxIndexNum=400\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rocklet",
        "standalone",
        "-c",
        str(conf),
        *standalone_args(tmp_path / "data")[1:],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        before: list[str] = []
        while not any("broker listening" in line for line in before):
            line = await asyncio.wait_for(proc.stderr.readline(), TIMEOUT)
            assert line, f"exited before listening: {''.join(before)}"
            before.append(line.decode())
        text = "".join(before)
        assert "unknown config key ignored; did you mean mappedFileSizeCommitLog?" in text
        assert "key=mapedFileSizeCommitLog" in text
        ignored = [line for line in before if "does not implement" in line]
        assert len(ignored) == 1 and "sendMessageThreadPoolNums" in ignored[0]
        assert "mapedFileSizeCommitLog" not in ignored[0]  # a typo is not "ignored"
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), TIMEOUT)
        assert proc.returncode == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.parametrize("which", ["namesrv", "standalone name server", "standalone broker"])
async def test_a_taken_port_is_reported_with_its_holder(tmp_path: Path, which: str) -> None:
    data = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        args = {
            "namesrv": ("namesrv", "--host", "127.0.0.1", "--port", port),
            "standalone name server": (*standalone_args(data)[:-3], port, "--listen-port", "0"),
            "standalone broker": (*standalone_args(data)[:-1], port),
        }[which]
        code, out = await run_to_end(*args)
    assert code == 1, out
    assert f"127.0.0.1:{port} is already in use by pid {os.getpid()} (" in out, out
    assert "stop it or choose another port: " in out
    assert ("--port" if which == "namesrv" else "--namesrv-port, --listen-port") in out
    assert "Traceback" not in out and "broker listening" not in out
    # Found before the store was opened: no recovery (minutes on a big store) first.
    assert "store recovered" not in out
    if which != "namesrv":  # the store is released: the next start on it serves
        proc = await spawn(*standalone_args(data))
        try:
            await wait_for_line(proc, BROKER_LISTENING)
            assert await stop(proc) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def test_a_taken_ha_listen_port_set_explicitly_is_named(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        conf = tmp_path / "broker.conf"
        conf.write_text(f"haListenPort={port}\n")
        code, out = await run_to_end("standalone", "-c", str(conf), *standalone_args(tmp_path)[1:])
    assert code == 1, out
    assert "a port it needs is already in use" in out, out
    assert "and haListenPort for replication)" in out and "port+1" not in out


def test_a_bind_error_is_explained_only_when_the_port_is_taken(tmp_path: Path) -> None:
    taken = OSError(errno.EADDRINUSE, "error while attempting to bind on address ('::1', 7, 0, 0)")
    # No procfs here: the holder is unknown, the address and the way out are still said.
    assert explain_bind_error(taken, "--port", proc=tmp_path) == (
        "[::1]:7 is already in use; stop it or choose another port: --port"
    )
    assert port_holders(7, proc=tmp_path) == []
    bare = OSError(errno.EADDRINUSE, "Address already in use")
    assert "a port it needs is already in use" in str(explain_bind_error(bare, "--port"))
    denied = OSError(errno.EACCES, "error while attempting to bind on address ('0.0.0.0', 80)")
    assert explain_bind_error(denied, "--port") is None


def test_port_holders_reads_procfs_layout_and_skips_what_it_cannot_parse(tmp_path: Path) -> None:
    net = tmp_path / "net"
    net.mkdir()
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
    (net / "tcp").write_text(
        f"{header}   uid  timeout inode\n"
        "   0: 0100007F:0007 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 123\n"
        "   1: 0100007F:0007 0100007F:9C40 01 00000000:00000000 00:00000000 00000000 0 0 124\n"
        "   2: garbage\n"
        "   3: 0100007F:zz 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 125\n"
    )
    for pid, target in ((42, "socket:[123]"), (43, "socket:[124]")):
        fds = tmp_path / str(pid) / "fd"
        fds.mkdir(parents=True)
        (fds / "3").symlink_to(target)
        (tmp_path / str(pid) / "cmdline").write_bytes(b"rocketmq\0namesrv\0")
    # Only the listening socket's owner; the connected one (state 01) is not a holder.
    assert port_holders(7, proc=tmp_path) == [(42, "rocketmq namesrv")]
    assert port_holders(8, proc=tmp_path) == []
