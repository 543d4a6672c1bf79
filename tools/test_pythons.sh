#!/usr/bin/env bash
# The fast test tier (everything but Spark, the official C++ client suite, tests marked
# slow, and the adversity and replication process tiers, which drive the same modules
# through subprocesses and run on the default interpreter) on other Python versions,
# each in its own .venv-<version>.
# Interpreters come from pyenv (which keeps them on our machines) or from PATH; none is
# downloaded. Usage: tools/test_pythons.sh 3.12 3.13
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {
  local version=$1 candidate
  if command -v pyenv >/dev/null 2>&1; then
    for candidate in "$(pyenv root)"/versions/"$version"*/bin/python"$version"; do
      [ -x "$candidate" ] && { echo "$candidate"; return 0; }
    done
  fi
  candidate=$(command -v "python$version" 2>/dev/null) && "$candidate" -V >/dev/null 2>&1 \
    && { echo "$candidate"; return 0; }
  return 1
}

ran=()
for version in "$@"; do
  python=$(find_python "$version") || {
    echo "test-pythons: no Python $version here (pyenv or python$version on PATH)" >&2
    exit 1
  }
  venv=".venv-$version"
  echo "==> Python $version: $python ($("$python" -V 2>&1)), environment $venv"
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  stamp="$venv/.dev-stamp"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    "$venv/bin/python" -m pip --disable-pip-version-check install --quiet --upgrade pip
    "$venv/bin/python" -m pip --disable-pip-version-check install --quiet -e '.[dev]'
    touch "$stamp"
  fi
  "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    -m "not slow and not spark and not compat and not adversity and not replication"
  ran+=("$version ($("$venv/bin/python" -V 2>&1))")
done
echo "==> fast tier passed on: ${ran[*]}"
