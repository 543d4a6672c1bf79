"""``rocklet produce`` and ``rocklet consume`` as subprocesses against a real standalone."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocklet.progress_note import ProgressNote
from tests.test_cli import BROKER_LISTENING, LISTENING, TIMEOUT, spawn, wait_for_line

SENT = re.compile(r"^SEND_OK msgId=[0-9A-F]{32} queue=broker-a:(\d+) offset=(\d+)$")


@dataclass
class Standalone:
    namesrv: str
    broker: str


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json_lines(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.out.splitlines()]


@asynccontextmanager
async def running_standalone(tmp_path: Path, conf_text: str = "") -> AsyncIterator[Standalone]:
    """``rocklet standalone`` on free ports, with ``conf_text`` as its broker.conf."""
    conf: list[str] = []
    if conf_text:
        path = tmp_path / "broker.conf"
        path.write_text(conf_text)
        conf = ["-c", str(path)]
    proc = await spawn(
        "standalone",
        *conf,
        "--data-dir",
        str(tmp_path / "data"),
        "--namesrv-port",
        "0",
        "--listen-port",
        "0",
    )
    try:
        ns_port = int((await wait_for_line(proc, LISTENING)).group(2))
        port = int((await wait_for_line(proc, BROKER_LISTENING)).group(1))
        assert proc.stdout is not None
        drain = asyncio.create_task(proc.stdout.read())  # its log must not fill the pipe
        yield Standalone(f"127.0.0.1:{ns_port}", f"127.0.0.1:{port}")
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0
        await drain
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.fixture
async def standalone(tmp_path: Path) -> AsyncIterator[Standalone]:
    async with running_standalone(tmp_path) as running:
        yield running


async def rocklet(*args: str, stdin: bytes | None = None) -> Run:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rocklet",
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"},
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), TIMEOUT)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


async def test_produced_messages_are_printed_by_consume(standalone: Standalone) -> None:
    ns = standalone.namesrv
    run = await rocklet(
        "produce", "-n", ns, "-t", "demo", "--body", "hi", "--count", "3", "--tags", "T",
        "--keys", "k1 k2",
    )  # fmt: skip
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert len(lines) == 3 and all(SENT.match(line) for line in lines), run.out
    assert run.err.startswith("sent 3 message(s) to demo in ")

    run = await rocklet("produce", "-n", ns, "-t", "demo", "--json", stdin=b"a\n\nb\n")
    assert run.code == 0, run.err
    results = run.json_lines()
    assert [r["status"] for r in results] == ["SEND_OK", "SEND_OK"]
    assert "sent 2 message(s)" in run.err and "skipped 1 empty line(s)" in run.err

    run = await rocklet("consume", "-n", ns, "-t", "demo", "--count", "5", "--json")
    assert run.code == 0, run.err
    got = run.json_lines()
    assert sorted(str(m["body"]) for m in got) == ["a", "b", "hi", "hi", "hi"]
    for m in got:
        assert (m["tags"], m["keys"]) == (("T", ["k1", "k2"]) if m["body"] == "hi" else (None, []))
    for r in results:  # the stdin messages are where produce said it stored them
        (m,) = [m for m in got if m["msgId"] == r["msgId"]]
        assert (m["queueId"], m["queueOffset"]) == (r["queueId"], r["queueOffset"])
    assert "reading demo (4 queue(s) on broker-a) from first as group TOOLS_CONSUMER" in run.err
    assert run.err.splitlines()[-1] == "received 5 message(s) from demo"

    # Text lines; the timeout ends a run without --count normally.
    run = await rocklet("consume", "-n", ns, "-t", "demo", "--tags", "T", "--timeout", "0.5")
    assert run.code == 0, run.err
    assert run.out.splitlines()[0].startswith("queue=broker-a:")
    assert all(ln.endswith(" tags=T keys=k1,k2 body=hi") for ln in run.out.splitlines())
    assert len(run.out.splitlines()) == 3
    assert "received 3 message(s) from demo; none arrived for 0.5 s" in run.err


async def test_consume_with_a_group_resumes_after_what_it_printed(
    standalone: Standalone,
) -> None:
    ns = standalone.namesrv
    bodies = "".join(f"m{i}\n" for i in range(6)).encode()
    assert (await rocklet("produce", "-n", ns, "-t", "jobs", stdin=bodies)).code == 0
    first = await rocklet("consume", "-n", ns, "-t", "jobs", "-g", "workers", "--count", "2")
    assert first.code == 0, first.err
    rest = await rocklet("consume", "-n", ns, "-t", "jobs", "-g", "workers", "--timeout", "1")
    assert rest.code == 0, rest.err
    seen = [ln.rsplit("body=", 1)[1] for ln in (first.out + rest.out).splitlines()]
    assert sorted(seen) == [f"m{i}" for i in range(6)]  # nothing twice, nothing lost
    again = await rocklet("consume", "-n", ns, "-t", "jobs", "-g", "workers", "--timeout", "0.5")
    assert (again.code, again.out) == (0, "")
    # --from last: only what arrives later, so nothing here.
    last = await rocklet("consume", "-n", ns, "-t", "jobs", "--from", "last", "--timeout", "0.5")
    assert (last.code, last.out) == (0, "")


async def test_consume_fails_short_of_count_and_stops_cleanly_on_sigint(
    standalone: Standalone,
) -> None:
    ns = standalone.namesrv
    assert (await rocklet("produce", "-n", ns, "-t", "few", "--body", "x")).code == 0
    run = await rocklet("consume", "-n", ns, "-t", "few", "--count", "3", "--timeout", "0.5")
    assert run.code == 1 and len(run.out.splitlines()) == 1
    assert "received 1 message(s) from few; none arrived for 0.5 s, fewer than --count 3" in run.err

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rocklet", "consume", "-n", ns, "-t", "few", "--timeout", "0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stderr is not None and proc.stdout is not None
        started = await asyncio.wait_for(proc.stderr.readline(), TIMEOUT)
        assert b"stopping on Ctrl-C" in started
        assert (await asyncio.wait_for(proc.stdout.readline(), TIMEOUT)).endswith(b"body=x\n")
        proc.send_signal(signal.SIGINT)
        rest = await asyncio.wait_for(proc.stderr.read(), TIMEOUT)
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0
        assert rest == b"received 1 message(s) from few\n"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_failures_and_bad_arguments_say_what_to_do(standalone: Standalone) -> None:
    ns = standalone.namesrv
    run = await rocklet("consume", "-n", ns, "-t", "nope", "--timeout", "1")
    assert (run.code, run.out) == (1, "")
    assert f"topic 'nope' does not exist on name server {ns}" in run.err
    assert f"rocklet admin updateTopic -n {ns} -c DefaultCluster -t nope" in run.err

    run = await rocklet("produce", "-n", "127.0.0.1:1", "-t", "t", "--body", "x")
    assert run.code == 1 and "cannot reach the name server at 127.0.0.1:1" in run.err

    run = await rocklet("produce", "-n", ns, "-t", "t", stdin=b"\n\n")
    assert run.code == 1
    assert "standard input had no line to send; skipped 2 empty line(s)" in run.err
    run = await rocklet("produce", "-n", ns, "-t", "t", "--count", "3", stdin=b"\n")
    assert run.code == 1 and "skipped 1 empty line(s)" in run.err
    run = await rocklet("produce", "-n", ns, "-t", "t")  # standard input: /dev/null
    assert run.code == 1 and "standard input had no line to send" in run.err

    for argv, message in [
        (["produce", "-t", "a b"], "contains illegal characters"),
        (["produce", "-t", "t", "--count", "0"], "must be at least 1"),
        (["consume", "-t", "t", "--timeout", "soon"], "expected seconds"),
        (["consume", "-t", "t", "--from", "middle"], "invalid choice"),
        (["consume", "-t", "t", "-g", "a/b"], "contains illegal characters"),
        (["produce", "-n", ns, "-t", "t", "--body", ""], "--body is empty"),
    ]:
        run = await rocklet(*argv)
        assert run.code == 2 and message in run.err, (argv, run.err)


async def test_a_read_only_topic_is_not_called_missing(standalone: Standalone) -> None:
    ns = standalone.namesrv
    made = await rocklet(
        "admin", "updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "frozen", "-p", "4"
    )
    assert made.code == 0, made.err
    run = await rocklet("produce", "-n", ns, "-t", "frozen", "--body", "x")
    assert run.code == 1
    assert "topic 'frozen' exists but no broker takes writes to it" in run.err
    assert "does not exist" not in run.err
    fix = re.search(r"rocklet admin updateTopicPerm [^\n]*-p 6", run.err)
    assert fix is not None
    assert (await rocklet(*fix.group(0).split()[1:])).code == 0
    assert (await rocklet("produce", "-n", ns, "-t", "frozen", "--body", "x")).code == 0


async def test_a_strict_broker_gets_the_commands_that_create_topic_and_group(
    tmp_path: Path,
) -> None:
    strict = "autoCreateTopicEnable=false\nautoCreateSubscriptionGroup=false\n"
    async with running_standalone(tmp_path, strict) as standalone:
        await strict_broker_commands(standalone)


async def strict_broker_commands(standalone: Standalone) -> None:
    ns = standalone.namesrv
    run = await rocklet("produce", "-n", ns, "-t", "orders", "--body", "x")
    assert run.code == 1 and "autoCreateTopicEnable=false" in run.err
    create = re.search(r"rocklet admin updateTopic [^\n]*", run.err)
    assert create is not None
    assert (await rocklet(*create.group(0).split()[1:])).code == 0
    assert (await rocklet("produce", "-n", ns, "-t", "orders", "--body", "x")).code == 0

    run = await rocklet("consume", "-n", ns, "-t", "orders", "-g", "billing", "--timeout", "1")
    assert run.code == 1, run.err
    expected = f"rocklet admin updateSubGroup -n {ns} -b {standalone.broker} -g billing"
    assert f"consumer group 'billing' does not exist on broker {standalone.broker}" in run.err
    assert expected in run.err
    assert (await rocklet(*expected.split()[1:])).code == 0
    run = await rocklet("consume", "-n", ns, "-t", "orders", "-g", "billing", "--count", "1")
    assert run.code == 0 and run.out.endswith("body=x\n"), run.err
    # Without -g the built-in TOOLS_CONSUMER group reads on any broker.
    run = await rocklet("consume", "-n", ns, "-t", "orders", "--count", "1")
    assert run.code == 0, run.err


async def test_on_a_terminal_produce_generates_bodies_or_prompts(standalone: Standalone) -> None:
    ns = standalone.namesrv
    controller, terminal = os.openpty()
    try:

        async def produce(*extra: str) -> asyncio.subprocess.Process:
            return await asyncio.create_subprocess_exec(
                sys.executable, "-m", "rocklet", "produce", "-n", ns, "-t", "tty", *extra,
                stdin=terminal, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip

        proc = await produce("--count", "2")
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
        assert proc.returncode == 0, err
        assert len(out.splitlines()) == 2

        proc = await produce()
        assert proc.stderr is not None
        prompt = await asyncio.wait_for(proc.stderr.readline(), TIMEOUT)
        assert prompt == b"type one message per line; Ctrl-D ends\n"
        os.write(controller, b"typed\n\x04")  # a line, then Ctrl-D (end of input)
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
        assert proc.returncode == 0 and len(out.splitlines()) == 1, err
    finally:
        os.close(controller)
        os.close(terminal)
    run = await rocklet("consume", "-n", ns, "-t", "tty", "--timeout", "0.5")
    bodies = sorted(ln.split("body=", 1)[1] for ln in run.out.splitlines())
    assert bodies == [
        "message 1 of 2 from rocklet produce",
        "message 2 of 2 from rocklet produce",
        "typed",
    ]


async def test_an_empty_standard_input_with_count_sends_generated_bodies(
    standalone: Standalone,
) -> None:
    # `docker exec` without -i, `ssh host cmd` and scripts give /dev/null or an empty pipe.
    ns = standalone.namesrv
    for stdin in (None, b""):
        run = await rocklet("produce", "-n", ns, "-t", "quiet", "--count", "2", stdin=stdin)
        assert run.code == 0, run.err
        assert len(run.out.splitlines()) == 2 and "sent 2 message(s)" in run.err
    piped = await rocklet("produce", "-n", ns, "-t", "quiet", "--count", "1", stdin=b"a\nb\n")
    assert piped.code == 0 and len(piped.out.splitlines()) == 1, piped.err
    run = await rocklet("consume", "-n", ns, "-t", "quiet", "--timeout", "0.5")
    bodies = sorted(ln.split("body=", 1)[1] for ln in run.out.splitlines())
    one, two = "message 1 of 2 from rocklet produce", "message 2 of 2 from rocklet produce"
    assert bodies == ["a", one, one, two, two]


def test_progress_lines_go_to_stderr_only_when_stdout_is_not_a_terminal() -> None:
    err = io.StringIO()
    note = ProgressNote(err, "sent", total=10, interval_s=0.0)
    note.update(4)
    note.update(10)
    lines = err.getvalue().splitlines()
    assert [ln.split(" (")[0] for ln in lines] == ["sent 4/10", "sent 10/10"]
    assert all(re.fullmatch(r"sent \d+/10 \(\d+/s\)", ln) for ln in lines)
    quiet = io.StringIO()
    ProgressNote(quiet, "sent", interval_s=0.0, enabled=False).update(3)
    assert quiet.getvalue() == ""
