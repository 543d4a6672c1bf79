"""The process's open-file limit: raised to the hard limit at start, and logged.

A broker holds one descriptor per client connection and one per mapped store file
(commitlog and consume-queue segments, index files); the usual soft limit of 1024
runs out long before the hard one. RocketMQ's start scripts leave this to the
operator (``ulimit -n``); a server process may raise its own soft limit up to the hard
limit without privileges, so it does, and says what it got. A hard limit below
:data:`RECOMMENDED_HARD_LIMIT` is worth a warning that names the fix.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from typing import Final

import structlog

__all__ = ["RECOMMENDED_HARD_LIMIT", "FdLimits", "raise_fd_limit"]

log = structlog.get_logger(__name__)

#: Below this hard limit a busy broker can run out of descriptors (connections plus
#: mapped files); RocketMQ's deployment guide asks for 655350.
RECOMMENDED_HARD_LIMIT: Final = 65536
#: What "unlimited" becomes: ``setrlimit`` refuses RLIM_INFINITY for the soft limit on
#: some systems (macOS) and Linux caps open files at ``fs.nr_open`` (1048576) anyway.
_UNLIMITED_TARGET: Final = 1_048_576


@dataclass(frozen=True)
class FdLimits:
    """The open-file limits before and after :func:`raise_fd_limit`.

    Attributes:
        soft_before: The soft limit the process started with.
        soft: The soft limit now.
        hard: The hard limit (``resource.RLIM_INFINITY`` when unlimited).
    """

    soft_before: int
    soft: int
    hard: int


def raise_fd_limit() -> FdLimits:
    """Raise the soft RLIMIT_NOFILE to the hard limit, and log both.

    Logs one INFO line with the values, and a WARNING saying what to do when the hard
    limit is below :data:`RECOMMENDED_HARD_LIMIT` or the raise failed.

    Returns:
        The limits before and after.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _UNLIMITED_TARGET if hard == resource.RLIM_INFINITY else hard
    new_soft = soft
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            new_soft = target
        except (ValueError, OSError) as exc:
            log.warning(
                "could not raise the open-file limit",
                soft=soft,
                hard=_shown(hard),
                error=str(exc),
            )
    limits = FdLimits(soft, new_soft, hard)
    log.info("open-file limit", soft_before=soft, soft=_shown(new_soft), hard=_shown(hard))
    if hard != resource.RLIM_INFINITY and hard < RECOMMENDED_HARD_LIMIT:
        log.warning(
            "the hard open-file limit is low: each client connection and each mapped store "
            f"file needs a descriptor; raise it to at least {RECOMMENDED_HARD_LIMIT} "
            "(ulimit -Hn as root, LimitNOFILE= in a systemd unit, "
            "--ulimit nofile=65536:65536 for docker run)",
            hard=hard,
        )
    return limits


def _shown(value: int) -> int | str:
    return "unlimited" if value == resource.RLIM_INFINITY else value
