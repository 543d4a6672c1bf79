"""Fixtures of the Java compatibility tier (see javatier.py).

The driver is compiled once per session. The systems are started once per test module
and parameter (``rocklet`` / ``rocketmq``), or once per session for those several modules
share: synchronous fixtures (the servers are child processes, so no event loop has to
outlive a test). pytest orders the tests so that a session-scoped parametrized system
starts once per parameter (``--setup-show`` shows it).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.java.admin_seed import Seeded, seed
from tests.java.javatier import (
    JavaDriver,
    System,
    compile_driver,
    missing,
    rocketmq_system,
    rocklet_system,
)
from tests.java.mqadmin import MqAdmin

SYSTEMS = ("rocklet", "rocketmq")
#: Test-sized commit log files for RocketMQ (its default is 1 GiB each).
_ROCKETMQ_SMALL = {"mappedFileSizeCommitLog": str(64 * 1024 * 1024)}
#: RocketMQ's 18 delay levels (4.9.4 has "1s 5s 10s 30s 1m ... 2h"), all one second.
ONE_SECOND_DELAY_LEVELS = " ".join(["1s"] * 18)
#: A broker that is quick to redeliver and to check transactions, on both systems:
#: every delay level (so every retry) is 1 s, and half messages older than 1 s are
#: checked back every second.
_QUICK = {
    "messageDelayLevel": ONE_SECOND_DELAY_LEVELS,
    "transactionCheckInterval": "1000",
    "transactionTimeOut": "1000",
}
#: What the mqadmin and trace modules add: the trace topic (``RMQ_SYS_TRACE_TOPIC``).
_ADMIN = {"traceTopicEnable": "true"}


@pytest.fixture(scope="session")
def java_driver(tmp_path_factory: pytest.TempPathFactory) -> JavaDriver:
    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    return compile_driver(tmp_path_factory.mktemp("java-driver"))


def _system(
    request: pytest.FixtureRequest, factory: pytest.TempPathFactory, props: dict[str, str]
) -> Iterator[System]:
    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    name: str = request.param
    root = factory.mktemp(f"{name}-{request.fixturename}")
    if name == "rocklet":
        with rocklet_system(root, props) as system:
            yield system
    else:
        with rocketmq_system(root, {**_ROCKETMQ_SMALL, **props}) as system:
            yield system


@pytest.fixture(scope="module", params=SYSTEMS)
def filtering_system(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[System]:
    """A name server and broker with ``enablePropertyFilter=true``."""
    yield from _system(request, tmp_path_factory, {"enablePropertyFilter": "true"})


@pytest.fixture(scope="module", params=SYSTEMS)
def default_system(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[System]:
    """A name server and broker with the default config (no property filters)."""
    yield from _system(request, tmp_path_factory, {})


@pytest.fixture(scope="session", params=SYSTEMS)
def quick_system(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[System]:
    """The session's shared name server and broker (``_QUICK`` and ``_ADMIN``).

    Delay levels all 1 s, transactions checked every second (half messages older than
    1 s), the trace topic on. Shared by the modules of delays and retries, consumers,
    request-reply, transactions, message trace and ``mqadmin``, which use topics and
    groups of their own; a test that changes broker-wide state (``brokerPermission``,
    the name server's write perms) restores it. A RocketMQ broker takes 15-20 s to boot
    on a small machine: once per parameter is enough.
    """
    yield from _system(request, tmp_path_factory, {**_QUICK, **_ADMIN})


@pytest.fixture(scope="session")
def admin_system(quick_system: System) -> System:
    """The system the ``mqadmin`` and trace modules drive: the shared one."""
    return quick_system


@pytest.fixture(scope="session")
def admin_tool(
    java_driver: JavaDriver, admin_system: System, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MqAdmin]:
    """``mqadmin`` against ``admin_system``'s name server.

    One JVM for every verb of the modules sharing that system (see mqadmin.py).
    """
    home = tmp_path_factory.mktemp(f"mqadmin-{admin_system.name}")
    with MqAdmin(java_driver, home, admin_system.namesrv) as tool:
        yield tool


@pytest.fixture(scope="session")
def seeded(
    java_driver: JavaDriver,
    admin_system: System,
    admin_tool: MqAdmin,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Seeded]:
    """``admin_system`` seeded for the verb modules (admin_seed.py), once per system."""
    home = tmp_path_factory.mktemp(f"mqadmin-seeded-{admin_system.name}")
    yield from seed(java_driver, admin_system, admin_tool, home)
