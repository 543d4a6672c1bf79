#!/usr/bin/env bash
# The fast test tier (everything but Spark, the official C++ client suite, tests marked
# slow, and the adversity and replication process tiers, which drive the same modules
# through subprocesses and run on the default interpreter) on other Python versions,
# each in its own .venv-<version>.
# Interpreters come from pyenv (which keeps them on our machines) or from PATH; none is
# downloaded. Usage: tools/test_pythons.sh [--prepare] 3.12 3.13:pure
# (--prepare only builds the environments: CI does that while the default suite runs.)
# (":pure" runs that interpreter's tier with ROCKLET_PURE_PYTHON=1: the pure-Python twins
# of the compiled codecs, so both paths pass the tests.)
set -euo pipefail
cd "$(dirname "$0")/.."
prepare_only=""
if [ "${1:-}" = --prepare ]; then
  prepare_only=1
  shift
fi

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

# Prepare every environment first (pip is not run concurrently), then run the tiers side
# by side: each is mostly one Python process, so on two cores the pair takes little more
# than the longer one. Each tier's output goes to a log printed when it ends.
specs=()
for spec in "$@"; do
  version=${spec%%:*}
  python=$(find_python "$version") || {
    echo "test-pythons: no Python $version here (pyenv or python$version on PATH)" >&2
    exit 1
  }
  venv=".venv-$version"
  echo "==> Python $version: $python ($("$python" -V 2>&1)), environment $venv"
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  stamp="$venv/.dev-stamp"
  stale=""
  for input in pyproject.toml setup.py */_speedups.pyx */*.pxi; do
    [ "$input" -nt "$stamp" ] && stale=1
  done
  if [ ! -f "$stamp" ] || [ -n "$stale" ]; then
    "$venv/bin/python" -m pip --disable-pip-version-check install --quiet --upgrade pip
    "$venv/bin/python" -m pip --disable-pip-version-check install --quiet -e '.[dev]'
    touch "$stamp"
  fi
  specs+=("$spec")
done
if [ -n "$prepare_only" ]; then
  echo "==> environments ready: ${specs[*]}"
  exit 0
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
for spec in "${specs[@]}"; do
  version=${spec%%:*}
  pure=""
  [ "$spec" != "$version" ] && [ "${spec#*:}" = pure ] && pure=1
  echo "==> Python $version: fast tier started${pure:+ with the pure-Python twins (ROCKLET_PURE_PYTHON=1)}"
  ROCKLET_PURE_PYTHON=$pure ".venv-$version/bin/python" -m pytest -q -p no:cacheprovider \
    -m "not slow and not spark and not compat and not adversity and not replication" \
    >"$logs/$version.log" 2>&1 &
  pids+=($!)
done

ran=()
failed=""
for i in "${!specs[@]}"; do
  spec=${specs[$i]}
  version=${spec%%:*}
  status=0
  wait "${pids[$i]}" || status=$?
  echo "==> Python $version ($spec): exit $status"
  cat "$logs/$version.log"
  if [ "$status" -eq 0 ]; then
    note=""
    [ "$spec" != "$version" ] && note=" pure Python"
    ran+=("$version ($(".venv-$version/bin/python" -V 2>&1))$note")
  else
    failed="$failed $spec"
  fi
done
if [ -n "$failed" ]; then
  echo "==> fast tier FAILED on:$failed" >&2
  exit 1
fi
echo "==> fast tier passed on: ${ran[*]}"
