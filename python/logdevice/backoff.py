"""Exponential backoff: the pause before each next try, for every retry loop of the package.

Sans-I/O: ``ExponentialBackoff`` hands out delays and the caller sleeps (or arms a timer).
Try ``k`` (from 0) waits ``initial * multiplier**k``, capped at ``maximum``.  Two ways to
use it:

- a retry loop keeps one object: ``next_delay()`` per try, ``reset()`` after a success;
- a state machine that already counts its attempts asks ``delay(attempt)``, which neither
  counts nor draws jitter.

With ``jitter`` ``j`` (0 .. 1) each ``next_delay()`` is drawn uniformly from
``[d * (1 - j), d]``, so that many clients retrying the same failure do not come back in
lock step; ``rng`` (``() -> float in [0, 1)``, e.g. ``random.Random(seed).random``) makes
that draw reproducible.  Without jitter the delays are exact and no random number is drawn.
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["ExponentialBackoff"]


class ExponentialBackoff:
    """``initial * multiplier**k`` seconds before try ``k``, at most ``maximum``; see the
    module docstring."""

    __slots__ = ("initial", "maximum", "multiplier", "jitter", "attempts", "_rng", "_capped_at")

    def __init__(self, initial: float, maximum: float, multiplier: float = 2.0, *,
                 jitter: float = 0.0, rng: Callable[[], float] | None = None) -> None:
        if initial < 0 or maximum < initial:
            raise ValueError(f"backoff needs 0 <= initial <= maximum, got {initial}, {maximum}")
        if multiplier < 1:
            raise ValueError(f"backoff multiplier must be at least 1, got {multiplier}")
        if not 0 <= jitter <= 1:
            raise ValueError(f"backoff jitter must be in [0, 1], got {jitter}")
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
        self.jitter = jitter
        self.attempts = 0  # tries counted by next_delay since the last reset
        self._rng = rng if rng is not None else random.random
        # The first try whose delay is the maximum: no power past it (it could overflow).
        k, d = 0, initial
        while d < maximum and d > 0 and multiplier > 1:
            k, d = k + 1, d * multiplier
        self._capped_at = k

    def delay(self, attempt: int) -> float:
        """The delay before try ``attempt`` (0 is the first), without jitter."""
        return min(self.maximum, self.initial * self.multiplier ** min(attempt, self._capped_at))

    @property
    def upcoming(self) -> float:
        """The delay the next ``next_delay()`` is drawn from (before jitter)."""
        return self.delay(self.attempts)

    def next_delay(self) -> float:
        """The delay before the next try (and count this try)."""
        d = self.delay(self.attempts)
        self.attempts += 1
        if self.jitter:
            return d * (1 - self.jitter + self.jitter * self._rng())
        return d

    def reset(self) -> None:
        """After a success: the next try waits ``initial`` again."""
        self.attempts = 0
