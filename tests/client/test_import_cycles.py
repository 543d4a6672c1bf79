"""No import cycles between the modules of ``rocklet.client``.

Every import statement of every module counts, wherever it is (module level,
``TYPE_CHECKING`` blocks, function bodies): a cycle hidden behind a local import or a
type-checking guard is still two modules that cannot be understood apart.
``from rocklet.client import x`` names the submodule ``x`` when there is one, and the
package itself (its ``__init__``, which imports the public classes) otherwise.
"""

from __future__ import annotations

import ast
from pathlib import Path

from rocklet import client

PACKAGE = "rocklet.client"
ROOT = Path(client.__file__ or "").parent


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join((PACKAGE, *parts))


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports."""
    modules = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            graph[name].update(_targets(node, package, modules))
        graph[name].discard(name)
    return graph


def _targets(node: ast.AST, package: str, modules: dict[str, Path]) -> set[str]:
    if isinstance(node, ast.Import):
        return {_owner(alias.name, modules) for alias in node.names} - {""}
    if not isinstance(node, ast.ImportFrom):
        return set()
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        source = ".".join([*base, node.module] if node.module else base)
    else:
        source = node.module or ""
    found = set()
    for alias in node.names:
        submodule = f"{source}.{alias.name}"
        found.add(submodule if submodule in modules else _owner(source, modules))
    return found - {""}


def _owner(dotted: str, modules: dict[str, Path]) -> str:
    """The innermost module of the package that ``dotted`` names, or ``""``."""
    while dotted:
        if dotted in modules:
            return dotted
        dotted = dotted.rpartition(".")[0]
    return ""


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_the_client_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 20 and graph[PACKAGE]  # the walk saw the package and its imports
    assert find_cycles(graph) == []


def test_the_detector_sees_cycles_through_local_and_type_checking_imports(
    tmp_path: Path,
) -> None:
    files = {
        "__init__.py": "from rocklet.client.a import A\n",
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
        "b.py": "def f():\n    from rocklet.client import a\n",
        "c.py": "from rocklet.client import A\n",
        "d.py": "import rocklet.client.c\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path)
    assert graph == {
        PACKAGE: {f"{PACKAGE}.a"},
        f"{PACKAGE}.a": {f"{PACKAGE}.b"},
        f"{PACKAGE}.b": {f"{PACKAGE}.a"},
        f"{PACKAGE}.c": {PACKAGE},
        f"{PACKAGE}.d": {f"{PACKAGE}.c"},
    }
    assert find_cycles(graph) == [[f"{PACKAGE}.a", f"{PACKAGE}.b"]]
