"""Java properties files (``java.util.Properties.load`` rules), as broker.conf is written.

Apart from :mod:`rocklet.broker.config`, which turns the parsed keys into typed settings:
the same reader serves the broker and name server files, ``tls.properties`` and the
body of UPDATE_BROKER_CONFIG.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["parse_properties"]

_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_KEY_END: Final = re.compile(r"(?<!\\)(?:\\\\)*[=:\s]")


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1  # an odd count: the last backslash escapes the newline
        if continued:
            line = line[:-1]
        pending = line if pending is None else pending + line
        if not continued:
            lines.append(pending)
            pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def parse_properties(text: str) -> dict[str, str]:
    r"""Parse Java properties text (``java.util.Properties.load`` rules).

    ``key=value``, ``key: value`` or ``key value``; ``#`` and ``!`` start comment lines;
    a line ending in an odd number of backslashes continues on the next one; escapes
    (``\\t``, ``\\n``, ``\\uXXXX``, ...) are decoded. Keys and values are trimmed.

    Args:
        text: The file's text.

    Returns:
        Key to value; a repeated key keeps its last value, as in Java.
    """
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        match = _KEY_END.search(line)
        if match is None:
            key, rest = line, ""
        else:
            key, rest = line[: match.end() - 1], line[match.end() - 1 :]
            rest = rest.lstrip(" \t\f")
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
        props[_unescape(key).strip()] = _unescape(rest.strip(" \t\f")).strip()
    return props
