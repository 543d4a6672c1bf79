"""Run mypy over the installed layout: ``rocklet.broker`` is ``broker/``, and so on.

The repository keeps the design card's folders at its top (``broker/``, ``client/``,
``protocol/``, ``store/`` ...) and setuptools installs them under the ``rocklet``
namespace (``[tool.setuptools.package-dir]`` in pyproject.toml). Python finds them
through the editable install's import hook, but mypy does not run import hooks, so
this script builds the same layout from symlinks under ``build/typecheck/`` and runs
mypy there. Reported paths are mapped back to the files you edit.

Usage: ``python tools/typecheck.py [mypy options]`` (``make typecheck`` runs it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VIEW = ROOT / "build" / "typecheck"
#: Checked besides the ``rocklet`` namespace, as they sit in the checkout.
EXTRA = ("pyspark_rocklet", "tests", "examples", "tools")


def _mapped_folders() -> dict[str, str]:
    """Return ``{"broker": "broker", ...}``: subpackage name to checkout folder."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    return {name.removeprefix("rocklet."): folder for name, folder in mapping.items()}


def build_view() -> dict[str, str]:
    """(Re)build the symlink view; return the folder mapping it used."""
    folders = _mapped_folders()
    shutil.rmtree(VIEW, ignore_errors=True)
    namespace = VIEW / "rocklet"
    namespace.mkdir(parents=True)
    for entry in (ROOT / "rocklet").iterdir():
        if entry.name != "__pycache__":
            (namespace / entry.name).symlink_to(entry)
    for sub, folder in folders.items():
        (namespace / sub).symlink_to(ROOT / folder, target_is_directory=True)
    for name in EXTRA:
        (VIEW / name).symlink_to(ROOT / name, target_is_directory=True)
    return folders


def main(argv: list[str]) -> int:
    """Build the view, run mypy in it, print its report with checkout paths."""
    folders = build_view()
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        str(ROOT / ".mypy_cache"),
        *argv,
        "rocklet",
        *EXTRA,
    ]
    proc = subprocess.run(command, cwd=VIEW, capture_output=True, text=True, check=False)
    back = re.compile(r"^rocklet/(" + "|".join(map(re.escape, folders)) + r")/", re.M)

    def to_checkout(text: str) -> str:
        return back.sub(lambda m: folders[m.group(1)] + "/", text)

    sys.stdout.write(to_checkout(proc.stdout))
    sys.stderr.write(to_checkout(proc.stderr))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
