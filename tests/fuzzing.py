"""A frame fuzzer for the broker and the name server: mutations and a driver.

It starts from the seeds of :mod:`tests.fuzz_seeds`, a valid request for every request
code the two servers handle and every request of the recorded captures.

Each fuzzed frame starts from a seed and is either

* *intact* (most of them): one to three structured changes (a header value swapped
  for a hostile one from :data:`HOSTILE_TEXT` / :data:`HOSTILE_NUMBERS`, a field
  dropped or added, the code swapped, the body truncated, garbled or with a JSON value
  swapped, the serialization or the oneway bit changed), then framed properly. The
  server must answer it (unless it is oneway, or a pull it may hold) with a response
  code, and never with an exception's text; or
* *broken*: the framed bytes damaged (lengths, serialize type, header bytes, random
  garbage). Sent on a connection of its own, which the server may close or answer.

Names come from small pools, so a long run's side effects (topics, offsets, groups,
KV entries, registrations) stay bounded and the server's memory must too. The pools
never name :data:`KEEP_TOPIC` or :data:`WITNESS_GROUP`, which a well-behaved client
uses meanwhile. Everything is drawn from one ``random.Random(seed)``: a failure names
the seed and the frame index, and :meth:`Mutator.frame` rebuilds that frame.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import re
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rocklet.protocol.codes import RequestCode, SerializeType
from rocklet.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from rocklet.protocol.frame import FrameDecoder, encode_command
from tests.conftest import CAPTURES
from tests.fuzz_seeds import (
    GROUPS,
    KEEP_TOPIC,
    TOPICS,
    WITNESS_GROUP,
    Seed,
    Target,
    seeded_codes,
    seeds,
)

__all__ = [
    "FAILURE_LOG_EVENTS",
    "KEEP_TOPIC",
    "WITNESS_GROUP",
    "FuzzFrame",
    "FuzzReport",
    "Mutator",
    "Target",
    "failure_lines",
    "fuzz",
    "may_be_held",
    "seeded_codes",
    "seeds",
]


#: Topic and group of the well-behaved client; never in a pool.
#: Log events that mean a request raised something no check expected (a crash).
FAILURE_LOG_EVENTS: Final = (
    "processor failed",
    "request handler failed",
    "close callback failed",
    "background failure",
    "Task exception was never retrieved",
    "Exception in callback",
    "Traceback (most recent call last)",
)
#: An answer whose remark is an exception's ``Type: message`` (the dispatcher's last resort).
_EXCEPTION_REMARK: Final = re.compile(r"^[A-Z][A-Za-z0-9_]*(Error|Exception|Exit): ")

#: Hostile text for any string field, name or not.
HOSTILE_TEXT: Final = (
    "",
    " ",
    "\n",
    "FuzzTopic\n",
    "t" * 128,
    "g" * 256,
    "x" * 5000,
    "\ud800",
    "\udcff\udcfe",
    "a\x00b",
    "\x01\x02",
    "é順😀",
    "bad topic!",
    "%RETRY%",
    "%DLQ%FuzzGroup",
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "rmq_sys_fuzz",
    "DefaultCluster",
    "broker-a",
    "127.0.0.1:1",
    "*",
    "TagA || TagB",
    "||",
    "true",
    "false",
    "1",
    "DELAY\x0199\x02TAGS\x01a\x02",
    "DELAY\x01-5\x02",
    "DELAY\x01abc\x02",
    "DELAY\x0199999999999999999999\x02",
    "TRAN_MSG\x01true\x02PGROUP\x01FuzzProducer\x02",
    "KEYS\x01 \x02UNIQ_KEY\x01\x02",
    "REPLY_TO_CLIENT\x01fuzz-client\x02",
    "\x01\x01\x02\x02",
    "ORDER_TOPIC_CONFIG",
    "broker-a:4;broker-b:x",
    "SQL92",
    "TAG",
    *TOPICS,
    *GROUPS,
)
#: Hostile numbers for any field (as the text a peer sends).
HOSTILE_NUMBERS: Final = (
    "0",
    "1",
    "-1",
    "-2",
    "3",
    "4",
    "31",
    "32",
    "1023",
    "1024",
    "1025",
    "65535",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "99999999999999999999999999",
    "9" * 5000,
    "1e3",
    "0x10",
    " 5",
    "+5",
    "1_000",
    "٣",
    "NaN",
    "-0",
    "007",
    "1.5",
    "",
)
#: Values a JSON body member may be swapped for.
HOSTILE_JSON: Final[tuple[Any, ...]] = (
    None,
    True,
    -1,
    0,
    2**31,
    2**63,
    -(2**63) - 1,
    1.5,
    "",
    "\ud800",
    "t" * 128,
    [],
    {},
    [None],
    {"a": {"b": []}},
    "FuzzTopic",
    "FuzzGroup",
)
#: Every request code either server knows, and some it does not.
OTHER_CODES: Final = (0, -1, 9999, 32767, -32768, 13, 22, 23, 39, 40, 220, 221, 223, 304, 309, 326)


@dataclass(frozen=True)
class FuzzFrame:
    """One fuzzed frame.

    Attributes:
        target: The server it goes to.
        data: The bytes on the wire.
        intact: Framed properly (the server must answer it or, for oneway, stay quiet).
        opaque: The request id (intact frames only).
        expects_answer: An intact frame the server must answer (not oneway, not a
            response, not a pull it may hold).
        code: The request code (for reports).
        index: Its position in the run.
    """

    target: Target
    data: bytes
    intact: bool
    opaque: int
    expects_answer: bool
    code: int
    index: int


# -- mutations ---------------------------------------------------------------------------


class Mutator:
    """Fuzzed frames from seeds, all drawn from one seeded generator.

    Args:
        seed: The generator's seed (a run is reproducible from it).
        all_seeds: The seeds (default: :func:`seeds`).
        broken_share: Share of frames damaged after framing.
    """

    def __init__(
        self, seed: int, all_seeds: Sequence[Seed] | None = None, broken_share: float = 0.08
    ) -> None:
        self.seed = seed
        self._seeds = list(seeds() if all_seeds is None else all_seeds)
        # Every code equally often, whatever the captures hold most of (sends, pulls).
        self._by_code: list[list[Seed]] = []
        by_code: dict[tuple[str, int], list[Seed]] = {}
        for s in self._seeds:
            by_code.setdefault((s.target, s.cmd.code), []).append(s)
        self._by_code = [by_code[k] for k in sorted(by_code)]
        self._keys = sorted({k for s in self._seeds for k in s.cmd.ext_fields})
        self._codes = sorted({s.cmd.code for s in self._seeds} | set(OTHER_CODES))
        self._broken_share = broken_share

    def frame(self, index: int) -> FuzzFrame:
        """The fuzzed frame number ``index`` of this run (a pure function of both)."""
        rng = random.Random(self.seed * 1_000_003 + index)
        seed = rng.choice(rng.choice(self._by_code))
        cmd = seed.cmd
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            cmd = self._mutate(rng, cmd)
        opaque = index & 0x7FFFFFFF
        cmd = dataclasses.replace(cmd, opaque=opaque)
        stype = cmd.serialize_type
        if stype == SerializeType.ROCKETMQ and not -(2**15) <= cmd.code < 2**15:
            cmd = dataclasses.replace(cmd, serialize_type=SerializeType.JSON)
        try:
            data = encode_command(cmd)
        except (UnicodeEncodeError, ValueError):  # an older codec: JSON escapes anything
            data = encode_command(dataclasses.replace(cmd, serialize_type=SerializeType.JSON))
        if rng.random() < self._broken_share:
            return FuzzFrame(seed.target, _damage(rng, data), False, 0, False, cmd.code, index)
        return FuzzFrame(seed.target, data, True, opaque, _expects_answer(cmd), cmd.code, index)

    def _mutate(self, rng: random.Random, cmd: RemotingCommand) -> RemotingCommand:
        roll = rng.random()
        ext = dict(cmd.ext_fields)
        if roll < 0.45 and (ext or self._keys):
            key = rng.choice(list(ext)) if ext and rng.random() < 0.8 else rng.choice(self._keys)
            pool = HOSTILE_NUMBERS if _looks_numeric(ext.get(key, "")) else HOSTILE_TEXT
            if rng.random() < 0.2:
                pool = HOSTILE_TEXT if pool is HOSTILE_NUMBERS else HOSTILE_NUMBERS
            ext[key] = rng.choice(pool)
            return dataclasses.replace(cmd, ext_fields=ext)
        if roll < 0.55 and ext:
            del ext[rng.choice(list(ext))]
            return dataclasses.replace(cmd, ext_fields=ext)
        if roll < 0.62:
            return dataclasses.replace(cmd, code=rng.choice(self._codes))
        if roll < 0.82:
            return dataclasses.replace(cmd, body=_mutate_body(rng, cmd.body))
        if roll < 0.9:
            return dataclasses.replace(cmd, serialize_type=rng.choice(list(SerializeType)))
        if roll < 0.95:
            return dataclasses.replace(cmd, remark=rng.choice(HOSTILE_TEXT))
        flag = rng.choice((0, 0, FLAG_ONEWAY, FLAG_RESPONSE, 0xFC, -1))
        return dataclasses.replace(cmd, flag=flag)


def _looks_numeric(text: str) -> bool:
    return text.lstrip("-").isdigit()


def may_be_held(cmd: RemotingCommand) -> bool:
    """A pull the broker may hold until a message arrives or its time is up."""
    if cmd.code != RequestCode.PULL_MESSAGE:
        return False
    try:
        return bool(int(cmd.ext_fields.get("sysFlag", "0")) & 2)
    except ValueError:
        return False


def _expects_answer(cmd: RemotingCommand) -> bool:
    return not cmd.flag & (FLAG_ONEWAY | FLAG_RESPONSE) and not may_be_held(cmd)


def _mutate_body(rng: random.Random, body: bytes) -> bytes:
    roll = rng.random()
    if roll < 0.5 and body[:1] in (b"{", b"["):
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if doc is not None:
            _swap_json_value(rng, doc)
            return json.dumps(doc).encode()  # escapes lone surrogates, as a peer would
    if roll < 0.65:
        return body[: rng.randrange(len(body) + 1)]
    if roll < 0.8 and body:
        data = bytearray(body)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if roll < 0.9:
        return rng.randbytes(rng.randint(0, 300))
    return zlib.compress(body) if rng.random() < 0.5 else b""


def _swap_json_value(rng: random.Random, doc: Any) -> None:
    node = doc
    for _ in range(rng.randint(1, 5)):
        if isinstance(node, dict) and node:
            key = rng.choice(list(node))
            if rng.random() < 0.4 or not isinstance(node[key], dict | list) or not node[key]:
                node[key] = rng.choice(HOSTILE_JSON)
                return
            node = node[key]
        elif isinstance(node, list) and node:
            i = rng.randrange(len(node))
            if rng.random() < 0.4 or not isinstance(node[i], dict | list) or not node[i]:
                node[i] = rng.choice(HOSTILE_JSON)
                return
            node = node[i]
        else:
            return


def _damage(rng: random.Random, data: bytes) -> bytes:
    roll = rng.random()
    frame = bytearray(data)
    if roll < 0.2:  # the total length
        frame[0:4] = rng.choice(
            (b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x01\x00\x00\x01")
        )
    elif roll < 0.35:  # the serialize type / header length word
        frame[4] = rng.randrange(256)
    elif roll < 0.5:  # header length beyond the frame
        frame[5:8] = b"\xff\xff\xff"
    elif roll < 0.8 and len(frame) > 8:  # bytes inside the header
        header_len = int.from_bytes(frame[5:8], "big")
        for _ in range(rng.randint(1, 6)):
            frame[8 + rng.randrange(max(1, min(header_len, len(frame) - 8)))] = rng.randrange(256)
    elif roll < 0.9:
        return rng.randbytes(rng.randint(1, 64))
    else:  # a frame cut short: the server waits for the rest until we hang up
        return bytes(frame[: rng.randrange(1, len(frame))])
    return bytes(frame)


# -- the driver ----------------------------------------------------------------------------


@dataclass
class FuzzReport:
    """What a fuzz run did and found."""

    frames: int = 0
    intact: int = 0
    broken: int = 0
    answered: int = 0
    closed_by_server: int = 0
    held_or_oneway: int = 0
    seconds: float = 0.0
    #: Answers whose remark is an exception's text (a crash the dispatcher caught).
    crashes: list[str] = field(default_factory=list)
    #: Intact frames that expected an answer and got none, or a connection closed on one.
    unanswered: list[str] = field(default_factory=list)
    codes: dict[int, int] = field(default_factory=dict)

    #: When the run began (``time.perf_counter``), for progress lines mid-run.
    started: float = field(default_factory=time.perf_counter)

    @property
    def frames_per_second(self) -> float:
        """Frames sent per second of the run (so far, while it runs)."""
        seconds = self.seconds or time.perf_counter() - self.started
        return self.frames / seconds if seconds else 0.0

    def summary(self) -> str:
        """One line for logs and docs."""
        seconds = self.seconds or time.perf_counter() - self.started
        return (
            f"{self.frames} frames ({self.intact} intact, {self.broken} broken) in "
            f"{seconds:.1f} s = {self.frames_per_second:,.0f} frames/s; "
            f"{self.answered} answered, {self.held_or_oneway} oneway/held, "
            f"{self.closed_by_server} closes on broken frames; "
            f"{len(self.crashes)} crashes, {len(self.unanswered)} unanswered"
        )


class _Client(asyncio.Protocol):
    """A raw connection: writes bytes as given, matches answers by opaque, answers
    the server's own requests (running info, reply pushes) at once with SUCCESS."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder()
        self.waiting: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.closed = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.decoder.feed(data)
        for cmd in self.decoder.commands():
            if cmd.is_response:
                fut = self.waiting.pop(cmd.opaque, None)
                if fut is not None and not fut.done():
                    fut.set_result(cmd)
            elif not cmd.is_oneway and self.transport is not None:
                self.transport.write(encode_command(cmd.make_response(0)))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(ConnectionError("closed by the server"))


