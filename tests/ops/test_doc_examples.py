"""The documentation's complete examples, run as a reader would run them.

A Python block of README.md or docs/ is a *program* when it compiles as a module and
uses no name it does not define (``spark``, ``query`` and top-level ``await`` mark the
fragments that live inside a reader's own code). Every program of a document runs, in
the document's order, against one real ``rocklet standalone`` on free ports, with the
documented ``127.0.0.1:9876`` replaced by its name server's address. Each must exit 0
and print what the text around it promises.
"""

from __future__ import annotations

import asyncio
import builtins
import re
import symtable
import sys
from pathlib import Path

import pytest

from tests.test_cli import TIMEOUT
from tests.test_cli_messages import running_standalone

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_NAMESRV = "127.0.0.1:9876"

#: What each program of a document prints (a substring of its output), in order. A new
#: program in a document needs its line here, so that it is run and checked.
PRINTS: dict[str, list[str]] = {
    "README.md": ["demo greeting b'hello'", "hello from the C++ client"],
    "docs/sdk.md": [
        "",  # the import list
        "SendStatus.SEND_OK",
        "LocalTransactionState.COMMIT SendStatus.SEND_OK",
        "b'42.00'",
        "created b'order #1'",
        "b'order #1'",
        "[b'",  # one poll: some of the orders, whichever queues it read first
        "rocklet admin queryMsgTraceById -i ",
        "[b'user 42 logged in']",
        "",  # logging's configuration
    ],
    "docs/protocol.md": [""],
}

#: Documents with a program that drives the official C++ client (the ``compat`` marker).
CPP_CLIENT = {"README.md"}


def _free_names(source: str) -> set[str]:
    """Global names a module reads but neither assigns, imports nor gets from builtins."""
    module = symtable.symtable(source, "<example>", "exec")
    defined = {s.get_name() for s in module.get_symbols() if s.is_assigned() or s.is_imported()}
    used: set[str] = set()
    tables = [module]
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        used.update(s.get_name() for s in table.get_symbols() if s.is_global())
    return used - defined - set(dir(builtins))


def programs(text: str) -> list[str]:
    """The complete programs among a Markdown text's Python blocks, in order."""
    found = []
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        try:
            compile(block, "<example>", "exec")
        except SyntaxError:  # top-level await: a fragment of the reader's coroutine
            continue
        if not _free_names(block):
            found.append(block)
    return found


def _documents() -> list[str]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [str(p.relative_to(ROOT)) for p in docs if programs(p.read_text())]


def test_every_program_of_the_docs_has_its_expected_output() -> None:
    assert sorted(PRINTS) == _documents()
    for doc, prints in PRINTS.items():
        assert len(programs((ROOT / doc).read_text())) == len(prints), doc


def test_fragments_are_told_from_programs() -> None:
    text = "\n".join(
        f"```python\n{body}```"
        for body in (
            "import os\nprint(os.sep)\n",  # a program
            "df = spark.read.load()\n",  # uses the reader's session
            "from x import y\nawait y()\n",  # top-level await
            "def f():\n    return undefined_name\n",  # a free name inside a function
        )
    )
    assert programs(text) == ["import os\nprint(os.sep)\n"]


async def _run(program: str, cwd: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        program,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT * 2)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _cases() -> list[object]:
    return [
        pytest.param(doc, marks=[pytest.mark.compat] if doc in CPP_CLIENT else [], id=doc)
        for doc in PRINTS
    ]


@pytest.mark.slow
@pytest.mark.parametrize("doc", _cases())
async def test_the_programs_of_a_document_run_in_order(doc: str, tmp_path: Path) -> None:
    # In order, on one broker: a reader sends the orders before reading them.
    found = programs((ROOT / doc).read_text())
    async with running_standalone(tmp_path) as standalone:
        for index, program in enumerate(found):
            code, out, err = await _run(
                program.replace(DEFAULT_NAMESRV, standalone.namesrv), tmp_path
            )
            assert code == 0, f"{doc} program {index}:\n{err}"
            assert PRINTS[doc][index] in out, f"{doc} program {index} printed:\n{out}"
