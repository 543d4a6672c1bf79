"""Micro-benchmark: header codecs (JSON vs msgpack vs ROCKETMQ binary).

Times the frame encode (``encode_command_into``) and decode (``FrameDecoder``) of the headers
of a typical SEND_MESSAGE (as the C++ client fills it) and PULL_MESSAGE request, and
prints operations per second. The msgpack serialization is a Rocklet extension, kept for
compatibility (the SDK's default, the binary header, is cheaper now). A second
table times the typed parse that follows every decode (``parse_send_header`` for the
V1 and V2 spellings, ``PullMessageRequestHeader.from_ext_fields``), which also checks
each number's bounds and each string's UTF-8 form.

Run: ``.venv/bin/python bench/header_codecs.py [--seconds 0.3]``.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from collections.abc import Callable, Sequence
from dataclasses import replace

from rocklet.protocol import RemotingCommand, SerializeType
from rocklet.protocol.frame import FrameDecoder, encode_command, encode_command_into
from rocklet.protocol.header_codec import encode_header
from rocklet.protocol.headers import (
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    parse_send_header,
)

SEND = RemotingCommand(
    code=10,
    opaque=123456,
    remark="",
    ext_fields={
        "producerGroup": "PID_bench_producer",
        "topic": "BenchTopic",
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "3",
        "sysFlag": "0",
        "bornTimestamp": "1795252771163",
        "flag": "0",
        "properties": "KEYS\x01order-42\x02TAGS\x01TagA\x02"
        "UNIQ_KEY\x010100007F0000B9C50000DBBB5C6E0100\x02WAIT\x01true",
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "false",
    },
    body=b"x" * 1024,
    language="PYTHON",
    version=401,
)
PULL = RemotingCommand(
    code=11,
    opaque=123457,
    ext_fields={
        "consumerGroup": "CID_bench_consumer",
        "topic": "BenchTopic",
        "queueId": "3",
        "queueOffset": "1048576",
        "maxMsgNums": "32",
        "sysFlag": "6",
        "commitOffset": "1048000",
        "suspendTimeoutMillis": "15000",
        "subscription": "TagA || TagB",
        "subVersion": "1795252771170",
        "expressionType": "TAG",
    },
    language="PYTHON",
    version=401,
)
TYPES = (SerializeType.JSON, SerializeType.MSGPACK, SerializeType.ROCKETMQ)


def ops_per_second(func: Callable[[], object], seconds: float) -> float:
    """Best-of-three rate of ``func`` calls, each run lasting about ``seconds``."""
    timer = timeit.Timer(func)
    number, _ = timer.autorange()
    per_run = max(1, int(number * seconds / 0.2))
    best = min(timer.repeat(repeat=3, number=per_run))
    return per_run / best


def measure(cmd: RemotingCommand, stype: SerializeType, seconds: float) -> list[str]:
    """One table row: header size and encode / decode / round-trip rates.

    Timed as the broker and the SDK run them: a frame written by ``encode_command_into``
    and read back by a ``FrameDecoder`` (so the compiled frame steps count where they
    apply: binary headers, and JSON headers of the usual shape). The body is left out.
    """
    typed = replace(cmd, serialize_type=stype, body=b"")
    header = encode_header(typed)
    frame = encode_command(typed)
    decoder = FrameDecoder()
    decoder.feed(frame)
    decoded = decoder.next_command()
    assert decoded is not None and decoded.ext_fields == typed.ext_fields

    def encode() -> int:
        return encode_command_into([], typed)

    def decode() -> RemotingCommand | None:
        decoder.feed(frame)
        return decoder.next_command()

    def round_trip() -> RemotingCommand | None:
        out: list[bytes] = []
        encode_command_into(out, typed)  # type: ignore[arg-type]
        decoder.feed(b"".join(out))
        return decoder.next_command()

    rates = [ops_per_second(f, seconds) for f in (encode, decode, round_trip)]
    return [str(len(header)), *(f"{rate / 1000:,.0f}k" for rate in rates)]


def measure_parses(seconds: float) -> list[list[str]]:
    """Rows of typed-header parse rates (send V1, send V2, pull)."""
    v1 = SendMessageRequestHeader.from_ext_fields(SEND.ext_fields)
    send_v2 = replace(SEND, code=310, ext_fields=v1.to_v2().to_ext_fields())
    cases: list[tuple[str, Callable[[], object]]] = [
        ("SEND (V1 keys)", lambda: parse_send_header(SEND)),
        ("SEND (V2 keys)", lambda: parse_send_header(send_v2)),
        ("PULL", lambda: PullMessageRequestHeader.from_ext_fields(PULL.ext_fields)),
    ]
    return [[name, f"{ops_per_second(f, seconds) / 1000:,.0f}k"] for name, f in cases]


def format_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Render rows as a GitHub-style Markdown table with aligned columns."""
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(head), rule, *(line(row) for row in rows)])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="time per measurement")
    args = parser.parse_args(argv)
    rows = [
        [name, stype.name, *measure(cmd, stype, args.seconds)]
        for name, cmd in (("SEND", SEND), ("PULL", PULL))
        for stype in TYPES
    ]
    head = ["header", "serialization", "bytes", "encode/s", "decode/s", "round trip/s"]
    sys.stdout.write(format_table(head, rows) + "\n\n")
    sys.stdout.write(format_table(["typed header", "parse/s"], measure_parses(args.seconds)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
