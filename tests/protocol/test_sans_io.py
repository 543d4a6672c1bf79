"""``protocol/`` is sans-IO: no networking, threads, event loop or upward imports.

style.md §8 item 1. Imports are read with ``ast`` (not grep), so aliased, nested and
function-local imports count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rocklet.protocol

FORBIDDEN = {"asyncio", "socket", "selectors", "threading", "uvloop"}
PACKAGE_DIR = Path(rocklet.protocol.__file__).parent


def _forbidden(name: str) -> bool:
    """I/O modules, and any of our packages but the protocol itself."""
    if name.split(".")[0] in FORBIDDEN:
        return True
    return name.startswith("rocklet.") and not name.startswith("rocklet.protocol")


def imported_modules(source: str, package: str) -> set[str]:
    """Absolute names of every module ``source`` imports.

    Args:
        source: Python source text.
        package: The package the source lives in, for resolving relative imports.
    """
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level:
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1]
            names.add(".".join([*base, node.module] if node.module else base))
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
    return names


def _package_of(path: Path) -> str:
    return ".".join(("rocklet", "protocol", *path.parent.relative_to(PACKAGE_DIR).parts))


def test_protocol_modules_import_nothing_forbidden() -> None:
    files = sorted(PACKAGE_DIR.rglob("*.py"))
    assert len(files) >= 10
    offenders = sorted(
        f"{path.relative_to(PACKAGE_DIR)} imports {name}"
        for path in files
        for name in imported_modules(path.read_text(encoding="utf-8"), _package_of(path))
        if _forbidden(name)
    )
    assert not offenders


def test_the_checker_sees_every_import_form() -> None:
    source = (
        "import os, socket as s\n"
        "from asyncio import sleep\n"
        "def f():\n"
        "    import threading\n"
        "from . import codes\n"
        "from .. import store\n"
        "from rocklet.broker import app\n"
        "from .base import wire\n"
    )
    names = imported_modules(source, "rocklet.protocol.headers")
    assert names == {
        "os",
        "socket",
        "asyncio",
        "threading",
        "rocklet.protocol.headers",
        "rocklet.protocol",
        "rocklet.protocol.headers.base",
        "rocklet.broker",
    }
    assert {name for name in names if _forbidden(name)} == {
        "socket",
        "asyncio",
        "threading",
        "rocklet.broker",
    }
