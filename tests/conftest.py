"""Suite-wide fixtures: the recorded test data and the guard against unhandled loop errors."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import os
import shutil
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def unpacked(archive: str) -> Path:
    """Unpack ``tests/data/<archive>`` once into ``build/test-data/`` and return the folder.

    The archive's hash names the folder, so a changed archive is unpacked afresh and two
    test runs (or two Pythons) never see half an extraction: it is unpacked beside its
    final name and renamed into place.
    """
    source = DATA / archive
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    target = ROOT / "build" / "test-data" / f"{archive.removesuffix('.tar.xz')}-{digest}"
    if not target.is_dir():
        staging = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        with tarfile.open(source) as tar:
            tar.extractall(staging, filter="data")
        try:
            staging.rename(target)
        except OSError:  # another run got there first: its copy is the same
            shutil.rmtree(staging, ignore_errors=True)
    return target


#: Frames recorded between the official clients and RocketMQ 4.9.4 (tests/data/README.md).
CAPTURES = unpacked("captures.tar.xz") / "captures"
#: A store directory written by RocketMQ 4.9.4 (copy it before opening it).
GOLDEN_STORE = unpacked("rocketmq-4.9.4-store.tar.xz") / "rocketmq-4.9.4-store"


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
