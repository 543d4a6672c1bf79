"""The compiled twins for the equivalence tests, whatever ROCKLET_PURE_PYTHON says."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def compiled_module(name: str) -> ModuleType:
    """Import a compiled module directly (ignoring ROCKLET_PURE_PYTHON).

    A checkout installed with ``ROCKLET_NO_EXTENSIONS=1`` has none: the equivalence
    tests then skip, saying so. Anywhere else a missing module is a failed build.
    """
    try:
        return importlib.import_module(name)
    except ImportError:
        if os.environ.get("ROCKLET_NO_EXTENSIONS"):
            pytest.skip(f"{name} not built: installed with ROCKLET_NO_EXTENSIONS")
        raise
