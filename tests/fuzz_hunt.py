"""Hunt bugs with the fuzzer: a real standalone process, every crash grouped by where.

Unlike the tests, which stop at the first failure, this keeps going: it sends the
fuzzer's frames (tests/fuzzing.py) in chunks to a ``rocklet standalone`` process,
restarts the process when it dies or stops answering, and at the end prints each
distinct traceback in the process's log (exception and innermost Rocklet frame), each
distinct exception text found in answers, the unanswered requests by code, and the
chunks where the process hung or died. The child runs whatever code ``import rocklet``
finds, so the same hunt runs against an older checkout too::

    .venv/bin/python -m tests.fuzz_hunt --frames 30000 --seed 7
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
from collections import Counter
from pathlib import Path

from rocklet.protocol.codes import RequestCode
from rocklet.protocol.command import RemotingCommand
from rocklet.transport.dial import open_connection
from rocklet.transport.errors import RemotingError
from tests.adversity.procs import BrokerProcess
from tests.fuzzing import Mutator, Target, fuzz

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_PROPS = {
    "mappedFileSizeCommitLog": str(4 << 20),
    "mappedFileSizeConsumeQueue": str(6000 * 20),
    "maxMessageSize": str(64 * 1024),
}


def tracebacks(lines: list[str]) -> list[tuple[str, str]]:
    """``(exception line, innermost frame outside the standard library)`` per traceback."""
    found = []
    i = 0
    while i < len(lines):
        if "Traceback (most recent call last)" not in lines[i]:
            i += 1
            continue
        frames = []
        j = i + 1
        while j < len(lines) and (lines[j].startswith((" ", "\t")) or not lines[j].strip()):
            if match := _FRAME.search(lines[j]):
                frames.append(match.groups())
            j += 1
        ours = [f for f in frames if "/lib/python3" not in f[0] and "site-packages" not in f[0]]
        where = "?"
        if ours:
            path, line, func = ours[-1]
            where = f"{Path(path).parent.name}/{Path(path).name}:{line} {func}"
        exc = lines[j].strip() if j < len(lines) else "?"
        found.append((_general(exc), where))
        i = j + 1
    return found


def _general(text: str) -> str:
    """An exception's text without the numbers that vary (positions, offsets, paths)."""
    text = re.sub(r"/tmp/\S+", "<path>", text)
    return re.sub(r"(?<=[\s=\[(,])-?\d+(-\d+)?", "N", text)[:140]


async def _answers(broker: BrokerProcess) -> bool:
    try:
        async with await open_connection("127.0.0.1", broker.broker_port) as conn:
            await conn.request(RemotingCommand(RequestCode.GET_ALL_TOPIC_CONFIG), 5)
    except (RemotingError, OSError):
        return False
    return True


async def hunt(frames: int, seed: int, chunk: int) -> None:
    """Run the hunt and print what it found."""
    with tempfile.TemporaryDirectory() as root:
        broker = BrokerProcess(Path(root), _PROPS)
        await broker.start()
        mutator = Mutator(seed)
        where: Counter[tuple[str, str]] = Counter()
        answered_with: Counter[str] = Counter()
        unanswered: Counter[str] = Counter()
        stopped: list[str] = []
        read = 0
        for start in range(0, frames, chunk):
            ports: dict[Target, int] = {
                "broker": broker.broker_port,
                "namesrv": broker.namesrv_port,
            }
            report = await fuzz(mutator, ports, chunk, start=start, answer_timeout_s=5)
            for line in report.unanswered:
                unanswered[line.split(" code ")[1].split(":")[0]] += 1
            for line in report.crashes:
                code = line.split(" code ")[1].split(":")[0]
                answered_with[f"code {code}: {_general(line.split(': ', 1)[1])}"] += 1
            where.update(tracebacks(broker.lines[read:]))
            read = len(broker.lines)
            proc = broker.proc
            if proc is None or proc.returncode is not None or not await _answers(broker):
                state = "died" if proc is not None and proc.returncode is not None else "hung"
                stopped.append(f"frames {start}..{start + chunk - 1}: {state}")
                await broker.kill9()
                await broker.restart()
                read = 0
            print(f"{start + chunk}: {report.summary()}", flush=True)
        await broker.stop()
    print("\n== tracebacks in the log (count, exception, where)")
    for (exc, at), count in where.most_common():
        print(f"{count:6} {exc}\n       at {at}")
    print("\n== answers carrying an exception's text")
    for text, count in answered_with.most_common():
        print(f"{count:6} {text}")
    print(f"\n== unanswered, by request code: {dict(unanswered)}")
    print(f"== stopped answering or died: {stopped or 'never'}")


def main() -> None:
    """Parse the arguments and hunt."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--chunk", type=int, default=500, help="frames between liveness checks")
    args = parser.parse_args()
    asyncio.run(hunt(args.frames, args.seed, args.chunk))


if __name__ == "__main__":
    main()