async def _connect(port: int) -> _Client:
    loop = asyncio.get_running_loop()
    _, client = await loop.create_connection(_Client, "127.0.0.1", port)
    return client


async def _send_intact(
    port: int, batch: list[FuzzFrame], report: FuzzReport, answer_timeout_s: float
) -> None:
    client = await _connect(port)
    assert client.transport is not None
    waits = {}
    for frame in batch:
        if frame.expects_answer:
            waits[frame.opaque] = client.waiting[frame.opaque] = (
                asyncio.get_running_loop().create_future()
            )
        else:
            report.held_or_oneway += 1
    client.transport.writelines([f.data for f in batch])
    by_opaque = {f.opaque: f for f in batch}
    if waits:
        await asyncio.wait(waits.values(), timeout=answer_timeout_s)
    results: list[RemotingCommand | BaseException] = []
    for fut in waits.values():
        if not fut.done():
            fut.cancel()
            results.append(TimeoutError(f"no answer in {answer_timeout_s} s"))
        else:
            results.append(fut.exception() or fut.result())
    for opaque, result in zip(waits, results, strict=True):
        frame = by_opaque[opaque]
        if isinstance(result, BaseException):
            report.unanswered.append(f"frame {frame.index} code {frame.code}: {result!r}")
            continue
        report.answered += 1
        report.codes[result.code] = report.codes.get(result.code, 0) + 1
        if _EXCEPTION_REMARK.match(result.remark or ""):
            report.crashes.append(f"frame {frame.index} code {frame.code}: {result.remark}")
    client.transport.close()


