"""Exponential backoff with jitter, as a pure, clock-free component.

Used by the client instance to space out reconnect attempts to a broker or name
server that refused us (redis-py ``backoff.py`` "equal jitter"; RocketMQ clients wait a
fixed 1-3 s instead, which hammers a restarting broker with every client at once).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["Backoff", "BackoffState"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delay policy: ``base * factor**(failures-1)``, capped, with "equal jitter".

    With equal jitter the delay is uniformly drawn from ``[d/2, d]``: never shorter than
    half the nominal delay (so a dead peer is not hammered), yet spread out enough that
    many clients do not retry in lockstep.

    Args:
        base_s: Delay after the first failure. Default: 0.1 s.
        factor: Growth per further failure. Default: 2.
        max_s: Upper bound of the nominal delay. Default: 5 s.
    """

    base_s: float = 0.1
    factor: float = 2.0
    max_s: float = 5.0

    def __post_init__(self) -> None:
        if self.base_s < 0 or self.factor < 1 or self.max_s < self.base_s:
            raise ValueError(f"invalid backoff {self!r}")

    def delay_s(self, failures: int, rng: random.Random | None = None) -> float:
        """The delay before the next attempt after ``failures`` consecutive failures.

        Args:
            failures: Consecutive failures so far (0 means no wait).
            rng: Random source (tests pass a seeded one). Default: the module's.

        Returns:
            Seconds to wait, in ``[nominal/2, nominal]``.
        """
        if failures <= 0:
            return 0.0
        # min() before the power would overflow: cap the exponent at a safe size.
        nominal = min(self.max_s, self.base_s * self.factor ** min(failures - 1, 64))
        uniform = (rng or random).uniform
        return nominal / 2 + uniform(0.0, nominal / 2)


@dataclass(slots=True)
class BackoffState:
    """Consecutive failures of one peer and when the next attempt is allowed.

    All times are caller-supplied monotonic seconds, so the class needs no clock.

    Args:
        policy: The delay policy.
    """

    policy: Backoff = field(default_factory=Backoff)
    failures: int = 0
    retry_at: float = 0.0

    def failed(self, now: float, rng: random.Random | None = None) -> float:
        """Record a failure at ``now``.

        Args:
            now: Monotonic time of the failure.
            rng: Random source for the jitter.

        Returns:
            The time before which no new attempt should be made.
        """
        self.failures += 1
        self.retry_at = now + self.policy.delay_s(self.failures, rng)
        return self.retry_at

    def succeeded(self) -> None:
        """Record a success: the next failure starts from the base delay again."""
        self.failures = 0
        self.retry_at = 0.0

    def may_attempt(self, now: float) -> bool:
        """Whether an attempt is allowed at ``now``."""
        return now >= self.retry_at
