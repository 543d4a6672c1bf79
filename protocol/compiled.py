"""Which compiled twins (the optional Cython extensions) this process uses.

The protocol's binary header codec and the store's record encoder have compiled twins,
built by a normal install when a C compiler is there (``setup.py``). The pure-Python
functions stay the reference and the fallback: set ``ROCKLET_PURE_PYTHON=1`` before the
process starts to run without the extensions (the test suite runs both ways).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Final

__all__ = ["MODULES", "PURE_PYTHON", "active", "describe", "load"]

#: Set in the environment: ignore built extensions and run the Python twins.
PURE_PYTHON: Final = os.environ.get("ROCKLET_PURE_PYTHON", "") not in ("", "0")
#: The compiled modules, by name.
MODULES: Final = ("rocklet.protocol._speedups", "rocklet.store._speedups")


def load(name: str) -> ModuleType | None:
    """The compiled module ``name``, or None (not built, or pure Python asked for).

    Args:
        name: One of :data:`MODULES`.

    Returns:
        The module, or None when callers must use their Python twins.
    """
    if PURE_PYTHON:
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def active() -> dict[str, bool]:
    """Whether each compiled module is in use in this process.

    Returns:
        Module name to True when it is loaded and used.
    """
    return {name: load(name) is not None for name in MODULES}


def describe() -> str:
    """One word or phrase for logs and ``--version``: which codecs run, and why.

    Returns:
        ``"compiled"``, ``"pure Python (ROCKLET_PURE_PYTHON set)"``, ``"pure Python
        (extensions not built)"`` or ``"partly compiled"``.
    """
    if PURE_PYTHON:
        return "pure Python (ROCKLET_PURE_PYTHON set)"
    states = set(active().values())
    if states == {True}:
        return "compiled"
    return "pure Python (extensions not built)" if states == {False} else "partly compiled"
