"""Suite-wide fixtures: shared paths and the guard that fails on unhandled loop errors."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
CAPTURES = SHARED / "docs" / "captures"
GOLDEN_STORE = SHARED / "data" / "rocketmq-4.9.4-store"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give every coroutine test the loop-exception guard."""
    for item in items:
        func = getattr(item, "function", None)
        if func is not None and inspect.iscoroutinefunction(func):
            item.add_marker(pytest.mark.usefixtures("_loop_exception_guard"))


@pytest.fixture
async def _loop_exception_guard() -> AsyncIterator[None]:
    """Fail the test when the event loop saw an exception nobody handled.

    asyncio only logs exceptions from callbacks and never-retrieved task results;
    a background failure must fail the test instead.
    """
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    yield
    loop.set_exception_handler(previous)
    if seen:
        details = "; ".join(f"{c.get('message')}: {c.get('exception')!r}" for c in seen)
        pytest.fail(f"unhandled exception(s) in the event loop: {details}")
