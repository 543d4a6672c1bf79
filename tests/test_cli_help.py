"""Every ``rocklet ... --help`` is plain text: no reStructuredText from docstrings."""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys

import pytest

from rocklet.cli import build_parser
from rocklet.help_text import plain_text

MARKUP = ("``", ":class:", ":func:", ":mod:", ":meth:", ":attr:", ":data:", "::\n")


def command_paths(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Every command line that has its own ``--help``: (), ("admin",), ("admin", "topicList") ..."""
    paths = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                paths.extend(command_paths(sub, (*prefix, name)))
    return paths


def help_of(path: tuple[str, ...]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*path, "--help"])
    assert exited.value.code == 0
    return out.getvalue()


PATHS = command_paths(build_parser())


def test_the_walk_reaches_every_level() -> None:
    assert {(), ("bench",), ("admin",), ("admin", "updateSubGroup"), ("standalone",)} <= set(PATHS)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(("rocklet", *p)))
def test_help_has_no_rst_markup(path: tuple[str, ...]) -> None:
    text = help_of(path)
    assert text.startswith("usage: rocklet")
    found = [m for m in MARKUP if m in text]
    assert not found, f"rocklet {' '.join(path)} --help shows {found}:\n{text}"


def test_bench_help_keeps_its_example_lines() -> None:
    text = help_of(("bench",))
    assert "Examples:\n\n    rocklet bench  " in text
    assert "\n    rocklet bench --quick  " in text
    assert "rocklet bench: the command-line face of the suite (make bench)." in text


def test_plain_text_rewrites_roles_literals_and_block_markers() -> None:
    doc = """Read with :class:`~rocklet.client.Producer` or :func:`rocklet.spark.run`.

    Run ``rocklet x`` like :ref:`the guide <guide>`::

        rocklet x --y

    ::

        more
    """
    assert plain_text(doc) == (
        "Read with Producer or rocklet.spark.run.\n\n"
        "Run rocklet x like the guide:\n\n    rocklet x --y\n\n    more"
    )


def test_building_the_parser_loads_no_sdk() -> None:
    """produce and consume import the SDK only when they run (servers share this parser)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "rocklet", "consume", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    modules = {ln.rsplit("|", 1)[1].strip() for ln in proc.stderr.splitlines() if "|" in ln}
    assert "rocklet.message_args" in modules  # the probe sees our imports
    assert not {m for m in modules if m.startswith(("rocklet.client", "rocklet.spark"))}
