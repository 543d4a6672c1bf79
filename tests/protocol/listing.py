"""Parser for the ``real-broker/*.decoded.txt`` listings that accompany the pcaps.

Each listing names a TCP stream and direction, then one line per frame::

    === stream 1 c2s client:33256 -> broker
      REQ  SEND_MESSAGE(10) ser=JSON lang=CPP ver=63 opaque=2 ext={...} body[5]='hello'

(with ``remark=...`` before ``ext``). Bodies are previewed as the ``repr`` of their
first few hundred characters, as text or as hex.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

_STREAM = re.compile(r"^=== stream (\d+) (c2s|s2c) client:(\d+) -> (\w+)$")
_FRAME = re.compile(
    r"^  (REQ|RESP) +(\w+)\((-?\d+)\) ser=(\w+) lang=(\w+) ver=(-?\d+) "
    r"opaque=(-?\d+) flag=(-?\d+)(?: ONEWAY)? remark=(.*)$"
)
_PY_STRING = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\"""")
_BODY = re.compile(r"^ body\[(\d+)\](?:=(.*))?$")
_SUMMARY_HEAD: Final = "=== summary"


@dataclass(frozen=True)
class ListedFrame:
    """One frame line of a listing.

    Attributes:
        kind: ``"REQ"`` or ``"RESP"``.
        code: Request or response code.
        ser: Serialize type name (``"JSON"`` / ``"ROCKETMQ"``).
        lang: Language as listed: a name for JSON, a number for ROCKETMQ.
        version: Sender's version.
        opaque: Request id.
        flag: Flag bits.
        remark: Remark, ``None`` when absent.
        ext: extFields as sent (JSON types kept); an absent or null object is ``{}``.
        body_len: Body length.
        body_preview: The start of the body as text, or of its hex form.
    """

    kind: str
    code: int
    ser: str
    lang: str
    version: int
    opaque: int
    flag: int
    remark: str | None
    ext: dict[str, Any]
    body_len: int
    body_preview: str


@dataclass(frozen=True)
class Listing:
    """A whole listing.

    Attributes:
        streams: ``(client port, direction)`` to the frames listed for it, in order.
        servers: ``client port`` to the server role (``"namesrv"`` or ``"broker"``).
        summary: ``(server, dir, kind, code, serialization, language, version)`` counts.
    """

    streams: dict[tuple[int, str], list[ListedFrame]]
    servers: dict[int, str]
    summary: Counter[tuple[Any, ...]]


def parse_listing(path: Path) -> Listing:
    """Parse one ``*.decoded.txt`` file.

    Args:
        path: The listing.

    Returns:
        Its streams and summary.
    """
    streams: dict[tuple[int, str], list[ListedFrame]] = {}
    servers: dict[int, str] = {}
    summary: Counter[tuple[Any, ...]] = Counter()
    current: list[ListedFrame] | None = None
    in_summary = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(_SUMMARY_HEAD):
            in_summary = True
        elif in_summary and line.strip():
            count, _, key = line.partition(" ")
            server, direction, kind, code, _name, ser, lang, version = ast.literal_eval(key)
            summary[(server, direction, kind, code, ser, str(lang), version)] += int(count)
        elif match := _STREAM.match(line):
            port, direction = int(match[3]), match[2]
            servers[port] = match[4]
            current = streams.setdefault((port, direction), [])
        elif line.strip():
            assert current is not None, f"frame line before any stream header: {line!r}"
            current.append(_parse_frame(line))
    return Listing(streams, servers, summary)


def _parse_frame(line: str) -> ListedFrame:
    match = _FRAME.match(line)
    assert match, f"unrecognised listing line: {line[:120]!r}"
    rest = match[9]
    if rest.startswith("None"):
        remark, rest = None, rest[4:]
    else:
        literal = _PY_STRING.match(rest)
        assert literal, f"unparsable remark in {line[:120]!r}"
        remark, rest = ast.literal_eval(literal[0]), rest[literal.end() :]
    assert rest.startswith(" ext="), line[:120]
    ext, end = json.JSONDecoder().raw_decode(rest, 5)
    body = _BODY.match(rest[end:])
    assert body, f"unparsable body in {line[:120]!r}"
    return ListedFrame(
        kind=match[1],
        code=int(match[3]),
        ser=match[4],
        lang=match[5],
        version=int(match[6]),
        opaque=int(match[7]),
        flag=int(match[8]),
        remark=remark,
        ext=ext or {},
        body_len=int(body[1]),
        body_preview=ast.literal_eval(body[2]) if body[2] else "",
    )