async def _send_broken(port: int, frame: FuzzFrame, report: FuzzReport, wait_s: float) -> None:
    client = await _connect(port)
    assert client.transport is not None
    client.transport.write(frame.data)
    try:
        async with asyncio.timeout(wait_s):
            await asyncio.shield(client.closed)
        report.closed_by_server += 1
    except TimeoutError:
        pass  # answered, or waiting for the rest of a frame cut short: we hang up
    client.transport.abort()


async def fuzz(
    mutator: Mutator,
    ports: dict[Target, int],
    frames: int,
    *,
    start: int = 0,
    batch_size: int = 64,
    answer_timeout_s: float = 15.0,
    broken_wait_s: float = 0.01,
    on_progress: Callable[[FuzzReport], None] | None = None,
) -> FuzzReport:
    """Send ``frames`` fuzzed frames and check each intact one is answered sanely.

    Intact frames go in pipelined batches on a fresh connection per batch and server;
    broken ones each on a connection of their own.

    Args:
        mutator: Where frames come from.
        ports: The port of each server.
        frames: How many frames.
        start: Index of the first frame (a run can be split into parts).
        batch_size: Intact frames per connection.
        answer_timeout_s: How long a batch may wait for its answers.
        broken_wait_s: How long to wait for the server to close on a broken frame.
        on_progress: Called after each batch with the report so far.

    Returns:
        The report.
    """
    report = FuzzReport()
    pending: dict[Target, list[FuzzFrame]] = {"broker": [], "namesrv": []}
    for index in range(start, start + frames):
        frame = mutator.frame(index)
        report.frames += 1
        if not frame.intact:
            report.broken += 1
            await _send_broken(ports[frame.target], frame, report, broken_wait_s)
            continue
        report.intact += 1
        queue = pending[frame.target]
        queue.append(frame)
        if len(queue) >= batch_size:
            await _send_intact(ports[frame.target], queue, report, answer_timeout_s)
            queue.clear()
            if on_progress is not None:
                on_progress(report)
    for target, queue in pending.items():
        if queue:
            await _send_intact(ports[target], queue, report, answer_timeout_s)
    report.seconds = time.perf_counter() - report.started
    return report


def failure_lines(lines: Iterable[str]) -> list[str]:
    """The log lines that mean a crash (see :data:`FAILURE_LOG_EVENTS`)."""
    return [line for line in lines if any(event in line for event in FAILURE_LOG_EVENTS)]


def capture_seed_paths() -> list[Path]:
    """The capture files seeds are read from (for reports)."""
    return sorted(CAPTURES.glob("*.jsonl")) + sorted((CAPTURES / "real-broker").glob("*.pcap"))
