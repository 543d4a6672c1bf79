"""Run a program's main coroutine on the fastest event loop this platform has.

uvloop (libuv) is a runtime dependency wherever it installs: it roughly halves the
per-request overhead of the servers. Where it does not (Windows, PyPy), the standard
asyncio loop runs the same code unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["loop_name", "run"]

_T = TypeVar("_T")


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """Run ``main`` to completion on uvloop when installed, else on asyncio's loop.

    Args:
        main: The program's main coroutine.

    Returns:
        What ``main`` returned.
    """
    try:
        import uvloop  # optional: not installed where it has no wheel
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def loop_name() -> str:
    """Name the loop :func:`run` uses here: ``"uvloop"`` or ``"asyncio"``."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"
