"""Plain ``--help`` text: the reStructuredText markup of docstrings taken out.

Some subcommands take their ``--help`` description from their module's docstring,
which is written for API readers: ````rocklet bench````, ``:class:`~a.B```` and
``Examples::`` read as noise in a terminal. :func:`plain_parser_help` rewrites every
description, epilog and argument help of a parser tree once, when the ``rocklet``
parser is built, so no subcommand (present or future) shows markup.
"""

from __future__ import annotations

import argparse
import inspect
import re
from typing import Final

__all__ = ["plain_parser_help", "plain_text"]

#: ``:class:`~pkg.Name``` -> ``Name``; ``:func:`pkg.name``` -> ``pkg.name``;
#: ``:ref:`text <target>``` -> ``text``.
_ROLE: Final = re.compile(r":[a-z]+(?::[a-z]+)?:`(~?)([^`<]*?)\s*(?:<[^>]*>)?`")
_LITERAL: Final = re.compile(r"``(.+?)``", re.DOTALL)
#: A paragraph ending in ``::`` introduces a literal block: keep one colon.
_BLOCK_INTRO: Final = re.compile(r"(\S)::$", re.MULTILINE)
_BARE_INTRO: Final = re.compile(r"^[ \t]*::[ \t]*\n(?:[ \t]*\n)?", re.MULTILINE)


def _role(match: re.Match[str]) -> str:
    text = match.group(2)
    return text.rsplit(".", 1)[-1] if match.group(1) else text


def plain_text(text: str) -> str:
    """Return ``text`` (a docstring or help string) without reStructuredText markup.

    Args:
        text: Text that may hold roles, inline literals and ``::`` block markers.

    Returns:
        The same words, dedented, as a terminal should show them.
    """
    text = _ROLE.sub(_role, inspect.cleandoc(text))
    text = _LITERAL.sub(r"\1", text)
    text = _BARE_INTRO.sub("", text)
    return _BLOCK_INTRO.sub(r"\1:", text)


def plain_parser_help(parser: argparse.ArgumentParser) -> None:
    """Make the help of ``parser`` and all its subcommands plain text, in place.

    A multi-line description keeps its line breaks (``RawDescriptionHelpFormatter``):
    docstrings are already wrapped, and re-flowing them would merge example lines.

    Args:
        parser: The root parser; subparsers are visited recursively.
    """
    for text_attr in ("description", "epilog"):
        value = getattr(parser, text_attr)
        if isinstance(value, str):
            setattr(parser, text_attr, plain_text(value))
    if isinstance(parser.description, str) and "\n" in parser.description:
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
    for action in parser._actions:
        if isinstance(action.help, str) and action.help != argparse.SUPPRESS:
            action.help = plain_text(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if isinstance(choice.help, str):
                    choice.help = plain_text(choice.help)
            for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                plain_parser_help(sub)
