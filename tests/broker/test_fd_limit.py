"""The open-file limit: a server process raises its soft limit to the hard one and says so.

Run in child processes that start with a low soft limit (and, for the warning, a low
hard limit), as a shell's ``ulimit`` would leave them; the test process's own limits
are never touched.
"""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

PROBE = """
import resource, sys
from rocklet.logging import configure_logging
from rocklet.broker.fd_limit import raise_fd_limit
configure_logging(stream=sys.stdout)
limits = raise_fd_limit()
print("RESULT", limits.soft_before, limits.soft, limits.hard,
      resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"""


def run_with(soft: int, hard: int | None = None) -> tuple[list[int], str]:
    def limit() -> None:
        _, current_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, current_hard if hard is None else hard))

    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        preexec_fn=limit,  # only sets the limits, before exec
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    result = next(line for line in out.splitlines() if line.startswith("RESULT"))
    return [int(v) for v in result.split()[1:]], out


def test_the_soft_limit_is_raised_to_the_hard_one_and_logged() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 256:
        pytest.skip(f"needs a finite hard limit above 256, have {hard}")
    (before, soft, reported_hard, effective), log = run_with(256)
    assert (before, soft, reported_hard, effective) == (256, hard, hard, hard)
    line = next(line for line in log.splitlines() if "open-file limit" in line)
    assert "soft_before=256" in line and f"soft={hard}" in line and f"hard={hard}" in line
    if hard >= 65536:
        assert "warning" not in log.lower()


def test_a_low_hard_limit_is_a_warning_that_says_what_to_do() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip(f"needs a hard limit of at least 4096, have {hard}")
    (before, soft, reported_hard, effective), log = run_with(512, 4096)
    assert (before, soft, reported_hard, effective) == (512, 4096, 4096, 4096)
    warning = next(line for line in log.splitlines() if "hard open-file limit is low" in line)
    assert "warning" in warning and "hard=4096" in warning
    assert "LimitNOFILE=" in warning and "ulimit -Hn" in warning and "--ulimit nofile" in warning
