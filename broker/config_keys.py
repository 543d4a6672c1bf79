"""Which keys of a configuration file Rocklet will not use, and why.

RocketMQ ignores a key it does not know without a word, so a typo
(``mapedFileSizeCommitLog``) silently leaves the default in force. Rocklet keeps those
keys too (``extra``, shown by GET_BROKER_CONFIG) but says so at start, in two kinds:

- *unknown*: neither Rocklet nor RocketMQ 4.9.4 reads it; one warning per key, with the
  closest known name when one is near (``difflib``, case-insensitive);
- *not implemented*: RocketMQ 4.9.4 reads it and Rocklet does not (thread pools,
  DLedger, ...); one warning listing them all, since a RocketMQ file carries many.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Final

import structlog

__all__ = ["KeyReview", "log_key_review", "review_keys"]

_log = structlog.get_logger(__name__)

#: How alike (difflib ratio of the lower-cased names) a key must be to be suggested.
_CUTOFF: Final = 0.8


@dataclass(frozen=True, slots=True)
class KeyReview:
    """What a configuration file sets that Rocklet will not use.

    Attributes:
        unknown: Keys nobody reads, each with the closest known key or ``None``.
        not_implemented: Keys RocketMQ reads and Rocklet ignores, sorted.
    """

    unknown: dict[str, str | None]
    not_implemented: tuple[str, ...]

    @property
    def clean(self) -> bool:
        """Whether every key is one Rocklet uses."""
        return not self.unknown and not self.not_implemented


def review_keys(
    keys: Iterable[str], implemented: Collection[str], rocketmq: Collection[str]
) -> KeyReview:
    """Sort a file's keys into used, not implemented and unknown.

    Args:
        keys: The keys the file sets.
        implemented: Keys Rocklet reads.
        rocketmq: Keys RocketMQ 4.9.4 reads (:mod:`rocklet.broker.rocketmq_keys`).

    Returns:
        The keys Rocklet will not use.
    """
    by_lower: dict[str, str] = {}
    for name in (*rocketmq, *implemented):  # ours win a case-only clash
        by_lower[name.lower()] = name
    unknown: dict[str, str | None] = {}
    not_implemented: list[str] = []
    for key in keys:
        if key in implemented:
            continue
        if key in rocketmq:
            not_implemented.append(key)
            continue
        close = difflib.get_close_matches(key.lower(), by_lower, n=1, cutoff=_CUTOFF)
        unknown[key] = by_lower[close[0]] if close else None
    return KeyReview(unknown, tuple(sorted(not_implemented)))


def log_key_review(review: KeyReview, source: str) -> None:
    """Warn about each unknown key and, in one line, the keys not implemented.

    Args:
        review: From :func:`review_keys`.
        source: Where the keys came from (the file's path), named in each warning.
    """
    for key, suggestion in review.unknown.items():
        if suggestion is None:
            _log.warning("unknown config key ignored", key=key, file=source)
        else:
            _log.warning(
                f"unknown config key ignored; did you mean {suggestion}?",
                key=key,
                did_you_mean=suggestion,
                file=source,
            )
    if review.not_implemented:
        _log.warning(
            "RocketMQ config keys Rocklet does not implement, ignored",
            keys=", ".join(review.not_implemented),
            file=source,
        )
