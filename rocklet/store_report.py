"""A store check report (``rocklet.store.check``) as text: the same for both commands.

``rocklet store check`` prints it for a store on disk, ``rocklet admin storeCheck`` for
the report a running broker sends as JSON; both take the JSON form, so they print the
same. Tables have ``rocklet admin``'s look (``#``-prefixed headers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["finding_rows", "heading", "render", "summary_rows", "verdict"]

_FINDING_HEADERS = ("Severity", "Area", "File", "Offset", "What")


def heading(report: Mapping[str, Any]) -> str:
    """The first line: which store, and how it was checked."""
    if report["live"]:
        state = "checked on the running broker, below its write positions"
    elif report["cleanStop"]:
        state = "stopped cleanly"
    else:
        state = "the last run did not stop cleanly"
    return f"Store {report['store']} ({state})"


def summary_rows(report: Mapping[str, Any]) -> list[tuple[str, int]]:
    """One row per summary figure."""
    return list(report["summary"].items())


def finding_rows(report: Mapping[str, Any]) -> list[tuple[object, ...]]:
    """One row per finding: severity, area, file, offset, what."""
    return [
        (f["severity"], f["area"], f["path"], f["offset"], f["message"]) for f in report["findings"]
    ]


def verdict(report: Mapping[str, Any]) -> str:
    """The last line: how many problems and warnings."""
    problems, warnings = report["problems"], report["warnings"]
    if not problems and not warnings:
        return "No problems found."
    plural = "" if problems == 1 else "s"
    return f"{problems} problem{plural}, {warnings} warning{'' if warnings == 1 else 's'}."


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[f"#{h}" for h in headers]]
    cells += [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def render(report: Mapping[str, Any]) -> str:
    """The whole report as text (no trailing newline)."""
    blocks = [heading(report), _table(("Figure", "Value"), summary_rows(report))]
    if report["findings"]:
        blocks.append(_table(_FINDING_HEADERS, finding_rows(report)))
    blocks.append(verdict(report))
    return "\n\n".join(blocks)
