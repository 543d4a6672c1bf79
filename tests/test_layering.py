"""Each layer imports only downward: protocol <- transport <- store / broker / client.

Imports are read with ``ast`` from every module of every package (aliased, nested and
function-local imports count), and the servers are started as real processes under
``python -X importtime`` to prove that they load no SDK module at run time either.
"""

from __future__ import annotations

import ast
import asyncio
import signal
import sys
import tomllib
from pathlib import Path

import pytest

from rocklet import broker, client, protocol, spark, store, transport

#: What each package may import of ours, besides itself.
ALLOWED: dict[str, set[str]] = {
    "protocol": set(),
    "transport": {"protocol"},
    "store": {"protocol", "transport"},
    "broker": {"protocol", "transport", "store"},
    "client": {"protocol", "transport"},
    "spark": {"protocol", "transport", "client"},
}
PACKAGES = {
    "protocol": protocol,
    "transport": transport,
    "store": store,
    "broker": broker,
    "client": client,
    "spark": spark,
}
TIMEOUT = 20.0
ROOT = Path(__file__).resolve().parents[1]


def _ours(module: str, package: str, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The ``rocklet.*`` subpackages one import statement names (absolute form)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        names = [".".join([*base, node.module] if node.module else base)]
    else:
        names = [node.module or ""]
    return [n.split(".")[1] for n in names if n.startswith("rocklet.") and n.count(".") >= 1]


def _imports_of(package: str) -> dict[str, set[str]]:
    root = Path(PACKAGES[package].__file__ or "").parent
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        module = ".".join(("rocklet", package, *rel.parts))
        pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for sub in _ours(module, pkg, node):
                    found.setdefault(sub, set()).add(str(path.relative_to(root.parent)))
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_downward(package: str) -> None:
    imported = _imports_of(package)
    wrong = {
        sub: sorted(files)
        for sub, files in imported.items()
        if sub != package and sub not in ALLOWED[package]
    }
    assert not wrong, f"{package} imports upward or sideways: {wrong}"


def test_the_checker_sees_relative_and_nested_imports() -> None:
    tree = ast.parse(
        "def f():\n"
        "    from rocklet.client import x\n"
        "from ..store import y\n"
        "import rocklet.broker.app\n"
    )
    seen = [
        sub
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for sub in _ours("rocklet.transport.tasks", "rocklet.transport", node)
    ]
    assert sorted(seen) == ["broker", "client", "store"]


def test_the_admin_cli_imports_no_server_code() -> None:
    # ``rocklet admin`` administers servers over the wire, like mqadmin: it may use the
    # SDK and the protocol, never the broker's or the store's modules.
    root = ROOT / "rocklet" / "admin"
    wrong: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for sub in _ours("rocklet.admin.verb", "rocklet.admin", node):
                    if sub in ("broker", "store", "spark"):
                        wrong.setdefault(sub, set()).add(path.name)
    assert list(root.glob("verbs*.py")), "the admin package moved: update this test"
    assert not wrong, wrong


def test_every_mapped_package_is_checked() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapped = pyproject["tool"]["setuptools"]["package-dir"]
    assert {name.removeprefix("rocklet.") for name in mapped} == set(ALLOWED) == set(PACKAGES)


async def _imported_by_server(args: list[str], ready: str) -> set[str]:
    """Start ``rocklet <args>`` under -X importtime; return the modules it loaded."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "rocklet",
        *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    try:

        async def until_ready() -> None:
            assert proc.stderr is not None
            while line := await proc.stderr.readline():
                lines.append(line.decode(errors="replace"))
                if ready in lines[-1]:
                    return
            raise AssertionError("server ended before it was ready:\n" + "".join(lines[-30:]))

        await asyncio.wait_for(until_ready(), TIMEOUT)
        proc.send_signal(signal.SIGTERM)
        rest = await asyncio.wait_for(proc.stderr.read(), TIMEOUT)
        lines.extend(rest.decode(errors="replace").splitlines())
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}


async def test_the_name_server_loads_no_sdk_module() -> None:
    modules = await _imported_by_server(
        ["namesrv", "--port", "0", "--host", "127.0.0.1"], "namesrv listening"
    )
    assert "rocklet.broker.namesrv.server" in modules  # the probe sees our imports
    assert not {m for m in modules if m.startswith(("rocklet.client", "rocklet.spark"))}


async def test_the_broker_loads_no_sdk_module(tmp_path: Path) -> None:
    modules = await _imported_by_server(
        ["standalone", "--data-dir", str(tmp_path), "--namesrv-port", "0", "--listen-port", "0"],
        "broker listening",
    )
    assert "rocklet.broker.app" in modules
    assert not {m for m in modules if m.startswith(("rocklet.client", "rocklet.spark"))}
